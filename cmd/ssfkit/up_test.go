package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/deploy"
)

// `ssfkit up --cloud local` writes the config of the embedded default, `ssfkit dev --config`
// serves the example on the stores it names, and `ssfkit down --cloud local` removes the
// database and the config.
func TestUpDevDownLocal(t *testing.T) {
	t.Chdir(t.TempDir())
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"up", "--cloud", "local", "--config", "local.json"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	cfg, err := deploy.Load("local.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cloud != "local" || len(cfg.SSFs) != 3 || !strings.HasPrefix(cfg.SSFs["teller"].Store, "sqlite://") || !strings.Contains(cfg.SSFs["teller"].Store, "table=teller") {
		t.Fatalf("config %+v", cfg)
	}
	base, out, stop := startDev(t, "--config", "local.json")
	if body := post(t, base, "accounts", "open-alice", `{"op":"open","account":"alice","amount":100}`); !strings.Contains(body, `"output": true`) {
		t.Fatalf("open account: %s", body)
	}
	stop()
	if !strings.Contains(out.String(), "config local.json (local, environment bank)") {
		t.Errorf("the banner does not name the config:\n%s", out.String())
	}
	db := filepath.Join(".ssfkit", "dev.db")
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("dev wrote no database where the config says: %v", err)
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"down", "--cloud", "local", "--config", "local.json"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{db, "local.json"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("down left %s", gone)
		}
	}
}

func TestUpDownRefusals(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("root", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("root", "main.tf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()) // no terraform
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"up"}, 2, `--cloud must be local, aws, azure, gcp, not ""`},
		{[]string{"up", "--cloud", "ibm"}, 2, `not "ibm"`},
		{[]string{"up", "--cloud", "local", "--app", "shop"}, 2, `--app "shop"`},
		{[]string{"up", "--cloud", "aws", "--dir", "nowhere"}, 1, "nowhere is not a Terraform root module"},
		{[]string{"up", "--cloud", "gcp", "--dir", "root", "--endpoint", "http://127.0.0.1:1"}, 1, "the gcp provider has none"},
		{[]string{"up", "--cloud", "aws", "--dir", "root", "--endpoint", "moto"}, 1, `endpoint "moto" is not an http(s) URL`},
		{[]string{"up", "--cloud", "aws", "--dir", "root", "--var", "artifact"}, 1, `variable "artifact": want NAME=VALUE`},
		{[]string{"up", "--cloud", "aws", "--dir", "root", "--var-file", "none.tfvars"}, 1, "none.tfvars"},
		{[]string{"up", "--cloud", "aws", "--dir", "root"}, 1, "terraform is not on PATH"},
		{[]string{"down", "--cloud", "local", "--config", "none.json"}, 1, "none.json"},
		{[]string{"up", "--cloud", "local", "--config", "root"}, 2, "--config root is a directory; give the config file's path, e.g. root/ssfkit.json"},
		{[]string{"up", "--cloud", "aws", "--dir", "root", "--config", "root"}, 2, "--config root is a directory"},
		{[]string{"up", "--cloud", "local", "--config", "nodir/ssfkit.json"}, 2, "directory nodir does not exist"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, &stdout, &stderr)
		if status := exitStatus(err, &stderr); status != c.status || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: status %d, stderr %q; want %d and %q", c.args, status, stderr.String(), c.status, c.want)
		}
	}
	// The refused --config paths wrote nothing: no store directory, no temporary file.
	for _, left := range []string{".ssfkit", "root.partial", "nodir"} {
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			t.Errorf("a refused up left %s", left)
		}
	}
}

// Two examples up on the same .ssfkit/dev.db: taking one down drops its tables only; the other
// keeps its tables and data, and the file goes with the last example.
func TestDownLocalKeepsOtherExamples(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	var stdout bytes.Buffer
	for _, app := range []string{"bank", "travel"} {
		if err := run(ctx, []string{"up", "--cloud", "local", "--app", app, "--config", app + ".json"}, &stdout, &stdout); err != nil {
			t.Fatal(err)
		}
		cfg, err := deploy.Load(app + ".json")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cfg.SSFs { // as dev creates them
			tbl, err := store.Open(ctx, s.Store)
			if err != nil {
				t.Fatal(err)
			}
			tbl.Close()
		}
	}
	db, _ := filepath.Abs(filepath.Join(".ssfkit", "dev.db"))
	if err := run(ctx, []string{"down", "--cloud", "local", "--config", "bank.json"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	tables, err := sqliteTables(ctx, db)
	if err != nil || !slices.Contains(tables, "order") || slices.Contains(tables, "teller") {
		t.Fatalf("after the bank went down, %s holds %v (%v); want travel's tables only", db, tables, err)
	}
	if err := run(ctx, []string{"down", "--cloud", "local", "--config", "travel.json"}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{db, "bank.json", "travel.json"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("down left %s", gone)
		}
	}
}
