package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// TransactSQL implements store.SQLTransactor: fn's rows and statements share one transaction
// on the file's connection. A writing transaction begins IMMEDIATE, taking the write lock
// first, so it never deadlocks with another process's; a read-only one begins DEFERRED (a
// snapshot in WAL mode) under PRAGMA query_only, which makes SQLite refuse its writes.
func (d *Driver) TransactSQL(ctx context.Context, readOnly bool, fn func(kv store.Driver, sql store.SQLConn) error) error {
	if d.closed.Load() {
		return store.ErrClosed
	}
	tx, err := d.conn.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: readOnly})
	if err != nil {
		return d.wrap(ctx, err)
	}
	defer tx.Rollback()
	if readOnly {
		if _, err := tx.ExecContext(ctx, `PRAGMA query_only = 1`); err != nil {
			return d.wrap(ctx, err)
		}
		// The pragma belongs to the connection, which the process's other operations share.
		defer tx.ExecContext(context.WithoutCancel(ctx), `PRAGMA query_only = 0`)
	}
	if err := fn(txDriver{d: d, tx: tx}, sqlConn{d: d, tx: tx}); err != nil {
		return err
	}
	if readOnly {
		if _, err := tx.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
			return d.wrap(ctx, err)
		}
	}
	return d.wrap(ctx, tx.Commit())
}

// txDriver is the store.Driver inside a TransactSQL transaction.
type txDriver struct {
	d  *Driver
	tx *sql.Tx
}

func (t txDriver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	a, found, err := t.d.read(ctx, t.tx.StmtContext(ctx, t.d.get), key)
	return a, found, t.d.wrap(ctx, err)
}

func (t txDriver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, err := t.UpdateBatch(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

func (t txDriver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	rs, err := t.d.applyAll(ctx, t.tx, ups)
	return rs, t.d.wrap(ctx, err)
}

func (t txDriver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	rows, err := t.d.scanRows(ctx, t.tx, partition, opts)
	return rows, t.d.wrap(ctx, err)
}

func (t txDriver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	deleted, err := t.d.deleteIn(ctx, t.tx, key, cond)
	return deleted, t.d.wrap(ctx, err)
}

func (t txDriver) Limits() store.Limits { return t.d.limits }

// Close does nothing: the transaction ends when TransactSQL's function returns.
func (t txDriver) Close() error { return nil }

// sqlConn is an application's view of a TransactSQL transaction.
type sqlConn struct {
	d  *Driver
	tx *sql.Tx
}

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, sqlErr(ctx, err)
	}
	n, err := res.RowsAffected()
	return n, sqlErr(ctx, err)
}

func (c sqlConn) Query(ctx context.Context, query string, args ...any) (store.SQLRows, error) {
	rows, err := c.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqlErr(ctx, err)
	}
	return sqlRows{ctx: ctx, rows: rows}, nil
}

type sqlRows struct {
	ctx  context.Context
	rows *sql.Rows
}

func (r sqlRows) Next() bool             { return r.rows.Next() }
func (r sqlRows) Scan(dest ...any) error { return sqlErr(r.ctx, r.rows.Scan(dest...)) }
func (r sqlRows) Err() error             { return sqlErr(r.ctx, r.rows.Err()) }
func (r sqlRows) Close() error           { return sqlErr(r.ctx, r.rows.Close()) }

// sqlErr maps a statement's failure: SQLite's refusals (a constraint, a syntax error, a write
// under query_only) to *store.SQLError, the rest as the driver maps them.
func sqlErr(ctx context.Context, err error) error {
	var se *sqlite.Error
	if err == nil || ctx.Err() != nil || !errors.As(err, &se) {
		return mapErr(ctx, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM:
		return mapErr(ctx, err)
	}
	return &store.SQLError{Code: codeName(se.Code()), Message: se.Error(), Err: err}
}

// codeName is SQLite's name of a (possibly extended) result code: SQLITE_CONSTRAINT_UNIQUE.
// modernc names the primary codes; the constraint family, which applications branch on, is
// named here.
func codeName(code int) string {
	if name, ok := constraintCodes[code]; ok {
		return name
	}
	for _, c := range []int{code, code & 0xff} {
		s := sqlite.ErrorCodeString[c]
		if i := strings.LastIndex(s, "(SQLITE_"); i >= 0 && strings.HasSuffix(s, ")") {
			return s[i+1 : len(s)-1]
		}
	}
	return fmt.Sprintf("SQLITE_%d", code)
}

var constraintCodes = map[int]string{
	sqlite3.SQLITE_CONSTRAINT_CHECK:      "SQLITE_CONSTRAINT_CHECK",
	sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY: "SQLITE_CONSTRAINT_FOREIGNKEY",
	sqlite3.SQLITE_CONSTRAINT_NOTNULL:    "SQLITE_CONSTRAINT_NOTNULL",
	sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY: "SQLITE_CONSTRAINT_PRIMARYKEY",
	sqlite3.SQLITE_CONSTRAINT_UNIQUE:     "SQLITE_CONSTRAINT_UNIQUE",
	sqlite3.SQLITE_CONSTRAINT_DATATYPE:   "SQLITE_CONSTRAINT_DATATYPE",
}
