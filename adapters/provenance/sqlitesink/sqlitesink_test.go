package sqlitesink_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
)

func record(id string, finished time.Time) provenance.Record {
	v := int64(3)
	return provenance.Record{
		Invocation: provenance.Invocation{Instance: provenance.Instance{SSF: "orders", ID: id, Incarnation: "x"},
			Holder: `{"ns":"default","wf":"checkout-1","run":"r1"}`, Started: finished.UnixNano() - 1, Finished: finished.UnixNano(),
			Outcome: "ok", InputDigest: "d"},
		Events: []provenance.DataEvent{{Step: 0, Kind: provenance.EventRead, Table: "t", Key: "k", Version: &v},
			{Step: 1, Kind: provenance.EventWrite, Table: "t", Key: "k", Version: &v, Applied: true, Digest: "w"}},
		Calls: []provenance.Call{{Step: 2, Callee: "stock", CalleeID: "c-" + id}},
	}
}

func count(t *testing.T, path string) (inv, events, calls int) {
	t.Helper()
	db, err := sqlitesink.OpenDB(context.Background(), path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for table, n := range map[string]*int{"invocations": &inv, "data_events": &events, "calls": &calls} {
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(n); err != nil {
			t.Fatal(err)
		}
	}
	return
}

// An export repeated (after a crash between the export and the garbage collector's deletion)
// adds nothing; the workflow of a Temporal holder is a column.
func TestExportIsIdempotentPerInstance(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := provenance.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for range 3 {
		if err := s.Export(ctx, "b1", []provenance.Record{record("a", now), record("b", now)}); err != nil {
			t.Fatal(err)
		}
	}
	if i, e, c := count(t, path); i != 2 || e != 4 || c != 2 {
		t.Fatalf("after three exports of two records: %d invocations, %d events, %d calls; want 2, 4, 2", i, e, c)
	}
	db, _ := sqlitesink.OpenDB(ctx, path, true)
	defer db.Close()
	var wf, run string
	if err := db.QueryRow(`SELECT workflow_id, run_id FROM invocations WHERE instance_id = 'a'`).Scan(&wf, &run); err != nil || wf != "checkout-1" || run != "r1" {
		t.Fatalf("workflow %q run %q (%v)", wf, run, err)
	}
}

// Retention deletes what finished longer ago, with its events and calls, as exports arrive.
func TestRetentionPrunesOldInstances(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := provenance.Open(ctx, "sqlite://"+path+"?retention=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Export(ctx, "b1", []provenance.Record{record("old", time.Now().Add(-2*time.Hour)), record("new", time.Now())}); err != nil {
		t.Fatal(err)
	}
	if i, e, c := count(t, path); i != 1 || e != 2 || c != 1 {
		t.Fatalf("after retention: %d invocations, %d events, %d calls; want 1, 2, 1", i, e, c)
	}
}

func TestBadSinkURLsAreRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for url, want := range map[string]string{
		"sqlite://" + dir + "/p.db?retention=forever": "not a positive duration",
		"sqlite://" + dir + "/p.db?ttl=1h":            "ttl",
		"sqlite://" + dir + "/missing/p.db":           "directory",
		"parquet://bucket":                            "unknown URL scheme",
		"":                                            "empty URL",
	} {
		if _, err := provenance.Open(ctx, url); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error saying %q", url, err, want)
		}
	}
	if _, err := provenance.ParseCapture("everything"); err == nil {
		t.Error("capture level everything accepted")
	}
}

// A database made before SQL steps (its data_events admitted only reads and writes) takes their
// events once opened again, and keeps the events it had.
func TestOldDatabaseAdmitsSQLStepEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := sqlitesink.OpenDB(ctx, path, false)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(sqlitesink.Schema, "kind IN ('read', 'write', 'sql', 'sql-query')", "kind IN ('read', 'write')", 1)
	if old == sqlitesink.Schema {
		t.Fatal("the schema's kind constraint changed: update this test's idea of the old one")
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO data_events (ssf, instance_id, incarnation, step, kind, item_table, item_key, shadow, at_ns)
		VALUES ('orders', 'before', 'x', 0, 'read', 't', 'k', 0, 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	withSQL := record("b", time.Now())
	withSQL.Events = append(withSQL.Events, provenance.DataEvent{Step: 3, Kind: "sql", Applied: true, Digest: "s"},
		provenance.DataEvent{Step: 4, Kind: "sql-query", Applied: true, Digest: "q"})
	for _, recs := range [][]provenance.Record{{record("a", time.Now())}, {withSQL}} {
		s, err := sqlitesink.Open(ctx, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Export(ctx, "b", recs); err != nil {
			t.Fatalf("export to a database made before SQL steps: %v", err)
		}
		s.Close()
	}
	if i, e, _ := count(t, path); i != 2 || e != 7 {
		t.Fatalf("%d invocations and %d events, want 2 and 7 (the one from before kept)", i, e)
	}
}
