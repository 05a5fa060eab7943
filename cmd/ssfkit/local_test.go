package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

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

// localConfig is the config `ssfkit up --cloud local --app APP` writes, on the database file.
func localConfig(t *testing.T, app, file string) *deploy.Config {
	t.Helper()
	tableURL, err := apps.TablePerSSF(apps.SQLiteURL(file))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &deploy.Config{Cloud: "local", Environment: app, SSFs: map[string]deploy.SSF{}}
	for name := range lookup(t, app).Handlers() {
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
