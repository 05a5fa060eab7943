package terraform

import (
	"archive/zip"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/internal/policycorpus"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/tftest"
	"github.com/ssfkit/ssfkit/policies"
)

var (
	corpusReplan = flag.Int("corpus.replan", 2, "cases of the policy corpus per cloud to plan again with the real providers (-1: all); the default run plans the first two, make test-long all")
	corpusWrite  = flag.Bool("corpus.write", false, "write the plans made to policies/testdata/corpus (make corpus)")
)

// TestPolicyCorpus plans cases of the policy corpus (policies/testdata/corpus) with the real
// providers: AWS against moto, GCP offline (AzureRM needs Entra ID tokens even to plan, so Azure
// has no case here; the Rego tests cover it). The policies must say of each fresh plan exactly
// what they say of the recorded one, which policies.TestCorpus checks in detail. With
// -corpus.write it records the plans.
func TestPolicyCorpus(t *testing.T) {
	t.Parallel() // its own copy of the modules; plans only
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := policycorpus.Load(filepath.Join(root, "policies", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	modules := tftest.CopyModules(t)
	work := filepath.Join(filepath.Dir(modules), "policies", "testdata", "corpus")
	var env []string
	perCloud := map[string]int{}
	for _, c := range cases {
		perCloud[c.Cloud]++
		if *corpusReplan >= 0 && perCloud[c.Cloud] > *corpusReplan {
			continue
		}
		if c.Cloud == "aws" && env == nil {
			env = motoForCorpus(t)
		}
		t.Run(c.Cloud+"/"+c.Name, func(t *testing.T) {
			plan := planCase(t, tftest.New(t, env...), c, filepath.Join(work, c.Cloud, c.Name))
			fresh, err := policies.Evaluate(context.Background(), plan)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range c.Expect {
				if !slices.ContainsFunc(fresh.Deny, func(s string) bool { return strings.HasPrefix(s, d.Prefix()) }) {
					t.Errorf("no denial starts %q:\n%s", d.Prefix(), strings.Join(fresh.Deny, "\n"))
				}
			}
			if *corpusWrite {
				hash, err := c.SourceHash()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(c.Dir, policycorpus.PlanFile), plan, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(c.Dir, policycorpus.HashFile), []byte(hash+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			recorded, err := os.ReadFile(filepath.Join(c.Dir, policycorpus.PlanFile))
			if err != nil {
				t.Fatalf("%v: run make corpus", err)
			}
			was, err := policies.Evaluate(context.Background(), recorded)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fresh.Deny, was.Deny) || !slices.Equal(fresh.Warn, was.Warn) {
				t.Fatalf("the policies say of a fresh plan:\n%s\nand of the recorded one:\n%s\nrun make corpus and review the difference",
					strings.Join(fresh.Deny, "\n"), strings.Join(was.Deny, "\n"))
			}
		})
	}
}

// motoForCorpus starts moto and returns Terraform's environment for it.
func motoForCorpus(t *testing.T) []string {
	env := []string{"AWS_ENDPOINT_URL=" + testservers.Moto.Addr(t)}
	for k, v := range testservers.MotoEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// planCase lays the case out in dir as it is in the repository (so its module sources resolve
// to the copy of the modules), plans it, and returns `terraform show -json` of the plan.
func planCase(t *testing.T, tf *tftest.Terraform, c policycorpus.Case, dir string) []byte {
	ctx := context.Background()
	for _, name := range []string{"main.tf", "../" + c.Base + "/base.tf"} {
		b, err := os.ReadFile(filepath.Join(c.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var vars []string
	if c.Cloud == "aws" {
		writeArtifact(t, filepath.Join(dir, "artifact.zip"))
		vars = append(vars, "-var", "artifact=artifact.zip")
	}
	tf.Must(ctx, dir, "init", "-input=false", "-no-color")
	if len(c.ApplyFirst) > 0 {
		tf.Must(ctx, dir, append([]string{"apply", "-input=false", "-no-color", "-auto-approve"}, vars...)...)
		for _, v := range c.ApplyFirst {
			vars = append(vars, "-var", v)
		}
	}
	tf.Must(ctx, dir, append([]string{"plan", "-input=false", "-no-color", "-out", "plan.out"}, vars...)...)
	plan := []byte(tf.Must(ctx, dir, "show", "-json", "plan.out"))
	if len(c.ApplyFirst) > 0 {
		tf.Must(ctx, dir, append([]string{"destroy", "-input=false", "-no-color", "-auto-approve"}, vars...)...)
	}
	return plan
}

// writeArtifact writes a stand-in for a function's zip: moto stores it and never runs it.
func writeArtifact(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := zip.NewWriter(f)
	b, err := w.Create("bootstrap")
	if err == nil {
		_, err = b.Write([]byte("#!/bin/sh\n"))
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
