package mapreduce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/examples/mapreduce"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

var shards = []string{
	"the quick brown fox jumps over the lazy dog",
	"The dog barks; the fox runs.",
	"",
	"a fox, a dog, and the end",
}

// The reducer starts first and waits at the barrier; the mappers run concurrently, one of them
// twice (a retried request). The counts equal a sequential count of all shards.
func TestWordCountBehindBarrier(t *testing.T) {
	ctx := context.Background()
	// Named in-memory tables live as long as the process: each run of the test gets its own.
	prefix := fmt.Sprintf("mem://mapreduce-%d-", time.Now().UnixNano())
	logTable, err := store.Open(ctx, prefix+"log")
	if err != nil {
		t.Fatal(err)
	}
	l, err := sharedlog.New(logTable, "wordcount", sharedlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := local.NewHost()
	defer h.Close()
	for name, handler := range mapreduce.Handlers(l) {
		st, err := store.Open(ctx, prefix+name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Add(ssf.Config{Name: name, Store: st, Handler: handler}); err != nil {
			t.Fatal(err)
		}
	}
	reduced := make(chan ssf.Result, 1)
	go func() {
		res, err := h.Invoke(ctx, mapreduce.Reducer, "reduce-job1", mapreduce.ReduceInput{Job: "job1", Shards: len(shards)})
		if err != nil {
			t.Error(err)
		}
		reduced <- res
	}()
	var wg sync.WaitGroup
	for i, text := range shards {
		for attempt := range 1 + i%2 { // odd shards are requested twice
			wg.Go(func() {
				if _, err := h.Invoke(ctx, mapreduce.Mapper, fmt.Sprintf("map-job1-%d", i), mapreduce.MapInput{Job: "job1", Shard: i, Text: text}); err != nil {
					t.Errorf("mapper %d (attempt %d): %v", i, attempt, err)
				}
			})
		}
	}
	wg.Wait()
	res := <-reduced
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	var got []mapreduce.Count
	if err := json.Unmarshal(res.Output, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, s := range shards {
		for _, w := range wordsOf(s) {
			want[w]++
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d words, want %d: %+v", len(got), len(want), got)
	}
	for _, c := range got {
		if want[c.Word] != c.Count {
			t.Errorf("%s: %d, want %d", c.Word, c.Count, want[c.Word])
		}
	}
	// One arrival per shard, the retried ones included. (SNs may have holes: two executions of
	// one instance racing to finish the same exactly-once append each reserve an SN, and only
	// one is written.)
	arrivals := 0
	for from := uint64(1); ; arrivals++ {
		rec, found, err := l.ReadNext(ctx, "job1.barrier", from)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			break
		}
		from = rec.SN + 1
	}
	if arrivals != len(shards) {
		t.Fatalf("the barrier holds %d arrivals, want one per shard", arrivals)
	}

	// Forgetting the job trims its colors; the host's garbage collection round deletes every
	// record (one per distinct word of each shard, one arrival per shard) and the holes readers
	// filled below the trim points.
	if err := mapreduce.Forget(ctx, l, "job1", len(shards)); err != nil {
		t.Fatal(err)
	}
	records := len(shards)
	for _, s := range shards {
		distinct := map[string]bool{}
		for _, w := range wordsOf(s) {
			distinct[w] = true
		}
		records += len(distinct)
	}
	h.CollectLogs(logTable)
	roundCtx, stop := context.WithCancel(ctx)
	var logs *sharedlog.CollectReport
	h.RunCollectors(roundCtx, 0, time.Millisecond, func(r local.CollectorReport) {
		if logs == nil { // a tick may start another round before the stop is seen
			logs = &r.Logs
		}
		stop()
	})
	if holes := int(l.Stats().HolesFilled); logs.Tenants != 1 || logs.RecordsDeleted < records || logs.RecordsDeleted > records+holes {
		t.Fatalf("the collection round: %+v, want 1 tenant and %d records deleted, plus up to %d holes", logs, records, holes)
	}
	if _, err := l.Read(ctx, "job1.barrier", 1); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("a record of the forgotten job: %v", err)
	}
}

// wordsOf is the test's own split of a text into words, to check the mappers' against.
func wordsOf(text string) []string {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(text)) {
		if w = strings.Trim(w, ".,;:!?\"'()"); w != "" {
			words = append(words, w)
		}
	}
	return words
}
