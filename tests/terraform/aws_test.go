// Package terraform tests the Terraform modules: applied for real against moto on AWS.
package terraform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	_ "gocloud.dev/blob/s3blob"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/internal/build"
	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/internal/tftest"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
	"github.com/ssfkit/ssfkit/policies"
)

// TestMain gives the process moto's credentials and region, which the runtime's AWS clients in
// the tests read from the environment: once, here, because t.Setenv cannot be used by the
// parallel tests (the package's tests run side by side: TestAWS mostly waits on the AWS
// provider's polling while the mocked clouds' tests use the CPU).
func TestMain(m *testing.M) {
	for k, v := range testservers.MotoEnv {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	testtables.Main(m)
}

// awsSetup starts moto (Lambda functions stored rather than run), builds the bank example's
// artifact, and returns Terraform pointed at moto with a copy of the modules.
func awsSetup(t *testing.T) (tf *tftest.Terraform, modules, moto, artifact string) {
	moto = testservers.Moto.Addr(t)
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	artifact = filepath.Join(t.TempDir(), "bank.zip")
	if err := build.AWSLambda(context.Background(), root, "./examples/bank/lambda", "arm64", artifact, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	env := []string{"AWS_ENDPOINT_URL=" + moto, "TF_VAR_artifact=" + artifact}
	for k, v := range testservers.MotoEnv {
		env = append(env, k+"="+v)
	}
	return tftest.New(t, env...), tftest.CopyModules(t), moto, artifact
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestAWS(t *testing.T) {
	t.Parallel() // its own copy of the modules, its own names in moto
	tf, modules, moto, artifact := awsSetup(t)
	ctx := context.Background()

	t.Run("ssf module: terraform test", func(t *testing.T) {
		t.Parallel() // plans only: nothing in moto that the other subtests could meet
		dir := filepath.Join(modules, "aws", "ssf")
		tf.Must(ctx, dir, "init", "-no-color")
		tf.Must(ctx, dir, "validate", "-no-color")
		out := tf.Must(ctx, dir, "test", "-no-color")
		if !strings.Contains(out, "Success!") {
			t.Fatalf("terraform test did not succeed:\n%s", out)
		}
	})

	t.Run("bank example: ssfkit up, clean plan, the runtime on its tables, ssfkit down", func(t *testing.T) {
		t.Parallel()
		// deploy.Up is `ssfkit up --cloud aws --endpoint MOTO`: init, plan, the policies on the
		// plan of a fresh environment (no violation, no warning: the modules build every grant
		// from names the plan knows), apply, a plan of what was applied, the config. The root
		// module is given by a relative path, as the CLI's default --dir is.
		dir := filepath.Join(modules, "aws", "examples", "bank")
		o := deploy.Options{Cloud: "aws", Dir: relative(t, dir), StateDir: t.TempDir(), Vars: []string{"throwaway=true", "artifact=" + artifact}, Endpoint: moto,
			Terraform: tf.Bin(), Env: tf.Env(), Progress: testWriter{t}}
		res, err := deploy.Up(ctx, o)
		down := downOnce(t, o)
		if err != nil {
			t.Fatal(err)
		}
		if v := res.Verdict; len(v.Deny) != 0 || len(v.Warn) != 0 {
			t.Fatalf("policies on the fresh plan: %+v, want nothing", v)
		}
		// up planned again after the apply: every value known, nothing left to change.
		if v := res.Applied; len(v.Deny) != 0 || len(v.Warn) != 0 || len(res.Drift) != 0 {
			t.Fatalf("policies on the plan after apply: %+v, drift %v; want nothing", v, res.Drift)
		}
		cfg := res.Config
		if cfg.Cloud != "aws" || cfg.Environment != "bank" || len(cfg.SSFs) != 3 {
			t.Fatalf("the config from ssfkit_config: %+v", cfg)
		}
		for name, s := range cfg.SSFs {
			if !strings.HasPrefix(s.FunctionID, "arn:aws:lambda:") || !strings.HasSuffix(s.FunctionID, ":function:bank-"+name) {
				t.Fatalf("SSF %s's function_id is %q, want its Lambda function's ARN", name, s.FunctionID)
			}
		}
		stateOutsideSource(t, dir, o.StateDir)
		runBankOn(t, moto, cfg.SSFs)
		down()
		nothingLeft(t, moto, "bank")
	})

	t.Run("coordination example: ssfkit up, the resources in moto, ssfkit down", func(t *testing.T) {
		t.Parallel()
		testCoordinationOnMoto(t, tf, modules, moto)
	})

	t.Run("a root module of one's own, protected: up, down refused, down with protection lifted", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		root := `variable "artifact" {
  type = string
}

variable "deletion_protection" {
  type    = bool
  default = true
}

module "ssf" {
  source              = "` + filepath.ToSlash(filepath.Join(modules, "aws", "ssf")) + `"
  name                = "ledger"
  environment         = "mine"
  artifact            = var.artifact
  deletion_protection = var.deletion_protection
}

output "ssfkit_config" {
  value = { environment = "mine", region = "us-east-1", ssfs = { ledger = module.ssf.ssfkit_config } }
}
`
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(root), 0o644); err != nil {
			t.Fatal(err)
		}
		o := deploy.Options{Cloud: "aws", Dir: dir, StateDir: t.TempDir(), Vars: []string{"artifact=" + artifact}, Endpoint: moto,
			Terraform: tf.Bin(), Env: tf.Env(), Progress: testWriter{t}}
		res, err := deploy.Up(ctx, o)
		lifted := o
		lifted.LiftProtection, lifted.Confirm = true, func(string) bool { return true }
		down := downOnce(t, lifted)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Config.SSFs) != 1 || len(res.Drift) != 0 {
			t.Fatalf("config %+v, drift %v", res.Config, res.Drift)
		}
		stateOutsideSource(t, dir, o.StateDir)
		err = deploy.Down(ctx, o)
		if err == nil || !strings.Contains(err.Error(), `module.ssf.aws_dynamodb_table.this`) || !strings.Contains(err.Error(), "--lift-protection") {
			t.Fatalf("down on a protected environment: %v, want a refusal naming the table and --lift-protection", err)
		}
		if tables := listTables(t, moto, "mine-"); len(tables) != 1 {
			t.Fatalf("after the refused down: tables %v, want the SSF's, untouched", tables)
		}
		down()
		nothingLeft(t, moto, "mine")
	})
}

