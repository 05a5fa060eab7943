package mapreduce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/examples/mapreduce"
	"github.com/ssfkit/ssfkit/orchestrator/local"
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
	logTable, err := store.Open(ctx, "mem://mapreduce-log")
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
		st, err := store.Open(ctx, "mem://mapreduce-"+name)
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
		for _, w := range strings.Fields(strings.ToLower(s)) {
			if w = strings.Trim(w, ".,;:!?\"'()"); w != "" {
				want[w]++
			}
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
	if tail, err := l.CheckTail(ctx, "job1.barrier"); err != nil || tail != uint64(len(shards)) {
		t.Fatalf("the barrier holds %d final records (%v), want one per shard", tail, err)
	}
}
