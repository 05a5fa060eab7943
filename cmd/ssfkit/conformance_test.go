package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
)

// A driver that ignores conditions: every conditional update applies. The suites must catch it.
type unconditional struct{ *memstore.Driver }

func (d unconditional) Update(ctx context.Context, key store.Key, _ store.Cond, upd store.Update) (store.UpdateResult, error) {
	return d.Driver.Update(ctx, key, store.Always(), upd)
}

func init() {
	store.Register("unconditional", func(context.Context, *store.URL) (store.Driver, error) {
		return unconditional{memstore.New(memstore.DefaultMaxRowBytes)}, nil
	})
}

func TestConformanceCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "conf.db")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   []string // substrings of stdout + stderr + the error
	}{
		{"sqlite passes", []string{"-store", "sqlite://" + db + "?table={table}", "-suites", "driver,crash", "-stride", "25", "-schedules", "1"},
			0, []string{"TEST", "driver/ConditionsOnMissingRow", "crash/EveryPoint", "PASS: all"}},
		{"a broken driver fails", []string{"-store", "unconditional://{table}", "-suites", "driver"},
			1, []string{"driver/FailedConditionChangesNothing", "FAIL", "tests failed on unconditional://{table}"}},
		{"no placeholder", []string{"-store", "mem://x"}, 2, []string{"has no {table}"}},
		{"no store", nil, 2, []string{"give -store, -queue or both"}},
		{"queue", []string{"-queue", "mem://{queue}"}, 0, []string{"queue/RoundTrip", "queue/ConcurrentReceivers", "PASS: all", "queues named ssfk"}},
		{"no queue placeholder", []string{"-queue", "mem://q"}, 2, []string{"has no {queue}"}},
		{"queue suite without a queue", []string{"-store", "mem://{table}", "-suites", "queue"}, 2, []string{`suite "queue" needs -queue`}},
		{"unknown suite", []string{"-store", "mem://{table}", "-suites", "driver,speed"}, 2, []string{`unknown suite "speed"`}},
		{"unknown scheme", []string{"-store", "nosuch://{table}"}, 1, []string{`unknown URL scheme "nosuch"`, "known schemes"}},
		{"duration too short", []string{"-store", "mem://{table}", "-lifetime", "1s", "-duration", "2s"}, 2, []string{"at least 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"conformance"}, tc.args...), &stdout, &stderr)
			if status := exitStatus(err, &stderr); status != tc.status {
				t.Errorf("exit status %d, want %d (err %v)\n%s", status, tc.status, err, stdout.String())
			}
			all := stdout.String() + stderr.String() + errString(err)
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
}
