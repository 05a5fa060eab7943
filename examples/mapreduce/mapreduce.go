// Package mapreduce is a word count in two stages joined by a barrier on the shared log
// (FlexLog §4's "final record" pattern): each mapper SSF appends its partial counts to a color of
// its own and then arrives at the job's barrier (ArriveStep, its final record); the reducer SSF
// awaits the barrier until every mapper has arrived (Await), then reads the mappers' colors. The
// barrier gives the causal order the stages need across colors, which the log does not order
// among themselves; the appends are exactly-once steps, so crashed and re-run mappers count once.
package mapreduce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
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
		// The color is created idempotently: every execution may add it.
		if err := l.AddColor(ctx, shardColor(in.Job, in.Shard), ""); err != nil {
			return nil, err
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
		if err := l.ArriveStep(env, barrier(in.Job), strconv.Itoa(in.Shard), nil); err != nil {
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

func reducer(l *sharedlog.Log) ssf.Handler {
	return func(env *ssf.Env, input json.RawMessage) (any, error) {
		var in ReduceInput
		if err := json.Unmarshal(input, &in); err != nil || in.Job == "" || in.Shards < 1 {
			return nil, fmt.Errorf("%w: a reducer takes {job, shards}", ssf.ErrBadInput)
		}
		ctx := env.Context()
		// Wait at the barrier: records are immutable, so every execution that gets past it
		// reads the same records and computes the same result. If the lifetime runs out first,
		// a later execution waits again.
		shards := make([]string, in.Shards)
		for i := range shards {
			shards[i] = strconv.Itoa(i)
		}
		if _, err := l.Await(ctx, barrier(in.Job), shards...); err != nil {
			return nil, err
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
