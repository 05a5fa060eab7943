package policies

import (
	"context"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/tester"
)

// The policies' own tests (ssfkit/*_test.rego): a passing and a violating plan per policy, run
// as `opa test policies/ssfkit` would.
func TestRegoTests(t *testing.T) {
	results, err := tester.Run(context.Background(), "ssfkit")
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < 45 {
		t.Fatalf("only %d Rego tests ran", len(results))
	}
	for _, r := range results {
		if !r.Pass() {
			t.Errorf("%s.%s: fail=%v error=%v", r.Package, r.Name, r.Fail, r.Error)
		}
	}
}

func TestEvaluate(t *testing.T) {
	ctx := context.Background()
	plan := `{"format_version": "1.2", "resource_changes": [
	  {"address": "aws_dynamodb_table.this", "type": "aws_dynamodb_table", "change": {"actions": ["create"], "after": {"point_in_time_recovery": [{"enabled": false}], "server_side_encryption": [{"enabled": true}]}, "after_unknown": {}}},
	  {"address": "aws_sqs_queue.old", "type": "aws_sqs_queue", "change": {"actions": ["delete"], "before": {}, "after": null}}
	]}`
	v, err := Evaluate(ctx, []byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Deny) != 1 || !strings.Contains(v.Deny[0], "point-in-time recovery") || len(v.Warn) != 0 {
		t.Fatalf("verdict %+v, want one denial about backups (a deleted queue is not checked)", v)
	}
	for _, bad := range []string{`not json`, `{"resource_changes": []}`} {
		if _, err := Evaluate(ctx, []byte(bad)); err == nil || !strings.Contains(err.Error(), "terraform show -json") {
			t.Errorf("%s: got %v, want an error naming terraform show -json", bad, err)
		}
	}
}
