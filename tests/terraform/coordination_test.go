package terraform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ssfkit/ssfkit/internal/build"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/internal/tftest"
)

// coordLambda is the main package of the coordination functions on Lambda.
const coordLambda = "./adapters/host/coordhost/lambda"

// testCoordinationOnMoto is TestAWS's subtest for the coordination example
// (modules/aws/examples/coordination): `ssfkit up` against moto with the policies passing the
// fresh plan and the applied one with nothing to say, the outputs and the resources moto holds
// (table, request queue and its dead-letter queue, private encrypted bucket, the two functions
// with their settings, the writer's event source mapping, the heartbeat's schedule, the client
// policy), a large entry written and read through the config's blobs URL, then `ssfkit down`
// and nothing left.
func testCoordinationOnMoto(t *testing.T, tf *tftest.Terraform, modules, moto string) {
	ctx := context.Background()
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	artifact := filepath.Join(t.TempDir(), "coord.zip")
	start := time.Now()
	if err := build.AWSLambda(ctx, root, coordLambda, "arm64", artifact, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %v", coordLambda, time.Since(start).Round(time.Second))

	dir := filepath.Join(modules, "aws", "examples", "coordination")
	o := deploy.Options{Cloud: "aws", Dir: relative(t, dir), StateDir: t.TempDir(), Vars: []string{"throwaway=true", "artifact=" + artifact}, Endpoint: moto,
		Terraform: tf.Bin(), Env: tf.Env(), Progress: testWriter{t}}
	start = time.Now()
	res, err := deploy.Up(ctx, o)
	down := downOnce(t, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up in %v", time.Since(start).Round(time.Second))
	if v := res.Verdict; len(v.Deny) != 0 || len(v.Warn) != 0 {
		t.Fatalf("policies on the fresh plan: %+v, want nothing", v)
	}
	if v := res.Applied; len(v.Deny) != 0 || len(v.Warn) != 0 || len(res.Drift) != 0 {
		t.Fatalf("policies on the plan after apply: %+v, drift %v; want nothing", v, res.Drift)
	}
	stateOutsideSource(t, dir, o.StateDir)

	// The config: no SSF, the coordination service's coord_config, pointed at moto.
	cfg := res.Config
	c, ok := cfg.Coordination["zk"]
	if cfg.Environment != "coord" || len(cfg.SSFs) != 0 || len(cfg.Coordination) != 1 || !ok {
		t.Fatalf("the config from ssfkit_config: %+v", cfg)
	}
	const table, queue, bucket = "coord-zk-coord", "coord-zk-coord", "coord-zk-coord-123456789012"
	for got, want := range map[string]string{
		c.Environment:     "coord",
		c.Store:           "dynamodb://" + table + "?region=us-east-1&endpoint=",
		c.Queue:           "sqs://" + queue + "?region=us-east-1&endpoint=",
		c.DeadLetterQueue: "sqs://" + queue + "-dlq?region=us-east-1&endpoint=",
		c.Blobs:           "s3://" + bucket + "?region=us-east-1&endpoint=",
	} {
		if !strings.HasPrefix(got, want) {
			t.Errorf("coord_config has %q, want it to start with %q", got, want)
		}
	}
	if ids := c.FunctionIDs; len(ids) != 2 || !strings.HasSuffix(ids[0], ":function:coord-zk-coord-writer") || !strings.HasSuffix(ids[1], ":function:coord-zk-coord-heartbeat") {
		t.Errorf("coord_config's function_ids %v, want the writer's and the heartbeat's ARNs", ids)
	}

	// The module's outputs, from the state up kept in its state directory.
	var state struct {
		Outputs struct {
			Coordination struct {
				Value map[string]any `json:"value"`
			} `json:"coordination"`
		} `json:"outputs"`
	}
	js, err := os.ReadFile(filepath.Join(o.StateDir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &state); err != nil {
		t.Fatal(err)
	}
	out := state.Outputs.Coordination.Value
	for name, want := range map[string]string{
		"store_url":               "dynamodb://" + table + "?region=us-east-1",
		"queue_url":               "sqs://" + queue + "?region=us-east-1",
		"dead_letter_queue_url":   "sqs://" + queue + "-dlq?region=us-east-1",
		"blobs_url":               "s3://" + bucket + "?region=us-east-1",
		"writer_function_name":    "coord-zk-coord-writer",
		"heartbeat_function_name": "coord-zk-coord-heartbeat",
		"identity":                "arn:aws:iam::123456789012:role/coord-zk-coord-writer",
		"client_identity":         "arn:aws:iam::123456789012:policy/coord-zk-coord-client",
		"table_id":                "arn:aws:dynamodb:us-east-1:123456789012:table/" + table,
		"queue_id":                "arn:aws:sqs:us-east-1:123456789012:" + queue,
		"bucket_id":               "arn:aws:s3:::" + bucket,
	} {
		if out[name] != want {
			t.Errorf("output %s is %v, want %s", name, out[name], want)
		}
	}

	// What moto holds.
	d, err := testtables.DynamoClient(t).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("the table: %v", err)
	}
	if ks := d.Table.KeySchema; len(ks) != 2 || aws.ToString(ks[0].AttributeName) != "pk" || aws.ToString(ks[1].AttributeName) != "sk" {
		t.Errorf("the table's key schema: %+v, want pk/sk (dynamostore's)", ks)
	}
	lc := awslambda.New(awslambda.Options{Region: testservers.MotoEnv["AWS_REGION"], BaseEndpoint: aws.String(moto),
		Credentials: credentials.NewStaticCredentialsProvider(testservers.MotoEnv["AWS_ACCESS_KEY_ID"], testservers.MotoEnv["AWS_SECRET_ACCESS_KEY"], "")})
	arns := map[string]string{}
	for _, role := range []string{"writer", "heartbeat"} {
		name := "coord-zk-coord-" + role
		f, err := lc.GetFunction(ctx, &awslambda.GetFunctionInput{FunctionName: aws.String(name)})
		if err != nil {
			t.Fatalf("function %s: %v", name, err)
		}
		arns[role] = aws.ToString(f.Configuration.FunctionArn)
		if r := aws.ToString(f.Configuration.Role); r != "arn:aws:iam::123456789012:role/"+name {
			t.Errorf("%s runs as %s, want its own role", name, r)
		}
		env := f.Configuration.Environment.Variables
		want := map[string]string{
			"SSFKIT_COORD_ROLE": role, "SSFKIT_ENVIRONMENT": "coord", "SSFKIT_COORD_STORE": out["store_url"].(string),
			"SSFKIT_COORD_QUEUE": out["queue_url"].(string), "SSFKIT_COORD_BLOBS": out["blobs_url"].(string), "SSFKIT_COORD_SNAPSHOT_EVERY": "10000",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s is %q, want %q", name, k, env[k], v)
			}
		}
	}
	maps, err := lc.ListEventSourceMappings(ctx, &awslambda.ListEventSourceMappingsInput{})
	if err != nil {
		t.Fatal(err)
	}
	mapped := 0
	for _, m := range maps.EventSourceMappings {
		if aws.ToString(m.FunctionArn) != arns["writer"] {
			continue
		}
		mapped++
		if aws.ToString(m.EventSourceArn) != out["queue_id"] || aws.ToInt32(m.BatchSize) != 10 || len(m.FunctionResponseTypes) != 1 || m.FunctionResponseTypes[0] != "ReportBatchItemFailures" {
			t.Errorf("the writer's mapping: source %s, batch %d, response types %v", aws.ToString(m.EventSourceArn), aws.ToInt32(m.BatchSize), m.FunctionResponseTypes)
		}
	}
	if mapped != 1 {
		t.Errorf("%d event source mappings feed the writer, want the request queue's", mapped)
	}
	attrs := motoCall(t, moto, "sqs", "POST", "/", "AmazonSQS.GetQueueAttributes",
		`{"QueueUrl":"`+moto+`/123456789012/`+queue+`","AttributeNames":["RedrivePolicy","SqsManagedSseEnabled","KmsMasterKeyId"]}`)
	if !strings.Contains(attrs, queue+`-dlq`) || !strings.Contains(attrs, "KmsMasterKeyId") {
		t.Errorf("the request queue's attributes: %s, want a redrive to its dead-letter queue and the environment's key", attrs)
	}
	if pab := motoCall(t, moto, "s3", "GET", "/"+bucket+"?publicAccessBlock", "", ""); strings.Count(pab, ">true<") != 4 {
		t.Errorf("the bucket's public access block: %s, want all four settings on", pab)
	}
	if enc := motoCall(t, moto, "s3", "GET", "/"+bucket+"?encryption", "", ""); !strings.Contains(enc, "aws:kms") {
		t.Errorf("the bucket's encryption: %s, want the environment's KMS key", enc)
	}
	if p := motoCall(t, moto, "iam", "POST", "/", "", "Action=GetPolicy&Version=2010-05-08&PolicyArn=arn:aws:iam::123456789012:policy/coord-zk-coord-client"); !strings.Contains(p, "coord-zk-coord-client") {
		t.Errorf("the client policy: %s", p)
	}
	// Its document: the table written only in the sessions' and requests' partitions.
	doc := motoCall(t, moto, "iam", "POST", "/", "", "Action=GetPolicyVersion&Version=2010-05-08&VersionId=v1&PolicyArn=arn:aws:iam::123456789012:policy/coord-zk-coord-client")
	if decoded, err := url.QueryUnescape(doc); err != nil || !strings.Contains(decoded, `"dynamodb:LeadingKeys"`) || !strings.Contains(decoded, `"zk/req/*"`) || strings.Contains(decoded, "logs:") {
		t.Errorf("the client policy's document (%v): %s", err, decoded)
	}
	held, err := testservers.MotoResidue(moto, "coord")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"schedule coord-zk-coord-heartbeat", "IAM role coord-zk-coord-writer", "IAM role coord-zk-coord-heartbeat",
		"IAM role coord-zk-coord-scheduler", "SQS queue coord-zk-coord-dlq", "log group /aws/lambda/coord-zk-coord-writer", "KMS alias alias/ssfkit-coord"} {
		if !slices.Contains(held, want) {
			t.Errorf("moto has no %s; it has %v", want, held)
		}
	}

	// A large entry through the URL the proxy and the functions open.
	b, err := coordblob.Open(ctx, c.Blobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "zk/test/entry", []byte("large")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "zk/test/entry"); err != nil || string(got) != "large" {
		t.Fatalf("read back %q, %v", got, err)
	}
	b.Close()

	start = time.Now()
	down()
	t.Logf("down in %v", time.Since(start).Round(time.Second))
	nothingLeft(t, moto, "coord")
	if buckets := motoCall(t, moto, "s3", "GET", "/", "", ""); strings.Contains(buckets, bucket) {
		t.Errorf("after down, moto still has bucket %s", bucket)
	}
	if policies := motoCall(t, moto, "iam", "POST", "/", "", "Action=ListPolicies&Version=2010-05-08&Scope=Local"); strings.Contains(policies, "coord-zk-coord") {
		t.Errorf("after down, moto still has the client policy: %s", regexp.MustCompile(`<PolicyName>[^<]*</PolicyName>`).FindAllString(policies, -1))
	}
}

// motoCall sends one signed request to moto and returns its body; target, if set, is the JSON
// protocol's X-Amz-Target, and a body without one is a query-protocol form.
func motoCall(t *testing.T, moto, service, method, path, target, body string) string {
	t.Helper()
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, method, moto+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case target != "":
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	case body != "":
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	sum := sha256.Sum256([]byte(body))
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	creds := aws.Credentials{AccessKeyID: testservers.MotoEnv["AWS_ACCESS_KEY_ID"], SecretAccessKey: testservers.MotoEnv["AWS_SECRET_ACCESS_KEY"]}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, testservers.MotoEnv["AWS_REGION"], time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("moto: %s %s %s: %d %v %.300s", service, method, path, resp.StatusCode, err, b)
	}
	return string(b)
}
