package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// benchStores are the stores the Go benchmarks run on: "" is a fresh SQLite file.
var benchStores = []struct{ name, url string }{{"mem", "mem://"}, {"sqlite", ""}}

func newSuite(tb testing.TB, url string) *Suite {
	tb.Helper()
	s, err := NewSuite(context.Background(), SuiteConfig{StoreURL: url})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

func newItem(tb testing.TB, s *Suite, rows int) *Item {
	tb.Helper()
	it, err := s.NewItem(context.Background(), rows)
	if err != nil {
		tb.Fatal(err)
	}
	return it
}

func benchRaw(b *testing.B, op Op) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := newSuite(b, st.url)
			it := newItem(b, s, 1)
			c0 := s.Counter().Snapshot()
			for b.Loop() {
				if err := s.Raw(ctx, op, it); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(s.Counter().Snapshot().Sub(c0).RoundTrips())/float64(b.N), "store-requests/op")
		})
	}
}

// benchEO times op inside instances of DefaultBlock operations; between blocks, untimed, the
// garbage collector keeps the DAAL short as RunOps does, and the instances' own start and
// completion are not timed either.
func benchEO(b *testing.B, op Op) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := newSuite(b, st.url)
			it := newItem(b, s, 1)
			var timed Counts
			var c0 Counts
			h := Hooks{
				Begin: func() { c0 = s.Counter().Snapshot(); b.StartTimer() },
				End:   func() { b.StopTimer(); timed = timed.add(s.Counter().Snapshot().Sub(c0)) },
			}
			b.ResetTimer()
			b.StopTimer()
			for done := 0; done < b.N; done += DefaultBlock {
				if err := s.CollectGarbage(ctx); err != nil {
					b.Fatal(err)
				}
				if err := s.EOBlock(ctx, op, it, min(DefaultBlock, b.N-done), h); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(timed.RoundTrips())/float64(b.N), "store-requests/op")
		})
	}
}

func BenchmarkRawRead(b *testing.B)       { benchRaw(b, Read) }
func BenchmarkRawWrite(b *testing.B)      { benchRaw(b, Write) }
func BenchmarkRawCondWrite(b *testing.B)  { benchRaw(b, CondWrite) }
func BenchmarkRawSyncInvoke(b *testing.B) { benchRaw(b, SyncInvoke) }
func BenchmarkEORead(b *testing.B)        { benchEO(b, Read) }
func BenchmarkEOWrite(b *testing.B)       { benchEO(b, Write) }
func BenchmarkEOCondWrite(b *testing.B)   { benchEO(b, CondWrite) }
func BenchmarkEOSyncInvoke(b *testing.B)  { benchEO(b, SyncInvoke) }

// BenchmarkInstance is the cost of an instance that does nothing.
func BenchmarkInstance(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			ctx := context.Background()
			s := newSuite(b, st.url)
			for i := 0; b.Loop(); i++ {
				if i%DefaultBlock == 0 {
					b.StopTimer()
					if err := s.CollectGarbage(ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := s.Instance(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The pre-grown DAAL keeps its rows through garbage collection, and the collector trims what
// the benchmark appends, so every block sees the configured length.
func TestPinnedDAALSurvivesGC(t *testing.T) {
	ctx := context.Background()
	s, err := NewSuite(ctx, SuiteConfig{StoreURL: "mem://", RowCapacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it := newItem(t, s, 5)
	for range 3 {
		if err := s.EOBlock(ctx, Write, it, 9, Hooks{}); err != nil {
			t.Fatal(err)
		}
		if shape, err := s.DAAL(ctx, it); err != nil || shape.Reachable < 9 {
			t.Fatalf("after 9 writes into a 5-row DAAL of 2 entries a row: %+v, %v", shape, err)
		}
		if err := s.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		shape, err := s.DAAL(ctx, it)
		if err != nil || shape.Reachable != 6 || shape.Stored != 6 {
			t.Fatalf("after GC: %+v, %v; want the 5 pinned rows and the tail", shape, err)
		}
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	s := Summarize(d)
	if s.N != 100 || s.MedianUS != 50 || s.P99US != 99 || s.MeanUS != 50.5 {
		t.Fatalf("got %+v", s)
	}
	if z := Summarize(nil); z != (Summary{}) {
		t.Fatalf("empty: %+v", z)
	}
}

func TestStoreOpsString(t *testing.T) {
	for _, c := range []struct {
		ops  StoreOps
		want string
	}{
		{StoreOps{Scans: 1, ScannedRows: 21, Gets: 1, Updates: 1}, "1 scan (21 rows) + 1 get + 1 update"},
		{StoreOps{Scans: 1, ScannedRows: 2.5, Updates: 1.0938}, "1 scan (2.50 rows) + 1.09 updates"},
		{StoreOps{Gets: 1, Updates: 6, Deletes: 1}, "1 get + 6 updates + 1 delete"},
		{StoreOps{}, "none"},
	} {
		if got := c.ops.String(); got != c.want {
			t.Errorf("%+v: got %q want %q", c.ops, got, c.want)
		}
	}
}

func TestSiblingURL(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:///tmp/a b.db":                         "sqlite:///tmp/a%20b.db?table=ssfkit_x",
		"sqlite:///tmp/a.db?table=t&max_row_bytes=999": "sqlite:///tmp/a.db?max_row_bytes=999&table=t_x",
		"mem://":                          "mem://",
		"mem://shared?max_row_bytes=1000": "mem://shared_x?max_row_bytes=1000",
		"dynamodb://{table}?create=true":  "dynamodb://{table}x?create=true",
	} {
		got, err := siblingURL(in, "x")
		if err != nil || got != want {
			t.Errorf("siblingURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := siblingURL("postgres://h/db?table={table}", "gc_on"); got != "postgres://h/db?table={table}gcon" {
		t.Errorf("placeholder sibling: %q", got)
	}
	if _, err := siblingURL("dynamodb://t", "x"); err == nil || !strings.Contains(err.Error(), "write {table}") {
		t.Errorf("unsupported scheme: %v", err)
	}
}
