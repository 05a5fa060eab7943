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
// plan before apply (before) or after it (afterApply), output prints a config; it appends each
// command it runs to the returned log.
func fakeTerraform(t *testing.T, before, afterApply string) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"before.json": before, "after.json": afterApply,
		"output.json": `{"ssfkit_config":{"value":{"environment":"bank","ssfs":{"a":{"name":"a","store":"mem://a","queue":"mem://a"}}}}}`}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log = filepath.Join(dir, "commands.log")
	script := `#!/bin/sh
echo "$1" >> ` + log + `
case "$1" in
plan) for a; do case "$prev" in -out) : > "$a";; esac; prev=$a; done ;;
show) case "$3" in *applied*) cat ` + dir + `/after.json;; *) cat ` + dir + `/before.json;; esac ;;
output) cat ` + dir + `/output.json ;;
esac
`
	bin = filepath.Join(dir, "terraform")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func planOf(changes ...string) string {
	return `{"format_version":"1.2","resource_changes":[` + strings.Join(changes, ",") + `]}`
}

// A role policy known only after apply, and the role it is on.
const (
	unknownRolePolicy = `{"address":"aws_iam_role_policy.this","type":"aws_iam_role_policy","change":{"actions":["create"],"after":{},"after_unknown":{"policy":true,"role":true}}}`
	ssfRole           = `{"address":"aws_iam_role.this","type":"aws_iam_role","change":{"actions":["no-op"],"after":{"name":"bank-a-ssf","assume_role_policy":"{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"sts:AssumeRole\",\"Principal\":{\"Service\":\"lambda.amazonaws.com\"}}]}"},"after_unknown":{}}}`
	// an Azure template known only after apply: its delivery window cannot be checked, a warning
	unknownTemplate = `{"address":"azurerm_resource_group_template_deployment.app","type":"azurerm_resource_group_template_deployment","change":{"actions":["create"],"after":{},"after_unknown":{"template_content":true}}}`
)

func rolePolicy(statement string) string {
	return `{"address":"aws_iam_role_policy.this","type":"aws_iam_role_policy","change":{"actions":["no-op"],"after":{"role":"bank-a-ssf","policy":"{\"Statement\":[` +
		strings.ReplaceAll(statement, `"`, `\"`) + `]}"},"after_unknown":{}}}`
}

func commands(t *testing.T, log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func rootModule(t *testing.T) string {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "main.tf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// Fail closed: a grant the plan knows only after apply is a violation, and nothing is applied;
// a warning stops up too unless it is accepted, and an accepted one is logged.
func TestUpAppliesOnlyWhatItCanCheck(t *testing.T) {
	clean := planOf(ssfRole, rolePolicy(`{"Effect":"Allow","Action":"dynamodb:GetItem","Resource":"arn:aws:dynamodb:us-east-1:1:table/bank-a"}`))
	for name, c := range map[string]struct {
		before  string
		accept  bool
		wantErr string
		want    string // the commands run
	}{
		"unknown grant":         {planOf(ssfRole, unknownRolePolicy), true, "the plan violates 2 policies", "init plan show"},
		"warning":               {planOf(ssfRole, unknownTemplate), false, "--accept-warnings", "init plan show"},
		"warning accepted":      {planOf(ssfRole, unknownTemplate), true, "", "init plan show apply plan show output"},
		"nothing to warn about": {clean, false, "", "init plan show apply plan show output"},
	} {
		t.Run(name, func(t *testing.T) {
			var progress bytes.Buffer
			bin, log := fakeTerraform(t, c.before, clean)
			res, err := Up(context.Background(), Options{Cloud: "aws", Dir: rootModule(t), StateDir: t.TempDir(), Terraform: bin, Progress: &progress, AcceptWarnings: c.accept})
			if c.wantErr == "" && (err != nil || res.Config == nil) || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err %v, want %q\n%s", err, c.wantErr, progress.String())
			}
			if got := commands(t, log); got != c.want {
				t.Errorf("terraform ran %q, want %q", got, c.want)
			}
			if accepted := strings.Contains(progress.String(), "ACCEPTED warning (--accept-warnings): [delivery_window] azurerm_resource_group_template_deployment.app"); accepted != (name == "warning accepted") {
				t.Errorf("accepted warning logged: %v\n%s", accepted, progress.String())
			}
		})
	}
}

// up checks what it applied once every value is known: what turns out to break a rule fails up
// after the apply, saying so; a clean one passes.
func TestUpChecksWhatWasApplied(t *testing.T) {
	for name, c := range map[string]struct {
		after   string
		wantErr string
	}{
		"clean":    {planOf(ssfRole, rolePolicy(`{"Effect":"Allow","Action":"dynamodb:GetItem","Resource":"arn:aws:dynamodb:us-east-1:1:table/bank-a"}`)), ""},
		"violates": {planOf(ssfRole, rolePolicy(`{"Effect":"Allow","Action":"dynamodb:*","Resource":"*"}`)), "applied, but what was applied violates"},
	} {
		t.Run(name, func(t *testing.T) {
			var progress bytes.Buffer
			bin, _ := fakeTerraform(t, planOf(ssfRole, unknownTemplate), c.after)
			res, err := Up(context.Background(), Options{Cloud: "aws", Dir: rootModule(t), StateDir: t.TempDir(), Terraform: bin, Progress: &progress, AcceptWarnings: true})
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
