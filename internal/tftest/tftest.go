// Package tftest runs Terraform in tests: the binary from PATH or .ssfkit/tools (where `make
// tools` builds it when the machine has none), with a CLI configuration that installs
// providers from the machine's mirror when it has one (TOOLCHAIN.md: /opt/tf-plugins) and from
// the registry otherwise, into a cache kept under .ssfkit so a second run downloads nothing.
// Terraform writes .terraform directories and state where it runs, so tests run it in a copy
// of the repository's modules.
package tftest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// Terraform is a terraform CLI set up for one test.
type Terraform struct {
	t   testing.TB
	bin string
	env []string
}

// New finds terraform and writes its CLI configuration; env adds variables (TF_VAR_x=...).
func New(t testing.TB, env ...string) *Terraform {
	t.Helper()
	bin, err := testservers.Tool("terraform", "run `make tools` (it builds Terraform from the Go module proxy)")
	if err != nil {
		t.Fatal(err)
	}
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(cfg, []byte(cliConfig(root)), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"TF_CLI_CONFIG_FILE=" + cfg, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"}
	return &Terraform{t: t, bin: bin, env: append(base, env...)}
}

// cliConfig installs providers as `ssfkit up` does (deploy.FindMirrors): from the machine's
// mirror and the project's; anything else from the registry, into a plugin cache kept under
// .ssfkit.
func cliConfig(root string) string {
	if cfg := deploy.CLIConfig(deploy.FindMirrors(root)); cfg != "" {
		return cfg
	}
	cache := filepath.Join(root, ".ssfkit", "tf-plugin-cache")
	_ = os.MkdirAll(cache, 0o755)
	return fmt.Sprintf("plugin_cache_dir = %q\n", cache)
}

// CopyModules copies the repository's modules directory into a temporary directory and
// returns the copy's path, without any .terraform directories or state a developer left.
func CopyModules(t testing.TB) string {
	t.Helper()
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, dst := filepath.Join(root, "modules"), filepath.Join(t.TempDir(), "modules")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		name := d.Name()
		switch {
		case d.IsDir() && name == ".terraform":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case strings.HasPrefix(name, "terraform.tfstate") || name == ".terraform.lock.hcl":
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// Bin is the terraform executable.
func (tf *Terraform) Bin() string { return tf.bin }

// Env is what the tests add to terraform's environment: the CLI configuration and the
// variables given to New.
func (tf *Terraform) Env() []string { return slices.Clone(tf.env) }

// Run runs terraform in dir and returns its standard output (the JSON of `show -json`, say);
// the test log gets a line per command with its duration, and an error carries both outputs.
func (tf *Terraform) Run(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, tf.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tf.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	tf.t.Logf("terraform %s (in %s): %v, %s", strings.Join(args, " "), filepath.Base(dir), err, time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		return stdout.String(), fmt.Errorf("terraform %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Must is Run that fails the test on an error.
func (tf *Terraform) Must(ctx context.Context, dir string, args ...string) string {
	tf.t.Helper()
	out, err := tf.Run(ctx, dir, args...)
	if err != nil {
		tf.t.Fatal(err)
	}
	return out
}
