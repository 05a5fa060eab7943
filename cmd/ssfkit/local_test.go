package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/deploy"
)

// localConfig is the config `ssfkit up --cloud local --app APP` writes, on the database file.
func localConfig(t *testing.T, app, file string) *deploy.Config {
	t.Helper()
	tableURL, err := tablePerSSF(sqliteURL(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &deploy.Config{Cloud: "local", Environment: app, SSFs: map[string]deploy.SSF{}}
	for name := range examples[app].handlers() {
		u, err := tableURL(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.SSFs[name] = deploy.SSF{Name: name, Store: u, Queue: "mem://" + name}
		tbl, err := store.Open(context.Background(), u) // creates the table, as dev does
		if err != nil {
			t.Fatal(err)
		}
		tbl.Close()
	}
	return cfg
}

// Taking one example down drops its tables only: another example's tables in the same
// .ssfkit/dev.db survive, and the file goes with the last table.
func TestDropLocalTablesKeepsOtherApps(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "dev.db")
	bank, travel := localConfig(t, "bank", file), localConfig(t, "travel", file)

	var out bytes.Buffer
	if err := dropLocalTables(ctx, bank, &out); err != nil {
		t.Fatal(err)
	}
	left, err := sqliteTables(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for name := range travel.SSFs {
			if !yield(name) {
				return
			}
		}
	})
	if !slices.Equal(left, want) {
		t.Fatalf("after the bank went down, %s holds tables %v, want travel's %v", file, left, want)
	}
	if !strings.Contains(out.String(), "dropped tables accounts, audit, teller from "+file+"; kept the file") {
		t.Errorf("down said: %q", out.String())
	}

	out.Reset()
	if err := dropLocalTables(ctx, travel, &out); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if _, err := os.Stat(file + suffix); !os.IsNotExist(err) {
			t.Errorf("after the last example went down, %s remains (%v)", file+suffix, err)
		}
	}
	if !strings.Contains(out.String(), "removed "+file+" (no table left)") {
		t.Errorf("down said: %q", out.String())
	}
}

// The config is written whole or not at all: a directory, or a path in a missing directory,
// is refused before anything is written, and no temporary file is ever left behind.
func TestWriteConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := &deploy.Config{Cloud: "local", Environment: "bank", SSFs: map[string]deploy.SSF{
		"teller": {Name: "teller", Store: sqliteURL(filepath.Join(dir, "dev.db")) + "?table=teller", Queue: "mem://teller"}}}
	leftovers := func() []string {
		var names []string
		filepath.WalkDir(dir, func(path string, _ os.DirEntry, _ error) error {
			if strings.Contains(path, "partial") {
				names = append(names, path)
			}
			return nil
		})
		return names
	}
	for _, c := range []struct{ path, want string }{
		{dir, "is a directory; give the config file's path, e.g. " + filepath.Join(dir, "ssfkit.json")},
		{filepath.Join(dir, "missing", "ssfkit.json"), "does not exist"},
		{"", "empty path"},
	} {
		if err := writeConfigFile(cfg, c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("writeConfigFile(%q): %v, want an error saying %q", c.path, err, c.want)
		}
	}
	// A rename that fails (a full disk, a path that became a directory) leaves nothing.
	path := filepath.Join(dir, "ssfkit.json")
	renameConfig = func(string, string) error { return errors.New("injected rename failure") }
	err := writeConfigFile(cfg, path)
	renameConfig = os.Rename
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("writeConfigFile with a failing rename: %v", err)
	}
	if l := leftovers(); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
	if err := writeConfigFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	if got, err := deploy.Load(path); err != nil || got.SSFs["teller"].Store != cfg.SSFs["teller"].Store {
		t.Fatalf("the written config: %+v, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("config file mode: %v, %v", fi.Mode(), err)
	}
	if l := leftovers(); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
}
