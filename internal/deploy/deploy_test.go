package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestConfigRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	good := &Config{Cloud: "aws", Environment: "bank", SSFs: map[string]SSF{
		"teller": {Name: "teller", Store: "dynamodb://bank-teller?region=us-east-1", Queue: "sqs://bank-teller?region=us-east-1", LifetimeSeconds: 59, GCBoundSeconds: 300},
	}}
	path := filepath.Join(dir, "ssfkit.json")
	if err := good.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil || got.SSFs["teller"] != good.SSFs["teller"] {
		t.Fatalf("%+v %v", got, err)
	}
	// A config of a coordination service alone (modules/<cloud>/examples/coordination).
	coord := &Config{Cloud: "aws", Environment: "zk", SSFs: map[string]SSF{}, Coordination: map[string]Coordination{
		"zk": {Environment: "zk", Store: "dynamodb://zk-zk-coord?region=us-east-1", Queue: "sqs://zk-zk-coord?region=us-east-1", Blobs: "s3://zk-zk-coord-123456789012?region=us-east-1",
			FunctionIDs: []string{"arn:aws:lambda:us-east-1:123456789012:function:zk-zk-writer", "arn:aws:lambda:us-east-1:123456789012:function:zk-zk-heartbeat"}},
	}}
	if err := coord.Write(path); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path); err != nil || !reflect.DeepEqual(got.Coordination["zk"], coord.Coordination["zk"]) {
		t.Fatalf("%+v %v", got, err)
	}
	for name, c := range map[string]struct{ json, want string }{
		"unknown field":      {`{"cloud":"aws","ssfs":{},"extra":1}`, `unknown field "extra"`},
		"no SSF":             {`{"cloud":"aws","ssfs":{}}`, "names no SSF and no coordination service"},
		"name mismatch":      {`{"ssfs":{"a":{"name":"b","store":"mem://a","queue":"mem://a"}}}`, `SSF "a": its name is "b"`},
		"bad store":          {`{"ssfs":{"a":{"name":"a","store":"dynamodb","queue":"mem://a"}}}`, "SSF a: store"},
		"bad queue":          {`{"ssfs":{"a":{"name":"a","store":"mem://a","queue":"sqs ://x"}}}`, "SSF a: queue"},
		"gc within lifetime": {`{"ssfs":{"a":{"name":"a","store":"mem://a","queue":"mem://a","lifetime_seconds":60,"gc_bound_seconds":60}}}`, "gc_bound_seconds (60) must exceed"},
		"relaunch within lifetime": {`{"ssfs":{"a":{"name":"a","store":"mem://a","queue":"mem://a","lifetime_seconds":60,"gc_bound_seconds":300,"relaunch_delay_seconds":30}}}`,
			"relaunch_delay_seconds (30) must be at least lifetime_seconds (60)"},
		"two SSFs on one table": {`{"ssfs":{"a":{"name":"a","store":"dynamodb://t?region=us-east-1","queue":"mem://a"},"b":{"name":"b","store":"dynamodb://t?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A5000","queue":"mem://b"}}}`,
			"SSFs a and b are on one table"},
		"coordination, bad store": {`{"ssfs":{},"coordination":{"zk":{"environment":"e","store":"dynamodb","queue":"mem://q","blobs":"mem://"}}}`, "coordination zk: store"},
		"coordination, bad queue": {`{"ssfs":{},"coordination":{"zk":{"environment":"e","store":"mem://t","queue":"sqs ://x","blobs":"mem://"}}}`, "coordination zk: queue"},
		"coordination, no blobs":  {`{"ssfs":{},"coordination":{"zk":{"environment":"e","store":"mem://t","queue":"mem://q"}}}`, `coordination zk: blobs "" is not a bucket URL`},
		"two SSFs on one SQLite table": {`{"ssfs":{"a":{"name":"a","store":"sqlite:///x.db?table=t","queue":"mem://a"},"b":{"name":"b","store":"sqlite:///x.db?table=t","queue":"mem://b"}}}`,
			"SSFs a and b are on one table"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(p, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}

func TestWithEndpoint(t *testing.T) {
	for raw, want := range map[string]string{
		"dynamodb://t?region=us-east-1": "dynamodb://t?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A5000",
		"sqs://q":                       "sqs://q?endpoint=http%3A%2F%2F127.0.0.1%3A5000",
	} {
		if got := withEndpoint(raw, "http://127.0.0.1:5000"); got != want {
			t.Errorf("%s: %s, want %s", raw, got, want)
		}
	}
}

// The config is written whole or not at all: a directory, or a path in a missing directory,
// is refused before anything is written, and no temporary file is ever left behind.
func TestConfigWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{Cloud: "local", Environment: "bank", SSFs: map[string]SSF{
		"teller": {Name: "teller", Store: "sqlite://" + filepath.Join(dir, "dev.db") + "?table=teller", Queue: "mem://teller"}}}
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
		if err := cfg.Write(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%q): %v, want an error saying %q", c.path, err, c.want)
		}
	}
	// A rename that fails (a full disk, a path that became a directory) leaves nothing.
	path := filepath.Join(dir, "ssfkit.json")
	renameConfig = func(string, string) error { return errors.New("injected rename failure") }
	err := cfg.Write(path)
	renameConfig = os.Rename
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Write with a failing rename: %v", err)
	}
	if l := leftovers(); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
	if err := cfg.Write(path); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(path); err != nil || got.SSFs["teller"].Store != cfg.SSFs["teller"].Store {
		t.Fatalf("the written config: %+v, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("config file mode: %v, %v", fi.Mode(), err)
	}
	if l := leftovers(); len(l) > 0 {
		t.Fatalf("temporary files left: %v", l)
	}
}
