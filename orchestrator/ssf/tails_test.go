package ssf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// newAdder starts the SSF "adder" on table st with its own host, as one process of several
// would: each instance reads c/x and adds one to it with a conditional write (the first one
// writes 1), and returns what it read and whether its write applied. DAAL rows hold rowCap
// entries.
func newAdder(t *testing.T, st *store.Table, rowCap int, c *testclock.Manual, faults ssf.FaultInjector) (*local.Host, *ssf.Runtime) {
	t.Helper()
	h := local.NewHost()
	h.Sequential = true
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{
		Name: "adder", Store: st, RowCapacity: rowCap, Lifetime: lifetime, GCBound: bound, Clock: c, Faults: faults,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			var n int
			found, err := env.ReadInto("c", "x", &n)
			if err != nil {
				return nil, err
			}
			if !found {
				return []any{0, true}, env.Write("c", "x", 1)
			}
			ok, err := env.CondWrite("c", "x", n+1, store.MustParseCond(fmt.Sprintf("$ == %d", n)))
			return []any{n, ok}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, rt
}

func add1(t *testing.T, h *local.Host, id string) string {
	t.Helper()
	res, err := h.Invoke(context.Background(), "adder", id, nil)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return string(res.Output)
}

// A write goes straight to the row the runtime's last write of the item left, when that row is
// still the tail, and a read gets that row: neither queries the item.
func TestWriteGoesToTheTailItsLastWriteLeft(t *testing.T) {
	var mu sync.Mutex
	scans, gets := map[string]int{}, map[string]int{}
	count := faultFunc(func(p ssf.FaultPoint) error {
		if !p.After && p.Key.Partition == "d|c|x" {
			mu.Lock()
			defer mu.Unlock()
			switch p.Op {
			case "scan":
				scans[p.Instance]++
			case "get":
				gets[p.Instance]++
			}
		}
		return nil
	})
	h, rt := newAdder(t, newTable(), 8, testclock.New(time.Unix(1e9, 0)), count)
	for i := range 5 {
		if got, want := add1(t, h, fmt.Sprintf("a%d", i)), fmt.Sprintf("[%d,true]", i); got != want {
			t.Fatalf("a%d returned %s, want %s", i, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The first instance's read and write find no item (the write creates it); every later
	// read gets the row the last write left, and every later write goes to it.
	for i := range 5 {
		id := fmt.Sprintf("a%d", i)
		wantScans, wantGets := 0, 1
		if i == 0 {
			wantScans, wantGets = 2, 0
		}
		if scans[id] != wantScans || gets[id] != wantGets {
			t.Errorf("%s scanned the item %d times and got a row of it %d times, want %d and %d: scans %v, gets %v",
				id, scans[id], gets[id], wantScans, wantGets, scans, gets)
		}
	}
	if got := rt.Stats().CachedWrites; got != 4 {
		t.Errorf("CachedWrites = %d, want 4", got)
	}
}

// On a store whose batches apply all or nothing, what a flush writes before a write (here the
// read's log entry) goes in one batch with the write's update: an instance that reads and then
// writes a remembered row sends both in one request (a batch, named by its first key), where
// step by step the log entry and the write are a request each. (The instance's intent is
// created before it runs, and memstore sends the other batches update by update.)
func TestTheFlushRidesWithTheWrite(t *testing.T) {
	for _, c := range []struct {
		name   string
		table  func() *store.Table
		writes []string
	}{
		{"all or nothing", newTable, []string{"update p|N/ID", "update i|ID/intent",
			"batch i|ID/r|00000000", // the read's log entry and the write
			"update i|ID/intent", "update f|N/ID", "delete p|N/ID"}},
		{"step by step", func() *store.Table { return stepByStep(newTable()) }, []string{"update p|N/ID", "update i|ID/intent",
			"update i|ID/r|00000000", "update d|c|x/00000000000000000000",
			"update i|ID/intent", "update f|N/ID", "delete p|N/ID"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			writes := map[string][]string{}
			shard := regexp.MustCompile(`^([pf])\|\d+$`)
			record := faultFunc(func(p ssf.FaultPoint) error {
				if !p.After && p.Op != "get" && p.Op != "scan" {
					part := strings.ReplaceAll(shard.ReplaceAllString(p.Key.Partition, "$1|N"), p.Instance, "ID")
					mu.Lock()
					defer mu.Unlock()
					writes[p.Instance] = append(writes[p.Instance], p.Op+" "+part+"/"+strings.ReplaceAll(p.Key.Sort, p.Instance, "ID"))
				}
				return nil
			})
			h, _ := newAdder(t, c.table(), 8, testclock.New(time.Unix(1e9, 0)), record)
			for i := range 3 {
				if got, want := add1(t, h, fmt.Sprintf("a%d", i)), fmt.Sprintf("[%d,true]", i); got != want {
					t.Fatalf("a%d returned %s, want %s", i, got, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range []string{"a1", "a2"} {
				if !slices.Equal(writes[id], c.writes) {
					t.Errorf("%s's write requests:\n%s\nwant\n%s", id, strings.Join(writes[id], "\n"), strings.Join(c.writes, "\n"))
				}
			}
		})
	}
}

// The tail a runtime remembers is a hint: another process's writes move the tail on, log the
// step elsewhere and get rows collected, and every write still applies exactly once, on the
// item as it is. Runtime B crashes instance i after its conditional write applied; B's later
// writes fill that row and append successors, past the row A remembers; A's next write finds
// its row linked on and writes at the tail, and when A runs i again, the step is logged in a
// row before the tail A now remembers: the replay must find it there (case A) and return what
// the first execution's write did, not write again. Last, the row B remembers is unlinked and
// deleted by the collector before B writes again.
func TestAStaleTailIsOnlyAHint(t *testing.T) {
	c := testclock.New(time.Unix(1e9, 0))
	st := newTable()
	row1Updates := 0 // i creates row 1 (the head is full), links it, then writes there
	crash := &crashOnce{match: func(p ssf.FaultPoint) bool {
		if p.Instance == "i" && p.Op == "update" && p.After && p.Key.Partition == "d|c|x" && p.Key.Sort == "00000000000000000001" {
			row1Updates++
		}
		return row1Updates == 2
	}}
	hA, rtA := newAdder(t, st, 2, c, nil)
	// B writes step by step, so that its write is an update of its own to crash after (on a
	// store with all-or-nothing batches it goes in one batch with the read's log entry).
	hB, rtB := newAdder(t, stepByStep(st), 2, c, crash)
	add1(t, hA, "a1")
	add1(t, hA, "a2") // x = 2; A remembers the head, full now
	if _, err := hB.Invoke(context.Background(), "adder", "i", nil); !errors.Is(err, ssf.ErrCrashed) {
		t.Fatalf("i on B: %v, want the injected crash after its write", err)
	}
	for k := range 3 {
		add1(t, hB, fmt.Sprintf("b%d", k)) // x = 6; rows: head (a1 a2), 1 (i b0), 2 (b1 b2)
	}
	if got := add1(t, hA, "a3"); got != "[6,true]" { // in row 3, which has room left
		t.Fatalf("a3 on A (its row linked on since) returned %s, want [6,true]", got)
	}
	if got := add1(t, hA, "i"); got != "[2,true]" {
		t.Fatalf("i run again on A returned %s, want the first execution's [2,true]", got)
	}
	if got := add1(t, hA, "a4"); got != "[7,true]" {
		t.Fatalf("a4 returned %s, want [7,true]: the replay of i must not have written", got)
	}

	if got := add1(t, hB, "b3"); got != "[8,true]" { // in row 4, which has room left
		t.Fatalf("b3 returned %s, want [8,true]", got)
	}
	// B remembers the row its b3 left. A moves the tail on and the collector unlinks and then
	// deletes that row.
	for k := 5; k < 15; k++ {
		add1(t, hA, fmt.Sprintf("a%d", k))
		c.Advance(bound / 2)
		gc(t, rtA)
	}
	for range 3 {
		c.Advance(bound + time.Second)
		gc(t, rtA)
	}
	if s, err := rtA.DAAL(context.Background(), "c", "x"); err != nil || s.Stored > 3 {
		t.Fatalf("%+v %v: the collector kept the rows B remembers; the test tests nothing", s, err)
	}
	if got := add1(t, hB, "b-last"); got != "[19,true]" {
		t.Fatalf("b-last on B (its row deleted) returned %s, want [19,true]", got)
	}
	items, err := rtA.Items(context.Background())
	if err != nil || string(items["c/x"]) != "20" {
		t.Fatalf("c/x = %s (%v) after 20 additions", items["c/x"], err)
	}
	for _, rt := range []*ssf.Runtime{rtA, rtB} {
		if n := rt.Stats().Corruptions; n != 0 {
			t.Fatalf("%d corruptions reported", n)
		}
	}
	if rtA.Stats().CachedWrites == 0 {
		t.Fatal("A never wrote to a remembered tail; the test tests nothing")
	}
}

// A conditional write of a new item decides on the head as its creation made it, without
// reading it back.
func TestFirstConditionalWriteReadsNoHead(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	count := faultFunc(func(p ssf.FaultPoint) error {
		if !p.After && p.Op == "get" && p.Key.Partition == "d|c|fresh" {
			mu.Lock()
			gets++
			mu.Unlock()
		}
		return nil
	})
	h := local.NewHost()
	t.Cleanup(h.Close)
	rt := addConfig(t, h, ssf.Config{Name: "first", Store: newTable(), Faults: count,
		Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
			return env.CondWrite("c", "fresh", 1, store.MustParseCond("$ == 0"))
		}})
	res, err := h.Invoke(context.Background(), "first", "f-1", nil)
	if err != nil || string(res.Output) != "false" {
		t.Fatalf("first: %s %v, want false (the item has no value)", res.Output, err)
	}
	if gets != 0 {
		t.Errorf("the conditional write read the item's head %d times, want 0", gets)
	}
	if items, err := rt.Items(context.Background()); err != nil || items["c/fresh"] != nil {
		t.Fatalf("c/fresh = %s (%v), want no value", items["c/fresh"], err)
	}
}