// relative is path relative to the working directory, as a user's --dir is.
func relative(t *testing.T, path string) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// downOnce returns a function that runs deploy.Down once, which a cleanup also calls if the
// test ends before it.
func downOnce(t *testing.T, o deploy.Options) func() {
	var once sync.Once
	down := func() {
		once.Do(func() {
			if err := deploy.Down(context.Background(), o); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(down)
	return down
}

// stateOutsideSource checks that up kept Terraform's state and data out of the root module.
func stateOutsideSource(t *testing.T, dir, stateDir string) {
	t.Helper()
	for _, name := range []string{"terraform.tfstate", ".terraform", "ssfkit-up.tfplan"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("up left %s in the root module", name)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "terraform.tfstate")); err != nil {
		t.Errorf("no state in the state directory: %v", err)
	}
	if logs, _ := filepath.Glob(filepath.Join(stateDir, "up-*.log")); len(logs) != 1 {
		t.Errorf("logs in the state directory: %v, want up's", logs)
	}
}

// nothingLeft checks that moto has nothing named for the environment left.
func nothingLeft(t *testing.T, moto, environment string) {
	t.Helper()
	left, err := testservers.MotoResidue(moto, environment)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Errorf("after down, moto still has %s", l)
	}
}

// listTables lists moto's DynamoDB tables whose names start with prefix.
func listTables(t *testing.T, moto, prefix string) []string {
	t.Helper()
	out, err := testtables.DynamoClient(t).ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range out.TableNames {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	return names
}

func motoLambda(moto string) *awslambda.Client {
	return awslambda.New(awslambda.Options{Region: testservers.MotoEnv["AWS_REGION"], BaseEndpoint: aws.String(moto),
		Credentials: credentials.NewStaticCredentialsProvider(testservers.MotoEnv["AWS_ACCESS_KEY_ID"], testservers.MotoEnv["AWS_SECRET_ACCESS_KEY"], "")})
}

// provenanceFromModule opens the provenance sink the module configured function on (its
// SSFKIT_PROVENANCE and SSFKIT_PROVENANCE_SINK), against moto.
func provenanceFromModule(t *testing.T, moto, function string) (provenance.Capture, provenance.Sink) {
	t.Helper()
	ctx := context.Background()
	out, err := motoLambda(moto).GetFunctionConfiguration(ctx, &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(function)})
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if out.Environment != nil {
		env = out.Environment.Variables
	}
	capture, err := provenance.ParseCapture(env["SSFKIT_PROVENANCE"])
	if err != nil || capture == provenance.CaptureOff || !strings.HasPrefix(env["SSFKIT_PROVENANCE_SINK"], "s3://bank-provenance-") {
		t.Fatalf("function %s captures %q into %q (%v), want the environment's bucket", function, env["SSFKIT_PROVENANCE"], env["SSFKIT_PROVENANCE_SINK"], err)
	}
	sink, err := provenance.Open(ctx, env["SSFKIT_PROVENANCE_SINK"]+"&use_path_style=true&endpoint="+url.QueryEscape(moto))
	if err != nil {
		t.Fatalf("function %s's provenance sink: %v", function, err)
	}
	t.Cleanup(func() { sink.Close() })
	return capture, sink
}

// A clock that can be moved past T while it keeps running.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func disableEventSources(t *testing.T, moto, function string) {
	t.Helper()
	ctx := context.Background()
	c := motoLambda(moto)
	// All mappings, matched by function ARN: moto ignores the FunctionName filter's short names.
	out, err := c.ListEventSourceMappings(ctx, &awslambda.ListEventSourceMappingsInput{})
	if err != nil {
		t.Fatal(err)
	}
	disabled := 0
	for _, m := range out.EventSourceMappings {
		if !strings.HasSuffix(aws.ToString(m.FunctionArn), ":function:"+function) {
			continue
		}
		if _, err := c.UpdateEventSourceMapping(ctx, &awslambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		disabled++
	}
	if disabled != 1 {
		t.Fatalf("%d event source mappings for %s among %d, want its queue's", disabled, function, len(out.EventSourceMappings))
	}
}

// provenanceObjects counts the objects of the environment's provenance bucket by
// PREFIX/TABLE/ssf=NAME.
func provenanceObjects(t *testing.T, moto string) map[string]int {
	t.Helper()
	ctx := context.Background()
	c := s3.New(s3.Options{Region: testservers.MotoEnv["AWS_REGION"], BaseEndpoint: aws.String(moto), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(testservers.MotoEnv["AWS_ACCESS_KEY_ID"], testservers.MotoEnv["AWS_SECRET_ACCESS_KEY"], "")})
	buckets, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, b := range buckets.Buckets {
		if !strings.HasPrefix(aws.ToString(b.Name), "bank-provenance-") {
			continue
		}
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			parts := strings.Split(aws.ToString(o.Key), "/")
			if len(parts) == 5 {
				counts[strings.Join(parts[:3], "/")]++
			}
		}
	}
	return counts
}

