package ssf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
)

// SQL steps: an application's own SQL on the SSF's relational store (PostgreSQL, SQLite), as
// one step of the instance (Apiary's transactional functions, DBOS's RunAsTransaction). A
// writing step's statements and its log entry commit in one database transaction, so the
// statements take effect exactly once, in one commit; a read-only step's result is logged like
// a Read, with the next effect. See docs/sql-steps.md.

// RunSQL runs fn in one transaction on the SSF's relational store, exactly once: fn's
// statements commit together with the step's log entry, and a re-execution of the instance
// gets the logged result without running fn. When several executions of the instance run the
// step at once, the first to commit wins and the others' transactions roll back.
//
// fn must do nothing outside tx (it may run again after a deadlock or a lost race) and must
// return a JSON-encodable Out: every execution gets Out as decoded from the logged JSON. An
// error from fn rolls its statements back and is logged too, so every execution gets the same
// *SQLStepError (with the database's code when it refused a statement). A failure to reach the
// database is not fn's result: the execution stops and the instance runs again later.
//
// The store must be relational (postgres:// or sqlite://), and the step cannot run inside a
// cross-SSF transaction (its commit could not be undone by the transaction's abort).
func RunSQL[Out any](env *Env, fn func(ctx context.Context, tx *store.SQLTx) (Out, error)) (Out, error) {
	return typedSQL(env, false, fn)
}

// QuerySQL runs fn in a read-only transaction on the SSF's relational store; the database
// refuses writes. Like a Read, its result is logged with the instance's next effect, not in a
// commit of its own, and a re-execution that reaches the step after the result was logged
// gets the logged result (Apiary's selective recording: only results that effects depend on
// are made durable). Otherwise as RunSQL.
func QuerySQL[Out any](env *Env, fn func(ctx context.Context, tx *store.SQLTx) (Out, error)) (Out, error) {
	return typedSQL(env, true, fn)
}

func typedSQL[Out any](env *Env, readOnly bool, fn func(ctx context.Context, tx *store.SQLTx) (Out, error)) (Out, error) {
	var out Out
	raw, err := env.sqlStep(readOnly, func(ctx context.Context, tx *store.SQLTx) (any, error) { return fn(ctx, tx) })
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, env.fail(fmt.Errorf("%w: a SQL step's logged output %s does not decode into %s: %v", ErrCorrupt, raw, typeName[Out](), err))
	}
	return out, nil
}

// SQLStepError is a SQL step's logged failure: fn's error, or the statement the database
// refused, the same for every execution of the instance.
type SQLStepError struct {
	Code    string // the database's code (store.SQLError.Code) when it refused a statement
	Message string
}

