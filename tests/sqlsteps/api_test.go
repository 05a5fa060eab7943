package sqlsteps

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// host returns a host with one SSF on a fresh SQLite table running fn, and the store's
// SQLTransactor for setting up tables.
func host(t *testing.T, fn ssf.Handler) (*local.Host, *ssf.Runtime, store.SQLTransactor) {
	t.Helper()
	table := testtables.SQLite(t)(t, "api")
	h := local.NewHost()
	t.Cleanup(h.Close)
	rt, err := h.Add(ssf.Config{Name: "api", Store: table, Handler: fn, RelaunchDelay: time.Nanosecond, MaxAttempts: -1})
	if err != nil {
		t.Fatal(err)
	}
	return h, rt, table.Driver().(store.SQLTransactor)
}

// A step whose function fails is logged as failed: the statements before the failure are
// rolled back, every execution gets the same *SQLStepError (with the database's code when it
// refused a statement), and a re-execution does not run the function again.
func TestFailuresAreLoggedOnce(t *testing.T) {
	var runs atomic.Int64
	h, _, tr := host(t, ssf.Typed(func(env *ssf.Env, _ json.RawMessage) (string, error) {
		_, err := ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int, error) {
			runs.Add(1)
			if _, err := tx.Exec(ctx, `INSERT INTO kv (k) VALUES ('a')`); err != nil {
				return 0, err
			}
			_, err := tx.Exec(ctx, `INSERT INTO kv (k) VALUES ('a')`) // a duplicate key
			return 0, err
		})
		var se *ssf.SQLStepError
		if !errors.As(err, &se) {
			return "", err
		}
		_, err = ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int, error) {
			return 0, errors.New("an application's own refusal")
		})
		var mine *ssf.SQLStepError
		if !errors.As(err, &mine) || mine.Code != "" {
			return "", err
		}
		return se.Code + " / " + mine.Error(), env.Stop(errors.New("run again"))
	}))
	ctx := context.Background()
	if err := tr.TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(ctx, `CREATE TABLE kv (k text PRIMARY KEY)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The first execution stops after both steps; the second replays them from the log.
	if _, err := h.Invoke(ctx, "api", "one", nil); !errors.Is(err, ssf.ErrStopped) {
		t.Fatalf("first execution: %v, want it stopped", err)
	}
	_, err := h.Invoke(ctx, "api", "one", nil)
	if !errors.Is(err, ssf.ErrStopped) {
		t.Fatalf("second execution: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the failing function ran %d times, want once (a re-execution gets the logged failure)", n)
	}
	var rows int64
	if err := tr.TransactSQL(ctx, true, func(_ store.Driver, c store.SQLConn) error {
		return store.NewSQLTx(c).QueryRow(ctx, `SELECT count(*) FROM kv`).Scan(&rows)
	}); err != nil || rows != 0 {
		t.Errorf("%d rows after a failed step (%v), want its statements rolled back", rows, err)
	}
}

// The returned value is the logged JSON decoded, the same for the first execution as for a
// replay; a read-only step refuses writes.
func TestResultsAndReadOnly(t *testing.T) {
	type row struct {
		K string `json:"k"`
		N int64  `json:"n"`
	}
	h, _, tr := host(t, ssf.Typed(func(env *ssf.Env, _ json.RawMessage) ([]any, error) {
		inserted, err := ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (row, error) {
			_, err := tx.Exec(ctx, `INSERT INTO kv (k, n) VALUES ($1, $2)`, "x", 41)
			return row{K: "x", N: 41}, err
		})
		if err != nil {
			return nil, err
		}
		got, err := ssf.QuerySQL(env, func(ctx context.Context, tx *store.SQLTx) (row, error) {
			var r row
			err := tx.QueryRow(ctx, `SELECT k, n FROM kv WHERE k = $1`, "x").Scan(&r.K, &r.N)
			return r, err
		})
		if err != nil {
			return nil, err
		}
		_, refused := ssf.QuerySQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
			return tx.Exec(ctx, `DELETE FROM kv`)
		})
		var se *ssf.SQLStepError
		if !errors.As(refused, &se) {
			return nil, errors.New("a read-only step deleted rows")
		}
		return []any{inserted, got}, nil
	}))
	ctx := context.Background()
	if err := tr.TransactSQL(ctx, false, func(_ store.Driver, c store.SQLConn) error {
		_, err := c.Exec(ctx, `CREATE TABLE kv (k text PRIMARY KEY, n bigint)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Invoke(ctx, "api", "one", nil)
	if err != nil || res.Error != "" {
		t.Fatalf("%+v %v", res, err)
	}
	if want := `[{"k":"x","n":41},{"k":"x","n":41}]`; string(res.Output) != want {
		t.Errorf("output %s, want %s", res.Output, want)
	}
}

// SQL steps need a relational store and cannot join a cross-SSF transaction; both are refused
// with a clear error before anything runs.
func TestRefusals(t *testing.T) {
	step := func(env *ssf.Env) error {
		_, err := ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int, error) {
			t.Error("the function ran")
			return 0, nil
		})
		return err
	}
	h := local.NewHost()
	defer h.Close()
	if _, err := h.Add(ssf.Config{Name: "kvonly", Store: store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://kvonly"),
		Handler: func(env *ssf.Env, _ json.RawMessage) (any, error) { return nil, step(env) }}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Invoke(context.Background(), "kvonly", "one", nil)
	if err != nil || !strings.Contains(res.Error, "SQL steps need a relational store") || !strings.Contains(res.Error, "mem://kvonly") {
		t.Errorf("on a key-value store: %+v %v, want a refusal naming the store", res, err)
	}

	h2, _, _ := host(t, func(env *ssf.Env, _ json.RawMessage) (any, error) {
		if err := env.BeginTx(); err != nil {
			return nil, err
		}
		err := step(env)
		if _, endErr := env.EndTx(); endErr != nil && err == nil {
			err = endErr
		}
		return nil, err
	})
	res, err = h2.Invoke(context.Background(), "api", "one", nil)
	if err != nil || !strings.Contains(res.Error, "cannot run inside a cross-SSF transaction") {
		t.Errorf("inside a transaction: %+v %v, want the refusal", res, err)
	}
}

// A handler that is not deterministic, logging a read at a step where a re-execution runs a
// SQL step, is caught, not given the read's value as the step's result.
func TestNondeterminismIsCaught(t *testing.T) {
	var executions atomic.Int64
	h, rt, _ := host(t, func(env *ssf.Env, _ json.RawMessage) (any, error) {
		if executions.Add(1) == 1 {
			if _, err := env.Read("t", "k"); err != nil {
				return nil, err
			}
			if err := env.Write("t", "other", 1); err != nil { // logs the read
				return nil, err
			}
			return nil, env.Stop(errors.New("run again"))
		}
		return ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int, error) { return 1, nil })
	})
	ctx := context.Background()
	if _, err := h.Invoke(ctx, "api", "one", nil); !errors.Is(err, ssf.ErrStopped) {
		t.Fatalf("first execution: %v", err)
	}
	_, err := h.Invoke(ctx, "api", "one", nil)
	if !errors.Is(err, ssf.ErrCorrupt) || rt.Stats().Corruptions == 0 {
		t.Errorf("a SQL step replayed from a read's log entry: %v, want ErrCorrupt counted", err)
	}
}
