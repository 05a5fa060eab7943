package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ssfkit policy check runs the policies on any plan: a denied plan fails with the rule's
// message, in text or conftest's JSON; a clean one passes.
func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, plan string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", `{"format_version": "1.2", "resource_changes": [{"address": "aws_sqs_queue.q", "type": "aws_sqs_queue",
		"change": {"actions": ["create"], "after": {"sqs_managed_sse_enabled": false, "kms_master_key_id": null}, "after_unknown": {}}}]}`)
	good := write("good.json", `{"format_version": "1.2", "resource_changes": [{"address": "aws_sqs_queue.q", "type": "aws_sqs_queue",
		"change": {"actions": ["create"], "after": {"sqs_managed_sse_enabled": true}, "after_unknown": {}}}]}`)
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"policy", "check", bad}, &out, &out); err == nil || !strings.Contains(out.String(), "FAIL - "+bad+" - [encryption] aws_sqs_queue.q: the queue must be encrypted") {
		t.Fatalf("a denied plan: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"policy", "check", "-output", "json", bad}, &out, &out); err == nil {
		t.Fatal("a denied plan passed with -output json")
	}
	var results []struct {
		Filename string              `json:"filename"`
		Failures []map[string]string `json:"failures"`
	}
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != 1 || len(results[0].Failures) != 1 {
		t.Fatalf("conftest JSON: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"policy", "check", good}, &out, &out); err != nil || !strings.Contains(out.String(), "0 denials, 0 warnings") {
		t.Fatalf("a clean plan: %v\n%s", err, out.String())
	}
	if err := run(ctx, []string{"policy", "check", write("not.json", "not json")}, &out, &out); err == nil {
		t.Fatal("a file that is not a plan passed")
	}
}
