package deploy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTerraformState writes a terraform stand-in whose state is state (show -json prints it),
// and which logs every command line it runs.
func fakeTerraformState(t *testing.T, state string) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "commands.log")
	script := `#!/bin/sh
echo "$*" >> ` + log + `
case "$1" in
show) cat ` + dir + `/state.json ;;
state) echo 'module.ssf["a"].aws_dynamodb_table.this' ;;
esac
`
	bin = filepath.Join(dir, "terraform")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

const protectedState = `{"format_version":"1.0","values":{"root_module":{"child_modules":[{"resources":[
 {"address":"module.ssf[\"a\"].aws_dynamodb_table.this","type":"aws_dynamodb_table","values":{"deletion_protection_enabled":true}},
 {"address":"module.ssf[\"a\"].aws_sqs_queue.this","type":"aws_sqs_queue","values":{}}]}]}}}`

// down never stops half-way on deletion protection: it refuses before destroying anything and
// says what to run; with --lift-protection and a yes it turns protection off, then destroys.
func TestDownOnProtectedState(t *testing.T) {
	for name, c := range map[string]struct {
		variable string // the root module's protection variable, if any
		lift     bool
		confirm  bool
		wantErr  string
		want     []string // commands run after init and show, in order
	}{
		"refused":          {"throwaway", false, false, "run ssfkit down again with --lift-protection (it applies throwaway=true first", nil},
		"not confirmed":    {"throwaway", true, false, "not confirmed; nothing was destroyed", nil},
		"lifted":           {"throwaway", true, true, "", []string{"apply -auto-approve -input=false -no-color -state=STATE -var=throwaway=true", "destroy -auto-approve -input=false -no-color -state=STATE -var=throwaway=true"}},
		"lifted by name":   {"deletion_protection", true, true, "", []string{"apply -auto-approve -input=false -no-color -state=STATE -var=deletion_protection=false", "destroy -auto-approve -input=false -no-color -state=STATE -var=deletion_protection=false"}},
		"no such variable": {"", true, true, "deletion_protection = false on the ssf modules), run ssfkit up, then ssfkit down again", nil},
	} {
		t.Run(name, func(t *testing.T) {
			root, stateDir := t.TempDir(), t.TempDir()
			main := ""
			if c.variable != "" {
				main = "variable \"" + c.variable + "\" {\n  type = bool\n}\n"
			}
			if err := os.WriteFile(filepath.Join(root, "main.tf"), []byte(main), 0o644); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(stateDir, "terraform.tfstate")
			if err := os.WriteFile(state, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			bin, log := fakeTerraformState(t, protectedState)
			var progress bytes.Buffer
			asked := ""
			err := Down(context.Background(), Options{Cloud: "aws", Dir: root, StateDir: stateDir, Terraform: bin, Progress: &progress,
				LiftProtection: c.lift, Confirm: func(q string) bool { asked = q; return c.confirm }})
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err %v, want %q\n%s", err, c.wantErr, progress.String())
			}
			if err != nil && !strings.Contains(err.Error(), `module.ssf["a"].aws_dynamodb_table.this`) && c.wantErr != "not confirmed; nothing was destroyed" {
				t.Errorf("the error does not name the protected table: %v", err)
			}
			if c.lift && c.variable != "" && !strings.Contains(asked, "Destroy 1 protected resources") {
				t.Errorf("asked %q", asked)
			}
			b, _ := os.ReadFile(log)
			lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), state, "STATE")), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[0], "init") || !strings.HasPrefix(lines[1], "show -json") {
				t.Fatalf("commands %q", lines)
			}
			if got := lines[2:]; strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("then ran %q, want %q", got, c.want)
			}
		})
	}
}
