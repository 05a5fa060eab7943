package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Providers come from whichever mirror holds them, the machine's first; the registry serves
// only the others.
func TestCLIConfigMirrors(t *testing.T) {
	machine, root := t.TempDir(), t.TempDir()
	for _, dir := range []string{
		filepath.Join(machine, "registry.terraform.io/hashicorp/aws/5.100.0"),
		filepath.Join(root, ProjectMirror, "registry.terraform.io/hashicorp/google/8.0.0"),
		filepath.Join(root, ProjectMirror, "registry.terraform.io/hashicorp/aws/6.0.0"),
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SSFKIT_TF_MIRROR", machine)
	module := filepath.Join(root, "modules", "aws", "examples", "bank")
	cfg := CLIConfig(FindMirrors(module))
	for _, want := range []string{
		`path    = "` + machine + `"` + "\n" + `    include = ["registry.terraform.io/hashicorp/aws"]`,
		`path    = "` + filepath.Join(root, ProjectMirror) + `"` + "\n" + `    include = ["registry.terraform.io/hashicorp/google"]`,
		`exclude = ["registry.terraform.io/hashicorp/aws", "registry.terraform.io/hashicorp/google"]`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the CLI config lacks\n%s\nin\n%s", want, cfg)
		}
	}
	t.Setenv("SSFKIT_TF_MIRROR", t.TempDir())
	if cfg := CLIConfig(FindMirrors(t.TempDir())); cfg != "" {
		t.Errorf("without mirrors: %s, want none", cfg)
	}
}
