package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/internal/apps"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The bank's requests, exported by its garbage collectors, answered by every trace query.
func TestTraceAnswersFromExportedProvenance(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "provenance.db")
	sink, err := provenance.Open(ctx, "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	clock := testclock.New(time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	app, err := apps.OpenTuned(ctx, bank.Handlers(), func(name string) (string, error) { return "mem://trace-" + name, nil }, apps.DevConfig(),
		func(_ string, c *ssf.Config) {
			c.Clock, c.Provenance, c.ProvenanceSink = clock, provenance.CaptureFull, sink
		})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	for _, req := range []struct {
		ssf, id string
		in      any
	}{
		{bank.Accounts, "open-alice", bank.AccountOp{Op: "open", Account: "alice", Amount: 100}},
		{bank.Accounts, "open-bob", bank.AccountOp{Op: "open", Account: "bob", Amount: 100}},
		{bank.Teller, "t-1", bank.Transfer{From: "alice", To: "bob", Amount: 30}},
	} {
		clock.Advance(time.Minute)
		if _, err := app.Host.Invoke(ctx, req.ssf, req.id, req.in); err != nil {
			t.Fatal(err)
		}
	}
	for _, rt := range app.Runtimes { // the audit's asynchronous instance
		if _, err := rt.CollectIntents(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // stamp, then export and collect
		clock.Advance(apps.DevGCBound + time.Second)
		for _, rt := range app.Runtimes {
			if _, err := rt.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"request", "t-1"}, []string{"teller t-1  ok", "call accounts", "write balances/alice@2", "read  balances/bob@1", "    audit "}},
		{[]string{"item", "accounts", "balances/alice"}, []string{"version 1: written by accounts/open-alice", "version 2: written by accounts/", "value 70"}},
		{[]string{"at", "accounts", "balances/alice", "2026-11-26T14:02:30Z"}, []string{"version 1, written by accounts/open-alice", "value 100"}},
		{[]string{"taint", "accounts:balances/alice@1"}, []string{"instance teller/t-1", "item     accounts:balances/alice@2", "item     accounts:balances/bob@2"}},
		{[]string{"taint", "open-bob"}, []string{"instance teller/t-1", "instance accounts/open-bob"}},
		{[]string{"sql", "SELECT ssf, count(*) AS n FROM invocations GROUP BY ssf ORDER BY ssf"}, []string{"ssf", "teller    1"}},
		{[]string{"check"}, []string{"ok: every version"}},
		{[]string{"request", "--json", "t-1"}, []string{`"ssf": "teller"`, `"value": 70`}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"trace", c.args[0], "--db", db}, c.args[1:]...)
		if err := run(ctx, args, &stdout, &stderr); err != nil {
			t.Fatalf("ssfkit %q: %v\n%s", args, err, stderr.String())
		}
		t.Logf("ssfkit %q:\n%s", args, stdout.String())
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("ssfkit %q lacks %q:\n%s", args, w, stdout.String())
			}
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "request", "--db", db, "t-9"}, "not found"},
		{[]string{"trace", "who", "--db", db}, "unknown query"},
		{[]string{"trace", "item", "--db", db, "accounts", "alice"}, "want TABLE/KEY"},
		{[]string{"trace", "at", "--db", db, "accounts", "balances/alice", "yesterday"}, "neither RFC 3339"},
		{[]string{"trace", "at", "--db", db, "accounts", "balances/alice", "2020-01-01T00:00:00Z"}, "no exported write"},
		{[]string{"trace", "taint", "--db", db, "accounts:balances/alice"}, "SSF:TABLE/KEY@VERSION"},
		{[]string{"trace", "sql", "--db", db, "DELETE FROM invocations"}, "readonly"},
		{[]string{"trace", "request", "--db", filepath.Join(t.TempDir(), "none.db"), "t-1"}, "created by the first export"},
		{[]string{"trace", "request", "--db", db}, "want 1 operands"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(ctx, c.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), c.want) {
			t.Errorf("ssfkit %q = %v (%s), want an error saying %q", c.args, err, stderr.String(), c.want)
		}
	}
}

// A request's tree shows its SQL steps: committed, read-only, failed and rolled back.
func TestTraceShowsSQLSteps(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "provenance.db")
	sink, err := provenance.Open(ctx, "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC).UnixNano()
	rec := provenance.Record{
		Invocation: provenance.Invocation{Instance: provenance.Instance{SSF: "payments", ID: "pay-1", Incarnation: "1"},
			Started: start, Finished: start + 3e6, Outcome: "ok", InputDigest: "d"},
		Events: []provenance.DataEvent{
			{Step: 0, Kind: provenance.EventSQLQuery, Applied: true, Digest: "q", At: start + 1e6},
			{Step: 1, Kind: provenance.EventSQL, Applied: true, Digest: "c", At: start + 2e6},
			{Step: 2, Kind: provenance.EventSQL, Applied: false, Digest: "f", At: start + 3e6},
		},
	}
	if err := sink.Export(ctx, "b", []provenance.Record{rec}); err != nil {
		t.Fatal(err)
	}
	sink.Close()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"trace", "request", "--db", db, "pay-1"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, w := range []string{"sql-query (read only, result q)", "sql (committed, result c)", "sql (failed, rolled back, result f)"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("the tree lacks %q:\n%s", w, stdout.String())
		}
	}
}
