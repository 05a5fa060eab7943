package sqlsteps

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/provquery"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

// SQL steps are in the exported provenance, and the export is one execution's: each transfer's
// tree (its steps, with the SQL steps' outcomes and results' digests, and the auditor's) is the
// same after overlapping duplicates with random crashes as after a clean run.
func TestProvenanceOfSQLSteps(t *testing.T) {
	clean := provenanceTrees(t, nil)
	for id, tree := range clean {
		if !strings.Contains(tree, " sql-query / applied=true ") {
			t.Fatalf("transfer %s: no read-only SQL step in its provenance:\n%s", id, tree)
		}
	}
	if moved := strings.Count(strings.Join(mapValues(clean), ""), " sql / applied=true "); moved != 10 {
		t.Fatalf("%d committed writing SQL steps exported, want 10 (5 transfers and their 5 audits):\n%s", moved, strings.Join(mapValues(clean), "\n"))
	}
	if failed := strings.Count(strings.Join(mapValues(clean), ""), " sql / applied=false "); failed != 2 {
		t.Fatalf("%d failed SQL steps exported, want 2", failed)
	}
	seed := crashkit.Seed(t)
	for round := range 3 {
		inj := faults.Random(seed+int64(round), 0.05, -1)
		got := provenanceTrees(t, inj)
		for id, want := range clean {
			if got[id] != want {
				t.Fatalf("round %d (seed %d, crashes %v): the provenance of %s differs from a clean run's\nclean:\n%s\ngot:\n%s", round, seed+int64(round), inj.Crashes(), id, want, got[id])
			}
		}
	}
}

// provenanceTrees runs the workload on SQLite capturing provenance, every transfer delivered
// three times at once when inj crashes, collects everything past T, and returns each transfer's
// exported tree in a canonical form (without instance ids and times).
func provenanceTrees(t *testing.T, inj *faults.Injector) map[string]string {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "provenance.db")
	sink, err := sqlitesink.Open(ctx, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	var w *world
	if inj == nil {
		w = newCapturingWorld(t, testtables.SQLite(t), nil, sink)
		w.runSequential(t, workload)
	} else {
		w = newCapturingWorld(t, testtables.SQLite(t), inj, sink)
		inj.Enable(true)
		for i, tr := range workload {
			id := ids(len(workload))[i]
			done := make(chan struct{})
			for range 3 {
				go func() { crashkit.Submit(t, w.host, w.rt, id, tr); done <- struct{}{} }()
			}
			for range 3 {
				<-done
			}
			crashkit.Drain(t, w.host, w.clock, w.rts)
		}
		inj.Enable(false)
	}
	for pass := 0; pass < 2; pass++ { // stamp, then export and collect
		w.clock.Advance(gcBound + time.Second)
		for _, rt := range w.rts {
			if _, err := rt.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	db, err := provquery.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	trees := map[string]string{}
	for _, id := range ids(len(workload)) {
		n, err := provquery.Tree(ctx, db, id)
		if err != nil {
			t.Fatalf("transfer %s: %v", id, err)
		}
		var b strings.Builder
		canonicalTree(&b, n, "")
		trees[id] = b.String()
	}
	return trees
}

func canonicalTree(b *strings.Builder, n *provquery.Node, indent string) {
	fmt.Fprintf(b, "%s%s %s %q\n", indent, n.SSF, n.Outcome, n.Error)
	children := map[string]*provquery.Node{}
	for _, c := range n.Children {
		children[c.ID] = c
	}
	for _, s := range n.Steps {
		if s.Kind == "call" {
			fmt.Fprintf(b, "%s  %d call %s\n", indent, s.Step, s.Callee)
			if c := children[s.CalleeID]; c != nil {
				canonicalTree(b, c, indent+"    ")
			}
			continue
		}
		fmt.Fprintf(b, "%s  %d %s %s/%s applied=%t %s %s\n", indent, s.Step, s.Kind, s.Table, s.Key, s.Applied, s.Digest, s.Value)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