// evaluatePolicies runs policies/ssfkit on a saved plan, as conftest would on its JSON.
func evaluatePolicies(t *testing.T, tf *tftest.Terraform, dir, plan string) policies.Verdict {
	t.Helper()
	js := tf.Must(context.Background(), dir, "show", "-json", plan)
	v, err := policies.Evaluate(context.Background(), []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("policies on %s: %d violations, %d warnings", plan, len(v.Deny), len(v.Warn))
	return v
}

// runBankOn runs the bank example with the ssfkit runtime on the tables and queues Terraform
// created: transfers, asynchronous audits through audit's SQS queue, the collectors; then the
// bank's invariants.
func runBankOn(t *testing.T, moto string, ssfs map[string]deploy.SSF) {
	ctx := context.Background()
	client := testtables.DynamoClient(t) // one request at a time: moto's tables are not atomic
	h := local.NewHost()
	defer h.Close()
	runtimes := map[string]*ssf.Runtime{}
	clock := &jumpClock{}
	for name, handler := range bank.Handlers() {
		c, ok := ssfs[name]
		if !ok {
			t.Fatalf("no outputs for SSF %s", name)
		}
		u, err := store.ParseURL(c.Store)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dynamostore.New(ctx, client, u.Host, dynamostore.Options{})
		if err != nil {
			t.Fatalf("the table Terraform made for %s: %v", name, err)
		}
		tbl := store.NewTable(d, c.Store)
		defer tbl.Close()
		capture, sink := provenanceFromModule(t, moto, "bank-"+name)
		rt, err := h.Add(ssf.Config{Name: name, Store: tbl, Handler: handler, RelaunchDelay: 2 * time.Second, Clock: clock,
			Provenance: capture, ProvenanceSink: sink})
		if err != nil {
			t.Fatal(err)
		}
		runtimes[name] = rt
	}
	// The test plays the functions' part (moto stores Go functions but runs them only in
	// Docker): the audit queue's event source mapping would hand its messages to the stored
	// function, so it is turned off and the runtime consumes the queue itself.
	disableEventSources(t, moto, "bank-"+bank.Audit)
	q, err := queue.Open(ctx, ssfs[bank.Audit].Queue)
	if err != nil {
		t.Fatalf("audit's queue: %v", err)
	}
	defer q.Close()
	dlq, err := queue.Open(ctx, ssfs[bank.Audit].DeadLetterQueue)
	if err != nil {
		t.Fatalf("audit's dead-letter queue: %v", err)
	}
	defer dlq.Close()
	if err := h.UseQueue(bank.Audit, q); err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- h.ServeQueues(serveCtx, queue.ServeOptions{DeadLetter: dlq, Lease: 10 * time.Second})
	}()

	opening := map[string]int64{"alice": 100, "bob": 50}
	for name, amount := range opening {
		if res, err := h.Invoke(ctx, bank.Accounts, "open-"+name, bank.AccountOp{Op: "open", Account: name, Amount: amount}); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	transfers := map[string]bank.Transfer{"t1": {From: "alice", To: "bob", Amount: 30}, "t2": {From: "bob", To: "alice", Amount: 500}, "t3": {From: "bob", To: "alice", Amount: 5}}
	receipts := map[string]bank.Receipt{}
	for id, tr := range transfers {
		res, err := h.Invoke(ctx, bank.Teller, id, tr)
		if err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		var r bank.Receipt
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		receipts[id] = r
	}
	// The audits arrive through SQS: wait until the ledger has them all and every instance has
	// finished (an audit's effects are visible before its done mark and index cleanup land).
	deadline := time.Now().Add(time.Minute)
	for {
		items, err := bank.Snapshot(ctx, runtimes)
		if err != nil {
			t.Fatal(err)
		}
		err = bank.Check(opening, receipts, transfers, items)
		for name, rt := range runtimes {
			if n, perr := rt.Pending(ctx); err == nil && (perr != nil || n != 0) {
				err = fmt.Errorf("%s: %d instances unfinished (%v)", name, n, perr)
			}
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %v", err)
		}
		select {
		case err := <-served:
			t.Fatalf("the queue consumer stopped: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for name, rt := range runtimes {
		ic, err := rt.CollectIntents(ctx)
		if err != nil || ic.Pending != 0 {
			t.Fatalf("%s: intent collector: %+v %v", name, ic, err)
		}
		gc, err := rt.CollectGarbage(ctx)
		if err != nil || gc.Stamped == 0 {
			t.Fatalf("%s: garbage collector: %+v %v, want finished instances stamped", name, gc, err)
		}
	}
	// T later the collectors export every instance's provenance to the environment's bucket,
	// each SSF into its own partitions, before they delete the logs.
	clock.offset.Store(int64(time.Hour))
	for name, rt := range runtimes {
		gc, err := rt.CollectGarbage(ctx)
		if err != nil || gc.Exported == 0 {
			t.Fatalf("%s: garbage collector T later: %+v %v, want instances exported", name, gc, err)
		}
	}
	objects := provenanceObjects(t, moto)
	want := []string{"data_events/ssf=" + bank.Accounts, "calls/ssf=" + bank.Teller}
	for name := range runtimes {
		want = append(want, "invocations/ssf="+name)
	}
	for _, w := range want {
		if objects["provenance/"+w] == 0 {
			t.Errorf("nothing in provenance/%s of the provenance bucket: %v", w, objects)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
