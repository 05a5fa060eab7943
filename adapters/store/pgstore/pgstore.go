// Package pgstore is the PostgreSQL store driver (pgx).
//
// URL: postgres://user:password@host:port/database?table=NAME&max_row_bytes=N (also
// postgresql://). The table is created if missing: (pk text, sk text, attrs bytea, primary key
// (pk, sk)). A conditional update runs in one transaction that locks the row (SELECT ... FOR
// UPDATE), evaluates the condition with the portable evaluator, and writes; creating a row that
// does not exist yet uses INSERT ... ON CONFLICT DO NOTHING and starts over if another writer
// created it first. Batches (store.Batcher) run in one transaction, one commit.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	DefaultMaxRowBytes = 400 * 1024
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
	limit := DefaultMaxRowBytes
	if s := u.Query.Get("max_row_bytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 256 {
			return nil, fmt.Errorf("%w: max_row_bytes=%q must be an integer >= 256", store.ErrInvalid, s)
		}
		limit = n
	}
	// Everything else in the query (sslmode, pool settings, ...) is pgx's to interpret.
	conn := u.WithoutParams("table", "max_row_bytes")
	pool, err := acquirePool(ctx, conn)
	if err != nil {
		return nil, err
	}
	d := &Driver{pool: pool, conn: conn, table: table, limits: store.Limits{MaxRowBytes: limit}}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (pk text NOT NULL, sk text NOT NULL, attrs bytea NOT NULL, PRIMARY KEY (pk, sk))`); err != nil {
		d.Close()
		return nil, d.wrap(ctx, err)
	}
	return d, nil
}

// wrap maps connection failures onto store.ErrUnavailable.
func (d *Driver) wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) {
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

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	a, found, err := d.get(ctx, d.pool, key, "")
	return a, found, d.wrap(ctx, err)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (d *Driver) get(ctx context.Context, q querier, key store.Key, lock string) (store.Attrs, bool, error) {
	var blob []byte
	err := q.QueryRow(ctx, `SELECT attrs FROM `+d.table+` WHERE pk = $1 AND sk = $2`+lock, key.Partition, key.Sort).Scan(&blob)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	a, err := store.DecodeAttrs(blob)
	if err != nil {
		return nil, false, fmt.Errorf("row %s: %w", key, err)
	}
	return a, true, nil
}

// Update implements store.Driver.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	rs, err := d.UpdateBatch(ctx, []store.BatchUpdate{{Key: key, Cond: cond, Update: upd}})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

// errRaced: a row this transaction found absent was created concurrently; start over.
var errRaced = errors.New("row created concurrently")

// UpdateBatch implements store.Batcher: every update in one transaction, one commit.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	for {
		rs, err := d.inTx(ctx, ups)
		if errors.Is(err, errRaced) {
			continue
		}
		return rs, d.wrap(ctx, err)
	}
}

func (d *Driver) inTx(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	out := make([]store.UpdateResult, len(ups))
	for i, u := range ups {
		cur, exists, err := d.get(ctx, tx, u.Key, " FOR UPDATE")
		if err != nil {
			return nil, err
		}
		res, blob, err := u.Evaluate(cur, exists, d.limits.MaxRowBytes)
		if err != nil {
			return nil, err
		}
		out[i] = res
		if !res.Applied {
			continue
		}
		if exists {
			_, err = tx.Exec(ctx, `UPDATE `+d.table+` SET attrs = $3 WHERE pk = $1 AND sk = $2`, u.Key.Partition, u.Key.Sort, blob)
		} else {
			var tag pgconn.CommandTag
			tag, err = tx.Exec(ctx, `INSERT INTO `+d.table+` (pk, sk, attrs) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, u.Key.Partition, u.Key.Sort, blob)
			if err == nil && tag.RowsAffected() == 0 {
				return nil, errRaced // evaluated on "absent", but it exists now
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return out, tx.Commit(ctx)
}

// Scan implements store.Driver.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	order := "ASC"
	if opts.Reverse {
		order = "DESC"
	}
	var limit any // NULL: no limit
	if opts.Limit > 0 {
		limit = opts.Limit
	}
	rs, err := d.pool.Query(ctx, `SELECT sk, attrs FROM `+d.table+` WHERE pk = $1 ORDER BY sk COLLATE "C" `+order+` LIMIT $2`, partition, limit)
	if err != nil {
		return nil, d.wrap(ctx, err)
	}
	defer rs.Close()
	out := []store.Row{}
	for rs.Next() {
		var sk string
		var blob []byte
		if err := rs.Scan(&sk, &blob); err != nil {
			return nil, d.wrap(ctx, err)
		}
		key := store.Key{Partition: partition, Sort: sk}
		a, err := store.DecodeProjected(blob, opts.Projection)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", key, err)
		}
		out = append(out, store.Row{Key: key, Attrs: a})
	}
	return out, d.wrap(ctx, rs.Err())
}

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return false, d.wrap(ctx, err)
	}
	defer tx.Rollback(ctx)
	cur, exists, err := d.get(ctx, tx, key, " FOR UPDATE")
	if err != nil {
		return false, d.wrap(ctx, err)
	}
	if !exists || !cond.Eval(cur, exists) {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+d.table+` WHERE pk = $1 AND sk = $2`, key.Partition, key.Sort); err != nil {
		return false, d.wrap(ctx, err)
	}
	return true, d.wrap(ctx, tx.Commit(ctx))
}

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
