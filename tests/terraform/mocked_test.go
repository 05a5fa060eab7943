package terraform

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/ssfkit/ssfkit/internal/build"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/tftest"
)

// testedModules are each cloud's modules with a tests directory: all of them, for Azure and GCP,
// whose providers cannot apply anything here.
var testedModules = []string{"environment", "ssf", filepath.Join("examples", "bank"), "coordination"}

var passed = regexp.MustCompile(`Success! (\d+) passed, 0 failed`)

// terraformTestMocked runs `terraform validate` and `terraform test` (mock providers) in each of
// the cloud's modules, with the providers built by `make tools`.
func terraformTestMocked(t *testing.T, tf *tftest.Terraform, modules, cloud string) {
	ctx := context.Background()
	for _, m := range testedModules {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(modules, cloud, m)
			tf.Must(ctx, dir, "init", "-backend=false", "-no-color")
			tf.Must(ctx, dir, "validate", "-no-color")
			out := tf.Must(ctx, dir, "test", "-no-color")
			match := passed.FindStringSubmatch(out)
			if match == nil {
				t.Fatalf("terraform test did not succeed:\n%s", out)
			}
			if n, _ := strconv.Atoi(match[1]); n == 0 {
				t.Fatalf("terraform test ran no test:\n%s", out)
			}
			t.Logf("%s/%s: %s", cloud, m, match[0])
		})
	}
}

// TestGCP: the modules' terraform tests with a mocked provider, then plans of the bank example
// (state on Firestore, and on Bigtable) by the real provider, offline (a fake token; the project number given so no API is read),
// which the policies pass without a warning.
func TestGCP(t *testing.T) {
	t.Parallel() // its own copy of the modules, mocked or offline providers: nothing shared
	tf, modules := tftest.New(t), tftest.CopyModules(t)
	terraformTestMocked(t, tf, modules, "gcp")
	ctx := context.Background()
	dir := filepath.Join(modules, "gcp", "examples", "bank")
	for _, variant := range []struct{ store, state, notState string }{
		{"firestore", "google_firestore_database", "google_bigtable_table"},
		{"bigtable", "google_bigtable_table", "google_firestore_database"},
	} {
		plan := "bank-" + variant.store + ".plan"
		args := []string{"plan", "-no-color", "-out", plan, "-var", "project=ssfkit-bank", "-var", "project_number=123456789012",
			"-var", "access_token=offline", "-var", "image=europe-west1-docker.pkg.dev/ssfkit-bank/ssfkit/bank@sha256:" + sha256Zero}
		if variant.store == "bigtable" {
			args = append(args, "-var", "bigtable_zone=europe-west1-b")
		}
		tf.Must(ctx, dir, args...)
		var changes struct {
			ResourceChanges []struct{ Type string } `json:"resource_changes"`
		}
		if err := json.Unmarshal([]byte(tf.Must(ctx, dir, "show", "-json", plan)), &changes); err != nil {
			t.Fatal(err)
		}
		types := map[string]int{}
		for _, c := range changes.ResourceChanges {
			types[c.Type]++
		}
		if types[variant.state] != 3 || types[variant.notState] != 0 {
			t.Fatalf("the plan on %s makes %d %s (want one per SSF) and %d %s (want none)", variant.store, types[variant.state], variant.state, types[variant.notState], variant.notState)
		}
		// Provenance: the environment's bucket, and each SSF's grant of its own partitions in it.
		if types["google_storage_bucket"] != 1 || types["google_storage_bucket_iam_member"] != 3 {
			t.Fatalf("the plan on %s makes %d buckets and %d bucket grants, want the provenance bucket and one grant per SSF", variant.store, types["google_storage_bucket"], types["google_storage_bucket_iam_member"])
		}
		if v := evaluatePolicies(t, tf, dir, plan); len(v.Deny) != 0 || len(v.Warn) != 0 {
			t.Fatalf("policies on the bank's plan on %s: %+v, want nothing", variant.store, v)
		}
	}
}

// TestGCPCoordination plans the coordination example (modules/gcp/examples/coordination) with
// the real provider, offline, and checks what the plan makes and that the policies pass it with
// nothing to say (the module's terraform test, mocked, runs in TestGCP).
func TestGCPCoordination(t *testing.T) {
	t.Parallel() // its own copy of the modules, mocked or offline providers: nothing shared
	tf, modules := tftest.New(t), tftest.CopyModules(t)
	ctx := context.Background()
	dir := filepath.Join(modules, "gcp", "examples", "coordination")
	tf.Must(ctx, dir, "init", "-no-color")
	tf.Must(ctx, dir, "validate", "-no-color")
	tf.Must(ctx, dir, "plan", "-no-color", "-out", "coordination.plan", "-var", "project=ssfkit-coord", "-var", "project_number=123456789012",
		"-var", "access_token=offline", "-var", "image=europe-west1-docker.pkg.dev/ssfkit-coord/ssfkit/coord@sha256:"+sha256Zero)
	var changes struct {
		ResourceChanges []struct{ Type string } `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(tf.Must(ctx, dir, "show", "-json", "coordination.plan")), &changes); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, c := range changes.ResourceChanges {
		types[c.Type]++
	}
	for typ, n := range map[string]int{"google_firestore_database": 1, "google_pubsub_topic": 2, "google_pubsub_subscription": 2, "google_storage_bucket": 1,
		"google_cloud_run_v2_service": 2, "google_cloud_scheduler_job": 1, "google_service_account": 4, "google_storage_bucket_iam_member": 3} {
		if types[typ] != n {
			t.Errorf("the plan makes %d %s, want %d (all: %v)", types[typ], typ, n, types)
		}
	}
	if v := evaluatePolicies(t, tf, dir, "coordination.plan"); len(v.Deny) != 0 || len(v.Warn) != 0 {
		t.Fatalf("policies on the coordination example's plan: %+v, want nothing", v)
	}
}

const sha256Zero = "0000000000000000000000000000000000000000000000000000000000000000"

// TestAzure: the modules' terraform tests with a mocked provider, on the real function app zips
// (the bank's, the coordination service's), which the tests upload as the packages and hash
// into the app settings. (A plan by the
// real AzureRM provider needs Entra ID tokens even to plan, so unlike Google's it cannot run
// offline.)
func TestAzure(t *testing.T) {
	t.Parallel() // its own copy of the modules, mocked or offline providers: nothing shared
	modules := tftest.CopyModules(t)
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	artifact := filepath.Join(modules, "azure", "ssf", "tests", "testdata", "artifact.zip")
	if err := os.MkdirAll(filepath.Dir(artifact), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := build.AzureFunctions(context.Background(), root, "./examples/bank/azure", artifact, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	coordination := filepath.Join(modules, "azure", "coordination", "tests", "testdata", "artifact.zip")
	if err := os.MkdirAll(filepath.Dir(coordination), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := build.AzureCoordination(context.Background(), root, "./adapters/host/coordhost/http", coordination, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	terraformTestMocked(t, tftest.New(t), modules, "azure")
}
