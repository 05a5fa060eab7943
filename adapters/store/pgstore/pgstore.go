// Package pgstore is the PostgreSQL store driver (pgx).
//
// URL: postgres://user:password@host:port/database?table=NAME&max_row_bytes=N (also
// postgresql://). The table is created if missing: (pk text, sk text, attrs bytea, primary key
// (pk, sk)). Conditions are evaluated with the portable evaluator on the row as read, and the
// write is a compare-and-swap on those bytes: a single conditional update or delete is a
// SELECT and an UPDATE (or DELETE) ... WHERE sha256(attrs) = <the bytes read>, or an INSERT ...
// ON CONFLICT DO NOTHING for a row read absent, two autocommit statements, evaluated again if
// another writer got there in between. An update whose condition holds only on an absent row,
// or that usually creates it (the runtime's log entries, intents and index entries), tries that
// INSERT first: one statement when the row is absent. A delete without a condition is one
// statement. Batches (store.Batcher) run in one read-committed transaction, one commit, each
// update reading its row under a lock (SELECT ... FOR UPDATE); a transaction's BEGIN travels
// with its first statement. Inside a transaction, an update of a row the transaction's scan
// read is a compare-and-swap on the bytes read (one UPDATE), sent with the transaction's next
// request rather than on its own, and made to fail the transaction if it matches no row (the
// function then runs again, deciding each update on the row as it is); a batch's one-statement
// updates go in one round trip, and a final batch (store.FinalBatcher) takes the COMMIT with it
// when the scan predicts every update applies.
// store.Transactor puts any sequence of operations in one transaction:
// the runtime's faster path, which writes an SSF's log entries and data in one commit (Beldi
// §8, Apiary). transactions=off hides it, so the runtime takes its portable path (for
// comparisons).
package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() {
	store.Register("postgres", open)
	store.Register("postgresql", open)
}

const (
	// DefaultTable is the SQL table used when the URL names none.
	DefaultTable = "ssfkit"
	// DefaultMaxRowBytes matches DynamoDB's item limit, so a value that fits here fits there.
	DefaultMaxRowBytes = store.PortableMaxRowBytes
)

// Driver is a store.Driver over one PostgreSQL table.
type Driver struct {
	pool   *pgxpool.Pool
	conn   string
	table  string
	limits store.Limits
	closed sync.Once
}

// Drivers on one database share a pool: an application opens a table per SSF, and a pool each
// would multiply connections until the server refuses more.
var (
	poolsMu sync.Mutex
	pools   = map[string]*sharedPool{}
)

type sharedPool struct {
	pool *pgxpool.Pool
	refs int
}

