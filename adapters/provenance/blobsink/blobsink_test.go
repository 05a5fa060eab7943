package blobsink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// records: a writes version 1 of t/k, b reads it (called by a), c's conditional write fails on it.
func records() []provenance.Record {
	v1 := int64(1)
	at := time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC).UnixNano()
	inst := func(id string) provenance.Instance {
		return provenance.Instance{SSF: "orders", ID: id, Incarnation: "x"}
	}
	inv := func(id string) provenance.Invocation {
		return provenance.Invocation{Instance: inst(id), Started: at, Finished: at + 1000, Outcome: "ok", InputDigest: "in-" + id,
			Holder: `{"ns":"default","wf":"checkout-7","run":"r1"}`}
	}
	b := inv("b")
	b.CallerSSF, b.CallerID, b.CallerStep = "orders", "a", 1
	return []provenance.Record{
		{Invocation: inv("a"), Events: []provenance.DataEvent{{Step: 0, Kind: provenance.EventWrite, Table: "t", Key: "k", Version: &v1, Applied: true, At: at, Digest: "d1", Value: []byte(`{"n":1}`)}},
			Calls: []provenance.Call{{Step: 1, Callee: "orders", CalleeID: "b", At: at}}},
		{Invocation: b, Events: []provenance.DataEvent{{Step: 0, Kind: provenance.EventRead, Table: "t", Key: "k", Version: &v1, At: at}}},
		{Invocation: inv("c"), Events: []provenance.DataEvent{{Step: 0, Kind: provenance.EventWrite, Table: "t", Key: "k", Version: &v1, Applied: false, At: at, Digest: "d2"}}},
	}
}

func export(t *testing.T, sinkURL string) {
	t.Helper()
	ctx := context.Background()
	s, err := provenance.Open(ctx, sinkURL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs := records()
	// b1 is exported twice (a crash before the runtime noted it): the same objects again.
	for _, b := range []struct {
		name string
		recs []provenance.Record
	}{{"b1", recs[:2]}, {"b2", recs[2:]}, {"b1", recs[:2]}, {"empty", nil}} {
		if err := s.Export(ctx, b.name, b.recs); err != nil {
			t.Fatal(err)
		}
	}
}

// DuckDB, a real Parquet reader, queries the objects as the documented tables, with the Hive
// partitions as columns, and follows a read to the write it saw.
func TestDuckDBQueriesTheExportedObjects(t *testing.T) {
	dir := t.TempDir()
	export(t, "file://"+filepath.ToSlash(dir)+"?prefix=prov")
	py, err := testservers.DuckDBPython()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.ToSlash(filepath.Join(dir, "prov"))
	script := `
import duckdb, json, sys
root = sys.argv[1]
def t(name):
    return f"read_parquet('{root}/{name}/*/*/*.parquet', hive_partitioning=true)"
q = {
  "invocations": f"SELECT count(*) FROM {t('invocations')}",
  "files": f"SELECT count(DISTINCT filename) FROM read_parquet('{root}/*/*/*/*.parquet', filename=true)",
  "partition": f"SELECT DISTINCT ssf, CAST(dt AS VARCHAR) FROM {t('invocations')}",
  "workflow": f"SELECT DISTINCT workflow_id, run_id FROM {t('invocations')}",
  "read_of": f"""SELECT r.instance_id, w.instance_id, w.value FROM {t('data_events')} r JOIN {t('data_events')} w
      ON w.ssf = r.ssf AND w.item_table = r.item_table AND w.item_key = r.item_key AND w.version = r.version
      AND w.kind = 'write' AND w.applied WHERE r.kind = 'read'""",
  "failed": f"SELECT instance_id FROM {t('data_events')} WHERE kind = 'write' AND NOT applied",
  "callee": f"SELECT c.callee_id, i.caller_id, i.caller_step FROM {t('calls')} c JOIN {t('invocations')} i ON i.instance_id = c.callee_id",
}
print(json.dumps({k: [list(r) for r in duckdb.sql(v).fetchall()] for k, v in q.items()}))
`
	cmd := exec.Command(py, "-c", script, root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, stderr.String())
	}
	var got map[string][][]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string][][]any{
		"invocations": {{3.0}},
		"files":       {{5.0}}, // files with rows: two batches of three tables, b2 without calls; b1's export again overwrote its own
		"partition":   {{"orders", "2026-11-26"}},
		"workflow":    {{"checkout-7", "r1"}},
		"read_of":     {{"b", "a", `{"n":1}`}},
		"failed":      {{"c"}},
		"callee":      {{"b", "a", 1.0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DuckDB read\n%v\nwant\n%v", got, want)
	}
}

// On S3 (moto), the objects land under the prefix in their partitions and decode as written.
func TestExportToS3(t *testing.T) {
	ctx := context.Background()
	bucket := "provenance-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	u, create := testservers.MotoS3(t, bucket)
	if _, err := provenance.Open(ctx, u); err == nil || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("a sink on a bucket that does not exist: %v", err)
	}
	create()
	raw, err := blob.OpenBucket(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	export(t, u+"&prefix=env1/provenance")
	var keys []string
	iter := raw.List(&blob.ListOptions{Prefix: "env1/provenance/"})
	for {
		obj, err := iter.Next(ctx)
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	if len(keys) != 6 || !strings.Contains(strings.Join(keys, " "), "env1/provenance/invocations/ssf=orders/dt=2026-11-26/b1.parquet") {
		t.Fatalf("objects: %v", keys)
	}
	b, err := raw.ReadAll(ctx, "env1/provenance/invocations/ssf=orders/dt=2026-11-26/b1.parquet")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.Read[blobsink.InvocationRow](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].InstanceID != "b" || rows[1].CallerID == nil || *rows[1].CallerID != "a" || rows[0].WorkflowID == nil || *rows[0].WorkflowID != "checkout-7" {
		t.Fatalf("rows: %+v", rows)
	}
}

// TestExportWithAWriteOnlyIdentity: the modules let an SSF's identity put objects in its own
// partitions and nothing else, so listing the bucket is refused (403). The sink must start on
// such a bucket, export through it, and still refuse a bucket that does not exist. The identity
// is a gate in front of moto that, like IAM with the ssf module's policy, passes object PUTs
// and refuses everything else.
func TestExportWithAWriteOnlyIdentity(t *testing.T) {
	ctx := context.Background()
	bucket := "provenance-wo-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	u, create := testservers.MotoS3(t, bucket)
	create()
	moto, err := url.Parse(testservers.Moto.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(moto)
	var puts atomic.Int64
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/") >= 1 {
			puts.Add(1)
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		if !strings.HasPrefix(r.URL.Path, "/"+bucket) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>`)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}))
	defer gate.Close()
	gated := func(b string) string {
		return "s3://" + b + "?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(gate.URL) + "&prefix=env1/provenance"
	}
	if _, err := provenance.Open(ctx, gated("no-such-"+bucket)); err == nil || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("a write-only sink on a bucket that does not exist: %v", err)
	}
	export(t, gated(bucket))
	if puts.Load() == 0 {
		t.Fatal("the export put no object through the gate")
	}
	raw, err := blob.OpenBucket(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if ok, err := raw.Exists(ctx, "env1/provenance/invocations/ssf=orders/dt=2026-11-26/b1.parquet"); err != nil || !ok {
		t.Fatalf("the exported object is not in the bucket: %v %v", ok, err)
	}
}