func (e *SQLStepError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// The kinds of a SQL step's log entry, which provenance exports as the data event's kind.
const (
	kindSQL      = provenance.EventSQL
	kindSQLQuery = provenance.EventSQLQuery
)

// sqlEvent is a SQL step's provenance: its kind, whether it succeeded, and the digest (with
// CaptureFull, the JSON) of what it logged. The statements' own reads and writes of the
// application's tables are not captured.
func sqlEvent(step int, kind string, logged []byte, at int64, full bool) provenance.DataEvent {
	var oc sqlOutcome
	failed := json.Unmarshal(logged, &oc) != nil || oc.Failed
	ev := provenance.DataEvent{Step: step, Kind: kind, At: at, Applied: !failed, Digest: digest(logged)}
	if full {
		ev.Value = logged
	}
	return ev
}

// sqlOutcome is what a SQL step's log entry holds.
type sqlOutcome struct {
	Output json.RawMessage `json:"out,omitempty"`
	Error  string          `json:"err,omitempty"`
	Code   string          `json:"code,omitempty"`
	Failed bool            `json:"failed,omitempty"`
}

func (o sqlOutcome) result() (json.RawMessage, error) {
	if o.Failed {
		return nil, &SQLStepError{Code: o.Code, Message: o.Error}
	}
	if o.Output == nil {
		return json.RawMessage("null"), nil
	}
	return o.Output, nil
}

// errSQLStepSettled rolls a SQL step's transaction back: fn failed (its failure is logged on
// its own), or another execution logged the step first.
var errSQLStepSettled = errors.New("ssf: SQL step settled without this transaction")

func (e *Env) sqlStep(readOnly bool, fn func(ctx context.Context, tx *store.SQLTx) (any, error)) (_ json.RawMessage, err error) {
	kind := kindSQL
	if readOnly {
		kind = kindSQLQuery
	}
	defer e.traceStep(kind)(&err)
	tr, ok := e.rt.cfg.Store.Driver().(store.SQLTransactor)
	if !ok {
		return nil, fmt.Errorf("%w: SQL steps need a relational store (postgres:// or sqlite://); SSF %s runs on %s", ErrBadInput, e.rt.cfg.Name, e.rt.st.Name())
	}
	if e.tx != nil {
		return nil, fmt.Errorf("%w: a SQL step cannot run inside a cross-SSF transaction: its commit could not be undone if the transaction aborts", ErrBadInput)
	}
	step, err := e.begin()
	if err != nil {
		return nil, err
	}
	logRow := readLogKey(e.id, step)
	if e.replaying {
		if v, found, err := e.rt.readLog(e.ctx, e.id, step); err != nil || found {
			if err != nil {
				return nil, e.fail(err)
			}
			return e.loggedSQL(step, v)
		}
	}
	if readOnly {
		var oc sqlOutcome
		err := e.rt.transactSQL(e, tr, true, logRow, func(_ *store.Table, tx *store.SQLTx) (err error) {
			oc, err = e.runSQL(fn, tx)
			return err
		})
		if err != nil {
			return nil, e.fail(err)
		}
		v, err := json.Marshal(oc)
		if err != nil {
			return nil, e.fail(err)
		}
		entry := unloggedEntry{step: step, value: v, kind: kindSQLQuery}
		if e.rt.capturing() {
			entry.at = e.rt.now()
		}
		e.unlogged = append(e.unlogged, entry)
		return oc.result()
	}

	var oc sqlOutcome
	var logged []byte
	var kept []unloggedEntry
	err = e.rt.transactSQL(e, tr, false, logRow, func(kv *store.Table, tx *store.SQLTx) (err error) {
		logged = nil
		// The reads this step's statements depend on are logged in its commit.
		if kept, err = e.flushTo(kv, false); err != nil {
			return err
		}
		if oc, err = e.runSQL(fn, tx); err != nil {
			return err
		}
		if oc.Failed {
			return errSQLStepSettled // fn's statements roll back; the failure is logged below
		}
		logged, err = e.logSQL(kv, logRow, oc)
		if err == nil && logged != nil {
			err = errSQLStepSettled
		}
		return err
	})
	switch {
	case errors.Is(err, errSQLStepSettled) && logged != nil:
		return e.loggedSQL(step, logged)
	case errors.Is(err, errSQLStepSettled): // fn failed: log the failure, and the reads before it
		err = e.rt.atomically(e.ctx, logRow, func(st *store.Table) (err error) {
			if kept, err = e.flushTo(st, false); err != nil {
				return err
			}
			logged, err = e.logSQL(st, logRow, oc)
			return err
		})
		if err != nil {
			return nil, e.fail(err)
		}
		e.flushed(kept)
		if logged != nil {
			return e.loggedSQL(step, logged)
		}
		return oc.result()
	case err != nil:
		return nil, e.fail(err)
	}
	e.flushed(kept)
	return oc.result()
}

// runSQL runs fn and turns what it returned into the step's outcome. An infrastructure failure
// (the execution poisoned by a statement that could not reach the database, a crash, the
// fence) is returned as an error, whatever fn made of it.
func (e *Env) runSQL(fn func(ctx context.Context, tx *store.SQLTx) (any, error), tx *store.SQLTx) (sqlOutcome, error) {
	out, err := fn(e.ctx, tx)
	if e.err != nil {
		return sqlOutcome{}, e.err
	}
	if err != nil {
		oc := sqlOutcome{Failed: true, Error: err.Error()}
		var se *store.SQLError
		if errors.As(err, &se) {
			oc.Code = se.Code
		}
		return oc, nil
	}
	v, err := json.Marshal(out)
	if err != nil {
		return sqlOutcome{Failed: true, Error: fmt.Sprintf("the SQL step's output is not JSON-encodable: %v", err)}, nil
	}
	return sqlOutcome{Output: v}, nil
}

// logSQL creates the step's log entry; when another execution created it first, it returns
// that execution's entry.
func (e *Env) logSQL(st *store.Table, logRow store.Key, oc sqlOutcome) (logged []byte, err error) {
	v, err := json.Marshal(oc)
	if err != nil {
		return nil, err
	}
	upd := store.Update{store.SetAttr(store.Attr(attrKind), kindSQL), store.SetAttr(store.Attr(attrValue), v)}
	if e.rt.capturing() {
		upd = append(upd, store.SetAttr(store.Attr(attrAt), e.rt.now()))
	}
	r, err := st.Update(e.ctx, logRow, store.RowAbsent(), upd)
	if err != nil || r.Applied {
		return nil, err
	}
	logged, _ = r.Attrs[attrValue].([]byte)
	if logged == nil {
		logged = []byte("null") // an entry without a value: not a SQL step's (loggedSQL refuses it)
	}
	return logged, nil
}

// loggedSQL is a SQL step's result from its log entry.
func (e *Env) loggedSQL(step int, v []byte) (json.RawMessage, error) {
	var oc sqlOutcome
	if err := json.Unmarshal(v, &oc); err != nil || (oc.Output == nil && !oc.Failed) {
		return nil, e.fail(fmt.Errorf("%w: step %d of instance %s logged %q, not a SQL step's result: the handler is not deterministic", ErrCorrupt, step, e.id, v))
	}
	return oc.result()
}

// transactSQL runs fn in a transaction of the SSF's relational store with the runtime's rows
// and the application's statements, each request fenced and, under fault injection, with its
// points (the statements' op is "sql"), and the commit's points at key, as atomically has.
func (rt *Runtime) transactSQL(e *Env, tr store.SQLTransactor, readOnly bool, key store.Key, fn func(kv *store.Table, tx *store.SQLTx) error) error {
	return rt.committing(e.ctx, key, func(beforeCommit func() error) error {
		return tr.TransactSQL(e.ctx, readOnly, func(kv store.Driver, c store.SQLConn) error {
			if err := fn(store.NewTable(rt.wrapDriver(kv), rt.st.Name()), store.NewSQLTx(stepSQL{e: e, key: key, conn: c})); err != nil {
				return err
			}
			return beforeCommit()
		})
	})
}

// stepSQL is the SQLConn a SQL step's function uses: each statement is a request of the
// execution, checked against its fence and its fault points before it is sent. A statement
// that fails for a reason other than the database refusing it poisons the execution, so that
// fn cannot turn a lost connection into a logged result.
type stepSQL struct {
	e    *Env
	key  store.Key
	conn store.SQLConn
}

func (s stepSQL) request(ctx context.Context, do func() error) error {
	if err := s.e.alive(); err != nil {
		return err
	}
	if err := s.e.rt.inject(ctx, "sql", s.key, false); err != nil {
		return s.e.fail(err)
	}
	if err := do(); err != nil {
		return s.failed(err)
	}
	if err := s.e.rt.inject(ctx, "sql", s.key, true); err != nil {
		return s.e.fail(err)
	}
	return nil
}

// failed poisons the execution unless err is the database's answer to the statement.
func (s stepSQL) failed(err error) error {
	var se *store.SQLError
	if err == nil || errors.As(err, &se) || errors.Is(err, store.ErrNoRows) {
		return err
	}
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return s.e.fail(err)
	}
	return err // a Go-side error: an argument or a destination of the wrong type
}

func (s stepSQL) Exec(ctx context.Context, query string, args ...any) (n int64, err error) {
	err = s.request(ctx, func() (err error) { n, err = s.conn.Exec(ctx, query, args...); return })
	return n, err
}

func (s stepSQL) Query(ctx context.Context, query string, args ...any) (rows store.SQLRows, err error) {
	err = s.request(ctx, func() (err error) { rows, err = s.conn.Query(ctx, query, args...); return })
	if err != nil {
		return nil, err
	}
	return stepRows{s: s, rows: rows}, nil
}

// stepRows reports the failures of reading rows as the statement's.
type stepRows struct {
	s    stepSQL
	rows store.SQLRows
}

func (r stepRows) Next() bool             { return r.rows.Next() }
func (r stepRows) Scan(dest ...any) error { return r.s.failed(r.rows.Scan(dest...)) }
func (r stepRows) Err() error             { return r.s.failed(r.rows.Err()) }
func (r stepRows) Close() error           { return r.s.failed(r.rows.Close()) }
