package store

import (
	"context"
	"errors"
	"fmt"
)

// SQLTransactor is an optional Driver interface for relational backends (PostgreSQL, SQLite):
// TransactSQL runs fn in one database transaction that holds both the table's rows (kv, as
// Transactor's tx does) and the application's own SQL (sql), so a SQL step's statements and
// its log entry commit together, in one commit (Apiary's transactional functions). The
// transaction is committed when fn returns nil and rolled back when it returns an error, which
// TransactSQL returns. With readOnly the database refuses writes (kv's too).
//
// fn may run again after a deadlock or serialization failure, so it must have no effects outside
// the transaction.
type SQLTransactor interface {
	TransactSQL(ctx context.Context, readOnly bool, fn func(kv Driver, sql SQLConn) error) error
}

// SQLConn is the driver's side of a SQL transaction; applications get it as a *SQLTx.
// Placeholders are the backend's: $1, $2, ... on PostgreSQL; SQLite accepts the same form.
type SQLConn interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	// Query runs a statement that returns rows.
	Query(ctx context.Context, query string, args ...any) (SQLRows, error)
}

// SQLRows iterates over a query's rows, as database/sql's Rows does: Next before each row,
// Scan into Go values, Err after the last, and Close always.
type SQLRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// SQLTx is a SQL transaction handed to an application (ssf.RunSQL, ssf.QuerySQL). Every
// statement runs inside the one transaction; the transaction ends when the function it was
// handed to returns.
type SQLTx struct{ conn SQLConn }

// NewSQLTx wraps a driver's (or a decorator's) SQLConn for an application.
func NewSQLTx(c SQLConn) *SQLTx { return &SQLTx{conn: c} }

// Exec runs a statement (INSERT, UPDATE, DELETE, DDL) and returns how many rows it changed.
func (t *SQLTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return t.conn.Exec(ctx, query, args...)
}

// Query runs a statement that returns rows; close them before the next statement.
func (t *SQLTx) Query(ctx context.Context, query string, args ...any) (SQLRows, error) {
	return t.conn.Query(ctx, query, args...)
}

// QueryRow runs a statement expected to return one row; its Scan reads the first row, or returns
// ErrNoRows when there is none.
func (t *SQLTx) QueryRow(ctx context.Context, query string, args ...any) *SQLRow {
	rows, err := t.conn.Query(ctx, query, args...)
	return &SQLRow{rows: rows, err: err}
}

// SQLRow is QueryRow's result.
type SQLRow struct {
	rows SQLRows
	err  error
}

// Scan copies the row's columns into dest and releases the query.
func (r *SQLRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}

// ErrNoRows: QueryRow found no row.
var ErrNoRows = errors.New("sql: no rows in result set")

// SQLError is a statement the database refused (a constraint, a syntax error, a type
// mismatch): Code is PostgreSQL's SQLSTATE ("23505" for a unique violation) or SQLite's extended
// result code name ("SQLITE_CONSTRAINT_UNIQUE"). Drivers return it, wrapping the native error;
// failures to reach the database are ErrUnavailable instead.
type SQLError struct {
	Code    string
	Message string
	Err     error // the driver's own error, if any
}

func (e *SQLError) Error() string { return fmt.Sprintf("sql error %s: %s", e.Code, e.Message) }

func (e *SQLError) Unwrap() error { return e.Err }
