package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipelinedTx is a transaction whose BEGIN travels with its first statement, in one pgx batch:
// one round trip less per transaction than pgx's BeginTx, which sends BEGIN on its own. A
// transaction that sends no statement never begins, and its commit sends nothing.
type pipelinedTx struct {
	conn   *pgxpool.Conn
	begin  string      // the BEGIN statement, until it was sent
	queued []statement // statements that go with the next request (txDriver.DeleteBlind)
	ended  bool
}

// later queues s to be sent with the transaction's next request.
func (t *pipelinedTx) later(s statement) { t.queued = append(t.queued, s) }

// sentError is the error of a statement sent ahead of the one a request was for (BEGIN, the
// queued statements): a swap queued to apply that matched no row (txDriver.mustSwap) refused
// the attempt.
func sentError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22012" {
		return fmt.Errorf("%w: %v", errFinalRefused, err)
	}
	return err
}

// unsent queues on b what the transaction has not sent yet (BEGIN, the queued statements),
// and returns how many results of b's they are.
func (t *pipelinedTx) unsent(b *pgx.Batch) int {
	n := 0
	if t.begin != "" {
		b.Queue(t.begin)
		t.begin, n = "", 1
	}
	for _, s := range t.queued {
		b.Queue(s.sql, s.args...)
	}
	n += len(t.queued)
	t.queued = nil
	return n
}

func (d *Driver) beginPipelined(ctx context.Context, opts pgx.TxOptions) (*pipelinedTx, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	begin := "begin isolation level read committed"
	if opts.AccessMode == pgx.ReadOnly {
		begin += " read only"
	}
	return &pipelinedTx{conn: c, begin: begin}, nil
}

// send returns the batch carrying what was not sent yet (BEGIN, queued statements) and the
// statement, after the results of the former; the caller reads the statement's and closes it.
// nil when everything before it was sent already.
func (t *pipelinedTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if t.begin == "" && len(t.queued) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	n := t.unsent(b)
	b.Queue(sql, args...)
	br := t.conn.SendBatch(ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, sentError(err)
		}
	}
	return br, nil
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if br == nil {
		return t.conn.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return t.conn.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := t.send(ctx, sql, args)
	switch {
	case err != nil:
		return errRow{err}
	case br == nil:
		return t.conn.QueryRow(ctx, sql, args...)
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// statement is one SQL statement with its arguments.
type statement struct {
	sql  string
	args []any
}

// commitWith sends stmts and COMMIT in one batch (with BEGIN if it was not sent yet): the
// transaction ends with it. A statement's error aborts it all (the server rolled back); a
// COMMIT the server turned into a ROLLBACK is pgx.ErrTxCommitRollback.
func (t *pipelinedTx) commitWith(ctx context.Context, stmts []statement) error {
	tags, err := t.execAll(ctx, append(stmts, statement{sql: "commit"}))
	if err != nil {
		return err
	}
	t.ended = true
	if tags[len(tags)-1].String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// execAll sends stmts in one batch, after what was not sent yet (BEGIN, queued statements), and
// returns their tags. A statement's error ends the batch: the server aborted the transaction.
func (t *pipelinedTx) execAll(ctx context.Context, stmts []statement) (tags []pgconn.CommandTag, err error) {
	b := &pgx.Batch{}
	before := t.unsent(b)
	for _, s := range stmts {
		b.Queue(s.sql, s.args...)
	}
	br := t.conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			tags, err = nil, cerr
		}
	}()
	for range before {
		if _, err := br.Exec(); err != nil {
			return nil, sentError(err)
		}
	}
	tags = make([]pgconn.CommandTag, len(stmts))
	for i := range stmts {
		if tags[i], err = br.Exec(); err != nil {
			return nil, err
		}
	}
	return tags, nil
}

// commit commits, reporting a transaction the server had aborted (its COMMIT answers ROLLBACK)
// as pgx does.
func (t *pipelinedTx) commit(ctx context.Context) error {
	if t.ended {
		return nil // committed with its last statements (txDriver.UpdateBatchFinal)
	}
	if len(t.queued) > 0 {
		return t.commitWith(ctx, nil)
	}
	if t.begin != "" {
		t.ended = true // nothing was sent
		return nil
	}
	tag, err := t.conn.Exec(ctx, "commit")
	t.ended = true
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// end rolls back what was not committed and returns the connection to the pool; one whose
// state is unknown is closed instead.
func (t *pipelinedTx) end(ctx context.Context) {
	if !t.ended && t.begin == "" {
		if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
			_ = t.conn.Conn().Close(ctx)
		}
	}
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		_ = t.conn.Conn().Close(ctx)
	}
	t.conn.Release()
}

// batchRows are a query's rows read from a batch, which closes with them.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closeErr error
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if err := r.br.Close(); err != nil && r.Rows.Err() == nil {
		r.closeErr = err
	}
}

// batchRow is a row read from a batch, which closes once the row is scanned.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// errRow is a row whose statement could not be sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
