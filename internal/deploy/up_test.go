package deploy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTerraform writes a terraform stand-in: plan writes its -out file, show -json prints the
// plan before apply (a role policy known only after apply) or after it (that policy, known),
// output prints a config.
func fakeTerraform(t *testing.T, afterApply string) string {
	t.Helper()
	dir := t.TempDir()
	before := `{"format_version":"1.2","resource_changes":[{"address":"aws_iam_role_policy.this","type":"aws_iam_role_policy","change":{"actions":["create"],"after":{},"after_unknown":{"policy":true,"role":true}}}]}`
	files := map[string]string{"before.json": before, "after.json": afterApply,
		"output.json": `{"ssfkit_config":{"value":{"environment":"bank","ssfs":{"a":{"name":"a","store":"mem://a","queue":"mem://a"}}}}}`}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `#!/bin/sh
case "$1" in
plan) for a; do case "$prev" in -out) : > "$a";; esac; prev=$a; done ;;
show) case "$3" in *applied*) cat ` + dir + `/after.json;; *) cat ` + dir + `/before.json;; esac ;;
output) cat ` + dir + `/output.json ;;
esac
`
	bin := filepath.Join(dir, "terraform")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// up checks what it applied once every value is known: a policy the plan could only warn about
// that turns out to break a rule fails up after the apply, saying so; a clean one passes.
func TestUpChecksWhatWasApplied(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "main.tf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	policy := func(statement string) string {
		return `{"format_version":"1.2","resource_changes":[{"address":"aws_iam_role_policy.this","type":"aws_iam_role_policy","change":{"actions":["no-op"],"after":{"role":"bank-a-ssf","policy":"{\"Statement\":[` +
			strings.ReplaceAll(statement, `"`, `\"`) + `]}"},"after_unknown":{}}}]}`
	}
	for name, c := range map[string]struct {
		after   string
		wantErr string
	}{
		"clean":    {policy(`{"Effect":"Allow","Action":"dynamodb:GetItem","Resource":"arn:aws:dynamodb:us-east-1:1:table/bank-a"}`), ""},
		"violates": {policy(`{"Effect":"Allow","Action":"dynamodb:*","Resource":"*"}`), "applied, but what was applied violates"},
	} {
		t.Run(name, func(t *testing.T) {
			var progress bytes.Buffer
			res, err := Up(context.Background(), Options{Cloud: "aws", Dir: root, Terraform: fakeTerraform(t, c.after), Progress: &progress})
			if c.wantErr == "" {
				if err != nil || len(res.Applied.Deny) != 0 || res.Config == nil {
					t.Fatalf("%v %+v\n%s", err, res, progress.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || len(res.Applied.Deny) == 0 || !strings.Contains(progress.String(), "VIOLATION after apply") {
				t.Fatalf("%v %+v\n%s", err, res, progress.String())
			}
		})
	}
}