func acquirePool(ctx context.Context, conn string) (*pgxpool.Pool, error) {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := pools[conn]; ok {
		p.refs++
		return p.pool, nil
	}
	cfg, err := pgxpool.ParseConfig(conn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	pools[conn] = &sharedPool{pool: pool, refs: 1}
	return pool, nil
}

func releasePool(conn string) {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := pools[conn]; ok {
		if p.refs--; p.refs == 0 {
			p.pool.Close()
			delete(pools, conn)
		}
	}
}

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	table := u.Param("table", DefaultTable)
	if !store.ValidIdentifier(table) {
		return nil, fmt.Errorf("%w: table=%q must be letters, digits or underscores", store.ErrInvalid, table)
	}
	limit, err := store.MaxRowBytes(u, DefaultMaxRowBytes)
	if err != nil {
		return nil, err
	}
	transactions := u.Param("transactions", "on")
	if transactions != "on" && transactions != "off" {
		return nil, fmt.Errorf("%w: transactions=%q must be on or off", store.ErrInvalid, transactions)
	}
	// Everything else in the query (sslmode, pool settings, ...) is pgx's to interpret.
	conn := u.WithoutParams("table", "max_row_bytes", "transactions")
	pool, err := acquirePool(ctx, conn)
	if err != nil {
		return nil, err
	}
	d := &Driver{pool: pool, conn: conn, table: table, limits: store.Limits{MaxRowBytes: limit}}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (pk text NOT NULL, sk text NOT NULL, attrs bytea NOT NULL, PRIMARY KEY (pk, sk))`); err != nil {
		d.Close()
		return nil, d.wrap(ctx, err)
	}
	if transactions == "off" {
		return withoutTransactions{d}, nil
	}
	return d, nil
}

// withoutTransactions is the driver without store.Transactor (the URL's transactions=off).
type withoutTransactions struct{ d *Driver }

func (w withoutTransactions) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	return w.d.Get(ctx, key)
}

func (w withoutTransactions) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	return w.d.Update(ctx, key, cond, upd)
}

// TransactSQL keeps SQL steps, which need a transaction whatever the store's path.
func (w withoutTransactions) TransactSQL(ctx context.Context, readOnly bool, fn func(kv store.Driver, sql store.SQLConn) error) error {
	return w.d.TransactSQL(ctx, readOnly, fn)
}

func (w withoutTransactions) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	return w.d.UpdateBatch(ctx, ups)
}

func (w withoutTransactions) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	return w.d.Scan(ctx, partition, opts)
}

func (w withoutTransactions) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	return w.d.Delete(ctx, key, cond)
}

func (w withoutTransactions) Drop(ctx context.Context) error { return w.d.Drop(ctx) }
func (w withoutTransactions) Limits() store.Limits           { return w.d.Limits() }
func (w withoutTransactions) Close() error                   { return w.d.Close() }

// wrap maps connection failures onto store.ErrUnavailable.
func (d *Driver) wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) || errors.Is(err, errFinalRefused) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code[:2] != "08" && pgErr.Code[:2] != "57" {
		return err // a server-side error that is not about the connection
	}
	return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
}

// conn is what a pool and a transaction have in common.
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	a, found, err := d.get(ctx, d.pool, key, "")
	return a, found, d.wrap(ctx, err)
}

func (d *Driver) get(ctx context.Context, q conn, key store.Key, lock string) (store.Attrs, bool, error) {
	blob, found, err := d.getRaw(ctx, q, key, lock)
	if err != nil || !found {
		return nil, false, err
	}
	a, err := store.DecodeAttrs(blob)
	if err != nil {
		return nil, false, fmt.Errorf("row %s: %w", key, err)
	}
	return a, true, nil
}

// swap is the compare-and-swap UPDATE of key's row to blob, applying only while the row holds
// the bytes old.
func (d *Driver) swap(key store.Key, old, blob []byte) statement {
	sum := sha256.Sum256(old)
	return statement{`UPDATE ` + d.table + ` SET attrs = $3 WHERE pk = $1 AND sk = $2 AND sha256(attrs) = $4`,
		[]any{key.Partition, key.Sort, blob, sum[:]}}
}

// mustSwap is swap made to fail (division by zero, 22012) when it matches no row, so that the
// server aborts the transaction instead of going on without it.
func (d *Driver) mustSwap(key store.Key, old, blob []byte) statement {
	s := d.swap(key, old, blob)
	s.sql = `WITH swapped AS (` + s.sql + ` RETURNING 1) SELECT 1 / count(*) FROM swapped`
	return s
}

// insert is the statement that creates the row key holding blob: with ifAbsent, doing nothing
// (no row affected) where it exists; without, failing (unique_violation, 23505).
func (d *Driver) insert(key store.Key, blob []byte, ifAbsent bool) statement {
	sql := `INSERT INTO ` + d.table + ` (pk, sk, attrs) VALUES ($1, $2, $3)`
	if ifAbsent {
		sql += ` ON CONFLICT DO NOTHING`
	}
	return statement{sql, []any{key.Partition, key.Sort, blob}}
}

// getRaw reads a row's attributes as stored; lock (" FOR UPDATE" or "") ends the SELECT.
func (d *Driver) getRaw(ctx context.Context, q conn, key store.Key, lock string) ([]byte, bool, error) {
	var blob []byte
	err := q.QueryRow(ctx, `SELECT attrs FROM `+d.table+` WHERE pk = $1 AND sk = $2`+lock, key.Partition, key.Sort).Scan(&blob)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return blob, err == nil, err
}

// Update implements store.Driver. An update that may only create the row is one autocommit
// INSERT when the row is absent (see create); otherwise it is a batch of one.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	u := store.BatchUpdate{Key: key, Cond: cond, Update: upd}
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	if res, created, err := d.create(ctx, d.pool, u); err != nil || created {
		return res, d.wrap(ctx, err)
	}
	res, err := d.updateSwapping(ctx, u)
	return res, d.wrap(ctx, err)
}

// updateSwapping applies one conditional update outside a transaction without locking: it
// reads the row, evaluates the condition on it, and writes with a compare-and-swap on the
// bytes read (UPDATE ... WHERE sha256(attrs) = theirs, or INSERT ... ON CONFLICT DO NOTHING for
// an absent row), two autocommit statements and one commit where the locked path takes a
// transaction of four. A swap that finds the row changed since the read evaluates again on
// the new state: each retry means another writer's update applied, so the loop makes
// progress. The update takes effect at the swap, on the state the read saw, which is still
// the row's; a condition that fails does at the read, whose snapshot is the row's state then.
func (d *Driver) updateSwapping(ctx context.Context, u store.BatchUpdate) (res store.UpdateResult, err error) {
	err = d.optimistically(ctx, u.Key, func(old []byte, cur store.Attrs, exists bool) (*statement, error) {
		var blob []byte
		var err error
		if res, blob, err = u.Evaluate(cur, exists, d.limits.MaxRowBytes); err != nil || !res.Applied {
			return nil, err
		}
		stmt := d.insert(u.Key, blob, true)
		if exists {
			stmt = d.swap(u.Key, old, blob)
		}
		return &stmt, nil
	})
	return res, err
}

// optimistically is the loop of updateSwapping and of a conditional Delete: read the row,
// let decide return the statement that makes the change to exactly the bytes read (nil: no
// change), run it, and start again if another writer changed the row in between.
func (d *Driver) optimistically(ctx context.Context, key store.Key, decide func(old []byte, cur store.Attrs, exists bool) (*statement, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		old, exists, err := d.getRaw(ctx, d.pool, key, "")
		if err != nil {
			return err
		}
		var cur store.Attrs
		if exists {
			if cur, err = store.DecodeAttrs(old); err != nil {
				return fmt.Errorf("row %s: %w", key, err)
			}
		}
		stmt, err := decide(old, cur, exists)
		if err != nil || stmt == nil {
			return err
		}
		tag, err := d.pool.Exec(ctx, stmt.sql, stmt.args...)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
	}
}

// UpdateBatch implements store.Batcher: every update in one transaction, one commit. A batch of
// creations (an instance's intent with its index entry, a flush of log entries) is first sent
// whole with its BEGIN and COMMIT (createAll); a row that exists aborts that, and the batch is
// decided update by update on the rows as they are.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) (out []store.UpdateResult, err error) {
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	if out, created, err := d.createAll(ctx, ups); err != nil || created {
		return out, err
	}
	err = d.transact(ctx, func(tx *pipelinedTx) (err error) {
		out, err = d.updateAll(ctx, tx, ups)
		return d.wrap(ctx, err)
	})
	return out, err
}

// createAll applies a batch of two or more updates that each create a row absent so far in one
// round trip: BEGIN, a plain INSERT per update (createFirst ones that apply on an absent row)
// and COMMIT in one pgx batch. created is false when the batch is not such (nothing was sent),
// or a row existed (its INSERT's unique violation aborted everything) or the transaction met
// a serialization failure: the caller then decides the batch on the rows as they are.
func (d *Driver) createAll(ctx context.Context, ups []store.BatchUpdate) (rs []store.UpdateResult, created bool, err error) {
	if len(ups) < 2 {
		return nil, false, nil
	}
	rs = make([]store.UpdateResult, len(ups))
	stmts := make([]statement, 0, len(ups)+1)
	keys := make(map[store.Key]bool, len(ups))
	for i, u := range ups {
		if keys[u.Key] || !createFirst(u.Cond) {
			return nil, false, nil
		}
		keys[u.Key] = true
		res, blob, err := u.Evaluate(nil, false, d.limits.MaxRowBytes)
		if err != nil || !res.Applied {
			return nil, false, nil
		}
		rs[i] = res
		stmts = append(stmts, d.insert(u.Key, blob, false))
	}
	err = d.attempt(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx *pipelinedTx) error {
		return tx.commitWith(ctx, stmts)
	})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return rs, true, nil
	case errors.As(err, &pgErr) && pgErr.Code == "23505", retryable(err), errors.Is(err, pgx.ErrTxCommitRollback):
		return nil, false, nil
	}
	return nil, false, d.wrap(ctx, err)
}

func (d *Driver) updateAll(ctx context.Context, q conn, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	out := make([]store.UpdateResult, len(ups))
	for i, u := range ups {
		r, err := d.update(ctx, q, u)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// update applies one conditional update inside a read-committed transaction: the row is
// locked while its condition is evaluated and the new state written.
func (d *Driver) update(ctx context.Context, q conn, u store.BatchUpdate) (store.UpdateResult, error) {
	if res, created, err := d.create(ctx, q, u); err != nil || created {
		return res, err
	}
	return d.updateLocked(ctx, q, u)
}

// updateLocked reads the row under its lock, evaluates, and writes.
func (d *Driver) updateLocked(ctx context.Context, q conn, u store.BatchUpdate) (store.UpdateResult, error) {
	for {
		cur, exists, err := d.get(ctx, q, u.Key, " FOR UPDATE")
		if err != nil {
			return store.UpdateResult{}, err
		}
		res, blob, err := u.Evaluate(cur, exists, d.limits.MaxRowBytes)
		if err != nil || !res.Applied {
			return res, err
		}
		if exists {
			_, err = q.Exec(ctx, `UPDATE `+d.table+` SET attrs = $3 WHERE pk = $1 AND sk = $2`, u.Key.Partition, u.Key.Sort, blob)
			return res, err
		}
		create := d.insert(u.Key, blob, true)
		tag, err := q.Exec(ctx, create.sql, create.args...)
		if err != nil || tag.RowsAffected() == 1 {
			return res, err
		}
		// Evaluated on "absent", but another transaction created the row and committed: under
		// read committed, the next statement sees it, so evaluate again.
	}
}

// create applies an update that expects to create its row (createFirst) with one INSERT ...
// ON CONFLICT DO NOTHING, the statement that proves the row absent and creates it; it does so
// only when the condition holds on an absent row. created is false when it did not apply (the
// row exists, or the condition or the update refuses an absent row): update then reads the row
// under its lock and evaluates as for any other update, so the result, the current row
// included, is the same as without this path.
func (d *Driver) create(ctx context.Context, q conn, u store.BatchUpdate) (res store.UpdateResult, created bool, err error) {
	if !createFirst(u.Cond) {
		return res, false, nil
	}
	res, blob, err := u.Evaluate(nil, false, d.limits.MaxRowBytes)
	if err != nil || !res.Applied {
		return store.UpdateResult{}, false, nil
	}
	insert := d.insert(u.Key, blob, true)
	tag, err := q.Exec(ctx, insert.sql, insert.args...)
	if err != nil || tag.RowsAffected() == 0 {
		return store.UpdateResult{}, false, err
	}
	return res, true, nil
}

// createFirst reports whether an update with condition c usually creates its row, so that trying
// the INSERT first saves the locked read (a statement) and costs one when the row exists: c holds
// only on an absent row (the runtime's log entries and intents), names the row's absence as one
// way to hold (an intent replacing a void), or always holds (the runtime's index entries and
// directory rows, which it writes when it makes them).
func createFirst(c store.Cond) bool {
	switch {
	case c.OnlyAbsent(), c.Op == store.OpTrue:
		return true
	case c.Op == store.OpOr:
		return slices.ContainsFunc(c.Args, store.Cond.OnlyAbsent)
	}
	return false
}

// Scan implements store.Driver.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	rows, err := d.scan(ctx, d.pool, partition, opts, nil)
	return rows, d.wrap(ctx, err)
}

// scan reads a partition; seen, if set, gets every row's attributes as stored.
func (d *Driver) scan(ctx context.Context, q conn, partition string, opts store.ScanOptions, seen func(store.Key, []byte)) ([]store.Row, error) {
	order := "ASC"
	if opts.Reverse {
		order = "DESC"
	}
	var limit any // NULL: no limit
	if opts.Limit > 0 {
		limit = opts.Limit
	}
	rs, err := q.Query(ctx, `SELECT sk, attrs FROM `+d.table+` WHERE pk = $1 ORDER BY sk COLLATE "C" `+order+` LIMIT $2`, partition, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := []store.Row{}
	for rs.Next() {
		var sk string
		var blob []byte
		if err := rs.Scan(&sk, &blob); err != nil {
			return nil, err
		}
		key := store.Key{Partition: partition, Sort: sk}
		if seen != nil {
			seen(key, blob)
		}
		a, err := store.DecodeProjected(blob, opts.Projection)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", key, err)
		}
		out = append(out, store.Row{Key: key, Attrs: a})
	}
	return out, rs.Err()
}

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (deleted bool, err error) {
	if cond.Op == store.OpTrue { // nothing to evaluate: one autocommit statement
		deleted, err = d.delete(ctx, d.pool, key, cond)
		return deleted, d.wrap(ctx, err)
	}
	// As updateSwapping: read, evaluate, and delete the row only if it is still the bytes read.
	err = d.optimistically(ctx, key, func(old []byte, cur store.Attrs, exists bool) (*statement, error) {
		if deleted = exists && cond.Eval(cur, true); !deleted {
			return nil, nil
		}
		sum := sha256.Sum256(old)
		return &statement{`DELETE FROM ` + d.table + ` WHERE pk = $1 AND sk = $2 AND sha256(attrs) = $3`, []any{key.Partition, key.Sort, sum[:]}}, nil
	})
	return deleted && err == nil, d.wrap(ctx, err)
}

func (d *Driver) delete(ctx context.Context, q conn, key store.Key, cond store.Cond) (bool, error) {
	if cond.Op == store.OpTrue {
		del := d.deleteRow(key)
		tag, err := q.Exec(ctx, del.sql, del.args...)
		return err == nil && tag.RowsAffected() > 0, err
	}
	cur, exists, err := d.get(ctx, q, key, " FOR UPDATE")
	if err != nil || !exists || !cond.Eval(cur, exists) {
		return false, err
	}
	del := d.deleteRow(key)
	_, err = q.Exec(ctx, del.sql, del.args...)
	return err == nil, err
}

// deleteRow is the unconditional deletion of key's row.
func (d *Driver) deleteRow(key store.Key) statement {
	return statement{`DELETE FROM ` + d.table + ` WHERE pk = $1 AND sk = $2`, []any{key.Partition, key.Sort}}
}

// Transact implements store.Transactor: fn's operations run in one read-committed
// transaction, each conditional update under a row lock held until the commit.
func (d *Driver) Transact(ctx context.Context, fn func(tx store.Driver) error) error {
	predicting := true
	for {
		err := d.transact(ctx, func(tx *pipelinedTx) error {
			t := newTxDriver(d, tx)
			t.predicting = predicting
			return fn(t)
		})
		if !errors.Is(err, errFinalRefused) {
			return err
		}
		predicting = false // an update sent ahead did not apply: decide them one by one
	}
}

// TransactSQL implements store.SQLTransactor: fn's rows and statements share one
// read-committed transaction (an application may raise it with SET TRANSACTION as its first
// statement), read-only when asked. A deadlock or serialization failure in any statement runs
// fn again, even if fn handled the error: PostgreSQL has aborted the transaction by then.
func (d *Driver) TransactSQL(ctx context.Context, readOnly bool, fn func(kv store.Driver, sql store.SQLConn) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	if readOnly {
		opts.AccessMode = pgx.ReadOnly
	}
	for {
		conflict := false
		err := d.attempt(ctx, opts, func(tx *pipelinedTx) error {
			return fn(newTxDriver(d, tx), sqlConn{d: d, tx: tx, conflict: &conflict})
		})
		if conflict || retryable(err) {
			continue
		}
		return err
	}
}

// sqlConn is an application's view of a TransactSQL transaction.
type sqlConn struct {
	d        *Driver
	tx       *pipelinedTx
	conflict *bool // a statement met a deadlock or serialization failure: the attempt must run again
}

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, c.sqlErr(ctx, err)
	}
	return tag.RowsAffected(), nil
}

func (c sqlConn) Query(ctx context.Context, query string, args ...any) (store.SQLRows, error) {
	rows, err := c.tx.Query(ctx, query, args...)
	if err != nil {
		return nil, c.sqlErr(ctx, err)
	}
	return sqlRows{c: c, ctx: ctx, rows: rows}, nil
}

// sqlErr maps a statement's failure: the server's refusals to *store.SQLError, the rest as the
// driver maps them (store.ErrUnavailable for the connection).
func (c sqlConn) sqlErr(ctx context.Context, err error) error {
	if retryable(err) {
		*c.conflict = true
	}
	err = c.d.wrap(ctx, err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !errors.Is(err, store.ErrUnavailable) {
		return &store.SQLError{Code: pgErr.Code, Message: pgErr.Message, Err: err}
	}
	return err
}

type sqlRows struct {
	c    sqlConn
	ctx  context.Context
	rows pgx.Rows
}

func (r sqlRows) Next() bool { return r.rows.Next() }

func (r sqlRows) Scan(dest ...any) error {
	if err := r.rows.Scan(dest...); err != nil {
		return r.c.sqlErr(r.ctx, err)
	}
	return nil
}

func (r sqlRows) Err() error {
	if err := r.rows.Err(); err != nil {
		return r.c.sqlErr(r.ctx, err)
	}
	return nil
}

func (r sqlRows) Close() error {
	r.rows.Close()
	return r.Err()
}

// retryable reports a deadlock or serialization failure, after which a transaction runs again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// transact runs body in a read-committed transaction (whatever the server's default, which
// the row-lock protocol relies on) and commits it, running it again after a deadlock or a
// serialization failure.
// body's own errors come back as they are (the operations of a txDriver map theirs).
func (d *Driver) transact(ctx context.Context, body func(*pipelinedTx) error) error {
	for {
		if err := d.attempt(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, body); !retryable(err) {
			return err
		}
	}
}

func (d *Driver) attempt(ctx context.Context, opts pgx.TxOptions, body func(*pipelinedTx) error) error {
	tx, err := d.beginPipelined(ctx, opts)
	if err != nil {
		return d.wrap(ctx, err)
	}
	defer tx.end(context.WithoutCancel(ctx))
	if err := body(tx); err != nil {
		return err
	}
	return d.wrap(ctx, tx.commit(ctx))
}

// txDriver is the Driver that Transact hands to its function. It keeps the rows its scans and
// gets returned as they were read: an update of one of them whose condition holds there is one
// compare-and-swap UPDATE (applied only if the row is still those bytes), instead of a
// SELECT ... FOR UPDATE and an UPDATE. The runtime's DAAL writes update the tail their scan
// found, so each saves a statement and a round trip.
type txDriver struct {
	d    *Driver
	tx   *pipelinedTx
	read map[store.Key][]byte
	// predicting lets the transaction send an update whose outcome it knows ahead: a swap with
	// its next request (update), UpdateBatchFinal's statements with the COMMIT. Each is made to
	// fail the transaction if it does not apply (errFinalRefused); the attempt after that one
	// decides every update as it goes.
	predicting bool
}

func newTxDriver(d *Driver, tx *pipelinedTx) txDriver {
	return txDriver{d: d, tx: tx, read: map[store.Key][]byte{}}
}

// update applies u, first as a compare-and-swap on the row as this transaction's scan read it.
// The swap applies only where the row's bytes are still those (the condition held on that
// state, which is then the current one), and its UPDATE locks the row to the end, as the
// locked path does; otherwise (the condition fails there, or the row changed) the locked path
// decides on the current row.
func (t txDriver) update(ctx context.Context, u store.BatchUpdate) (store.UpdateResult, error) {
	if old, ok := t.read[u.Key]; ok {
		delete(t.read, u.Key)
		if cur, err := store.DecodeAttrs(old); err == nil {
			if res, blob, err := u.Evaluate(cur, true, t.d.limits.MaxRowBytes); err == nil && res.Applied {
				if t.predicting {
					// Sent with the transaction's next request (or its COMMIT): no round trip
					// of its own. A row that changed fails the transaction, run again then.
					t.tx.later(t.d.mustSwap(u.Key, old, blob))
					t.read[u.Key] = blob
					return res, nil
				}
				swap := t.d.swap(u.Key, old, blob)
				tag, err := t.tx.Exec(ctx, swap.sql, swap.args...)
				if err != nil {
					return store.UpdateResult{}, err
				}
				if tag.RowsAffected() == 1 {
					t.read[u.Key] = blob // locked by this transaction now: it stays these bytes
					return res, nil
				}
			}
		}
	}
	return t.d.update(ctx, t.tx, u)
}

// Get reads a row and, as a scan does, keeps its bytes for a compare-and-swap update of it.
func (t txDriver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	blob, found, err := t.d.getRaw(ctx, t.tx, key, "")
	if err != nil || !found {
		return nil, false, t.d.wrap(ctx, err)
	}
	a, err := store.DecodeAttrs(blob)
	if err != nil {
		return nil, false, fmt.Errorf("row %s: %w", key, err)
	}
	t.read[key] = blob
	return a, true, nil
}

// Presume implements store.Presumer: the row's bytes are attrs' encoding (what an update that
// produced attrs stored), kept as if this transaction had read them, so that an update of the
// row is one compare-and-swap, which the server refuses if the row is other bytes. A row this
// transaction read or locked keeps what it knows.
func (t txDriver) Presume(key store.Key, attrs store.Attrs) bool {
	if _, ok := t.read[key]; !ok {
		t.read[key] = store.EncodeAttrs(attrs)
	}
	return true
}

func (t txDriver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	r, err := t.update(ctx, store.BatchUpdate{Key: key, Cond: cond, Update: upd})
	return r, t.d.wrap(ctx, err)
}

func (t txDriver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	rs, err := t.updateAll(ctx, ups)
	return rs, t.d.wrap(ctx, err)
}

// errFinalRefused ends an attempt in which the server refused an update sent ahead (a swap with
// a later request, a final batch): it did not apply as planned. The transaction is aborted;
// Transact runs the function again.
var errFinalRefused = errors.New("pgstore: an update the transaction sent ahead did not apply")

// UpdateBatchFinal implements store.FinalBatcher. When every update is one statement whose
// outcome the transaction already knows (a swap of a row its scan read, the condition holding
// there, or the creation of a row it did not read), they go in one round trip with the COMMIT:
// each INSERT without ON CONFLICT and each swap made to fail when it matches no row, so that
// the server aborts the transaction, and the COMMIT with it, unless every update applied as
// planned (errFinalRefused then runs the function again, without this path).
// Otherwise it is UpdateBatch.
func (t txDriver) UpdateBatchFinal(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, false, err
		}
	}
	rs := make([]store.UpdateResult, len(ups))
	stmts := make([]statement, 0, len(ups)+1)
	keys := make(map[store.Key]bool, len(ups))
	for i, u := range ups {
		p, ok := t.planOne(u)
		if keys[u.Key] || !ok {
			break
		}
		keys[u.Key] = true
		rs[i] = p.res
		if p.scanned {
			stmts = append(stmts, t.d.mustSwap(u.Key, p.old, p.blob))
		} else {
			stmts = append(stmts, t.d.insert(u.Key, p.blob, false))
		}
	}
	if !t.predicting || len(stmts) == 0 || len(stmts) != len(ups) {
		rs, err := t.updateAll(ctx, ups)
		return rs, false, t.d.wrap(ctx, err)
	}
	err := t.tx.commitWith(ctx, stmts)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, errFinalRefused) || errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "22012"): // a row was there; a swap matched none
		return nil, false, errFinalRefused
	case err != nil:
		return nil, false, t.d.wrap(ctx, err)
	}
	return rs, true, nil
}

// oneStatement is an update a transaction can send as one statement, decided on what it
// already knows: a swap of a row its scan read (old, the bytes read) where the condition holds
// on those bytes, or the creation of a row it did not read, tried first (createFirst).
type oneStatement struct {
	res     store.UpdateResult
	scanned bool
	old     []byte
	blob    []byte // the row's new bytes
}

// planOne plans u as one statement, if it can be.
func (t txDriver) planOne(u store.BatchUpdate) (oneStatement, bool) {
	old, scanned := t.read[u.Key]
	var cur store.Attrs
	switch {
	case scanned:
		var err error
		if cur, err = store.DecodeAttrs(old); err != nil {
			return oneStatement{}, false
		}
	case !createFirst(u.Cond):
		return oneStatement{}, false
	}
	res, blob, err := u.Evaluate(cur, scanned, t.d.limits.MaxRowBytes)
	if err != nil || !res.Applied {
		return oneStatement{}, false
	}
	return oneStatement{res: res, scanned: scanned, old: old, blob: blob}, true
}

// updateAll applies a batch in one round trip where it can: every update that may be one
// statement (a swap of a row this transaction's scan read, where the condition holds on what
// it read; a creation tried first, see createFirst) is sent in one pgx batch; the rest, and
// those whose statement found the row otherwise, follow one by one as update decides them.
// Each update is decided on its own row's state, so with distinct rows the result is the
// batch's in order; a batch naming a row twice runs in order.
func (t txDriver) updateAll(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	rs := make([]store.UpdateResult, len(ups))
	type planned struct {
		at int
		oneStatement
	}
	var plan []planned
	var stmts []statement
	keys := make(map[store.Key]bool, len(ups))
	for i, u := range ups {
		if keys[u.Key] {
			plan = nil
			break
		}
		keys[u.Key] = true
		p, ok := t.planOne(u)
		if !ok {
			continue
		}
		plan = append(plan, planned{at: i, oneStatement: p})
		if p.scanned {
			stmts = append(stmts, t.d.swap(u.Key, p.old, p.blob))
		} else {
			stmts = append(stmts, t.d.insert(u.Key, p.blob, true))
		}
	}
	if len(plan) < 2 {
		for i, u := range ups {
			r, err := t.update(ctx, u)
			if err != nil {
				return nil, err
			}
			rs[i] = r
		}
		return rs, nil
	}
	tags, err := t.tx.execAll(ctx, stmts)
	if err != nil {
		return nil, err
	}
	decided := make([]bool, len(ups))
	tried := make([]bool, len(ups))
	for j, p := range plan {
		tried[p.at] = true
		if tags[j].RowsAffected() != 1 {
			continue
		}
		rs[p.at], decided[p.at] = p.res, true
		if p.scanned {
			t.read[ups[p.at].Key] = p.blob // locked by this transaction now: it stays these bytes
		}
	}
	for i, u := range ups {
		var err error
		switch _, scanned := t.read[u.Key]; {
		case decided[i]:
			continue
		case tried[i] && scanned: // the row changed since the scan: decide on its current state
			delete(t.read, u.Key)
			rs[i], err = t.d.update(ctx, t.tx, u)
		case tried[i]: // the creation found the row
			rs[i], err = t.d.updateLocked(ctx, t.tx, u)
		default:
			rs[i], err = t.update(ctx, u)
		}
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}

func (t txDriver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	rows, err := t.d.scan(ctx, t.tx, partition, opts, func(key store.Key, blob []byte) { t.read[key] = blob })
	return rows, t.d.wrap(ctx, err)
}

// DeleteBlind implements store.BlindDeleter: the DELETE goes with the transaction's next request.
func (t txDriver) DeleteBlind(ctx context.Context, key store.Key) error {
	delete(t.read, key)
	t.tx.later(t.d.deleteRow(key))
	return nil
}

func (t txDriver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	delete(t.read, key)
	ok, err := t.d.delete(ctx, t.tx, key, cond)
	return ok, t.d.wrap(ctx, err)
}

func (t txDriver) Limits() store.Limits { return t.d.limits }

// Close does nothing: the transaction ends when Transact's function returns.
func (t txDriver) Close() error { return nil }

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return d.limits }

// Drop implements store.Dropper.
func (d *Driver) Drop(ctx context.Context) error {
	_, err := d.pool.Exec(ctx, `DROP TABLE IF EXISTS `+d.table)
	return d.wrap(ctx, err)
}

// Close implements store.Driver; the shared pool closes with its last driver.
func (d *Driver) Close() error {
	d.closed.Do(func() { releasePool(d.conn) })
	return nil
}
