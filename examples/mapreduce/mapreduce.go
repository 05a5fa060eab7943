// Package mapreduce is a word count in two stages joined by a barrier on the shared log
// (FlexLog §4's "final record" pattern): each mapper SSF appends its partial counts to a color of
// its own and then a final record to the job's barrier color; the reducer SSF waits on the
// barrier until every mapper's final record is there, then reads the mappers' colors. The
// barrier gives the causal order the stages need across colors, which the log does not order
// among themselves; the appends are exactly-once steps, so crashed and re-run mappers count once.
package mapreduce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The SSFs.
const (
	Mapper  = "mapper"
	Reducer = "reducer"
)

// MapInput is a mapper's request: one shard of a job's text.
type MapInput struct {
	Job   string `json:"job"`
	Shard int    `json:"shard"`
	Text  string `json:"text"`
}

// ReduceInput is the reducer's request: the job and how many shards it has.
type ReduceInput struct {
	Job    string `json:"job"`
	Shards int    `json:"shards"`
}

// Count is a word's count.
type Count struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

func barrier(job string) string           { return job + ".barrier" }
func shardColor(job string, i int) string { return fmt.Sprintf("%s.map.%d", job, i) }

// Handlers are the job's SSFs over the log l.
func Handlers(l *sharedlog.Log) map[string]ssf.Handler {
	return map[string]ssf.Handler{Mapper: mapper(l), Reducer: reducer(l)}
}

func mapper(l *sharedlog.Log) ssf.Handler {
	return func(env *ssf.Env, input json.RawMessage) (any, error) {
		var in MapInput
		if err := json.Unmarshal(input, &in); err != nil || in.Job == "" || in.Shard < 0 {
			return nil, fmt.Errorf("%w: a mapper takes {job, shard, text}", ssf.ErrBadInput)
		}
		ctx := env.Context()
		// Colors are created idempotently: every execution may add them.
		for _, c := range []string{barrier(in.Job), shardColor(in.Job, in.Shard)} {
			if err := l.AddColor(ctx, c, ""); err != nil {
				return nil, err
			}
		}
		counts := map[string]int{}
		for _, w := range strings.Fields(strings.ToLower(in.Text)) {
			counts[strings.Trim(w, ".,;:!?\"'()")]++
		}
		delete(counts, "")
		var records [][]byte
		for _, w := range sortedWords(counts) {
			b, _ := json.Marshal(Count{Word: w, Count: counts[w]})
			records = append(records, b)
		}
		if len(records) > 0 {
			if _, err := l.AppendStep(env, shardColor(in.Job, in.Shard), records...); err != nil {
				return nil, err
			}
		}
		// The final record: this shard is complete.
		final, _ := json.Marshal(map[string]int{"shard": in.Shard, "words": len(records)})
		if _, err := l.AppendStep(env, barrier(in.Job), final); err != nil {
			return nil, err
		}
		return len(records), nil
	}
}

func sortedWords(m map[string]int) []string {
	words := make([]string, 0, len(m))
	for w := range m {
		words = append(words, w)
	}
	sort.Strings(words)
	return words
}

// errBarrierReached stops the subscription once every shard's final record is in.
var errBarrierReached = errors.New("barrier reached")

func reducer(l *sharedlog.Log) ssf.Handler {
	return func(env *ssf.Env, input json.RawMessage) (any, error) {
		var in ReduceInput
		if err := json.Unmarshal(input, &in); err != nil || in.Job == "" || in.Shards < 1 {
			return nil, fmt.Errorf("%w: a reducer takes {job, shards}", ssf.ErrBadInput)
		}
		ctx := env.Context()
		if err := l.AddColor(ctx, barrier(in.Job), ""); err != nil {
			return nil, err
		}
		// Wait at the barrier: records are immutable, so every execution that gets past it
		// reads the same records and computes the same result.
		done := map[int]bool{}
		err := l.Subscribe(ctx, barrier(in.Job), 1, func(r sharedlog.Record) error {
			var f struct{ Shard int }
			if err := json.Unmarshal(r.Data, &f); err != nil {
				return err
			}
			if f.Shard < in.Shards {
				done[f.Shard] = true
			}
			if len(done) == in.Shards {
				return errBarrierReached
			}
			return nil
		})
		if !errors.Is(err, errBarrierReached) {
			return nil, err // the lifetime ran out first: a later execution waits again
		}
		totals := map[string]int{}
		for shard := range in.Shards {
			if err := readAll(ctx, l, shardColor(in.Job, shard), func(c Count) { totals[c.Word] += c.Count }); err != nil {
				return nil, err
			}
		}
		out := make([]Count, 0, len(totals))
		for _, w := range sortedWords(totals) {
			out = append(out, Count{Word: w, Count: totals[w]})
		}
		if err := env.Write("results", in.Job, out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// readAll reads every record of a color (a mapper with no words added the color and nothing).
func readAll(ctx context.Context, l *sharedlog.Log, color string, each func(Count)) error {
	for sn := uint64(1); ; sn++ {
		r, found, err := l.ReadNext(ctx, color, sn)
		if errors.Is(err, sharedlog.ErrNoColor) {
			return nil
		}
		if err != nil || !found {
			return err
		}
		var c Count
		if err := json.Unmarshal(r.Data, &c); err != nil {
			return err
		}
		each(c)
		sn = r.SN
	}
}

// Forget trims a finished job's colors, once its result is stored: the garbage collector then
// deletes the records. It is the job driver's step, not the reducer's, because a re-executed
// reducer reads the colors again.
func Forget(ctx context.Context, l *sharedlog.Log, job string, shards int) error {
	colors := []string{barrier(job)}
	for shard := range shards {
		colors = append(colors, shardColor(job, shard))
	}
	for _, c := range colors {
		tail, err := l.CheckTail(ctx, c)
		if errors.Is(err, sharedlog.ErrNoColor) {
			continue // a mapper that never ran
		}
		if err != nil {
			return err
		}
		if err := l.Trim(ctx, c, tail); err != nil {
			return err
		}
	}
	return nil
}
