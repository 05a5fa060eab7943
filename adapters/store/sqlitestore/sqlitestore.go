// Package sqlitestore is the embedded store driver: one table in a SQLite database file, via the
// pure-Go modernc.org/sqlite (no cgo).
//
// URL: sqlite:///absolute/path/to/file.db?table=NAME&max_row_bytes=N. The file and table are
// created if missing; the directory must already exist. table defaults to "ssfkit" and
// max_row_bytes to 409600 (DynamoDB's item limit, so oversize bugs surface locally).
//
// Every Driver on one file within a process shares a single connection, so the process's
// operations serialise without lock contention. Separate processes may open the same file:
// WAL mode lets readers proceed alongside a writer, writers wait for each other up to a busy
// timeout, and conditional writes run in BEGIN IMMEDIATE transactions, which take the write
// lock before reading so a read-check-write cannot be interleaved. New files get 16 KB pages
// (PRAGMA page_size), so that rows of a few kilobytes, such as DAAL rows with their write logs,
// stay in their b-tree page; files made before keep theirs.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("sqlite", open) }

const (
	// DefaultTable is the SQL table used when the URL names none.
	DefaultTable = "ssfkit"
	// DefaultMaxRowBytes matches DynamoDB's 400 KB item limit.
	DefaultMaxRowBytes = store.PortableMaxRowBytes
	// busyTimeout is how long a writer waits for another process's write transaction.
	busyTimeout = 10 * time.Second
)

// Driver is a store.Driver over one table of a SQLite file.
type Driver struct {
	conn   *sharedConn
	table  string
	limits store.Limits
	closed atomic.Bool

	get, scan, scanDesc, put, del, swap *sql.Stmt

	presumedMu sync.Mutex
	presumed   map[store.Key]presumedRow // store.Presumer
}

// presumedRow is a row as a caller presumed it (Presume), and its bytes.
type presumedRow struct {
	attrs store.Attrs
	blob  []byte
}

// maxPresumed bounds the presumptions kept; an update normally takes its own at once, and a
// presumption is only ever a hint, so past this they are all dropped.
const maxPresumed = 256

// sharedConn is the process's single connection to one database file.
type sharedConn struct {
	path string
	db   *sql.DB
	refs int // Drivers using it; guarded by connsMu
}

var (
	connsMu sync.Mutex
	conns   = map[string]*sharedConn{}
)

const urlForm = "sqlite:///absolute/path/to/file.db"

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	if err := u.CheckParams("table", "max_row_bytes"); err != nil {
		return nil, err
	}
	switch {
	case u.Host == "." || u.Host == "..":
		return nil, fmt.Errorf("%w: relative paths are not supported; write an absolute path as %s", store.ErrInvalid, urlForm)
	case u.Host != "":
		return nil, fmt.Errorf("%w: sqlite URL has host %q; write the path after three slashes, as %s", store.ErrInvalid, u.Host, urlForm)
	case u.Path == "":
		return nil, fmt.Errorf("%w: sqlite URL names no file; want %s", store.ErrInvalid, urlForm)
	}
	table := DefaultTable
	if u.Query.Has("table") {
		table = u.Query.Get("table")
	}
	limit, err := store.MaxRowBytes(u, DefaultMaxRowBytes)
	if err != nil {
		return nil, err
	}
	return newDriver(ctx, u.Path, table, limit)
}

// New opens (creating if needed) table in the SQLite file at the absolute path, rejecting rows
// whose encoded size exceeds maxRowBytes.
func New(path, table string, maxRowBytes int) (*Driver, error) {
	if maxRowBytes < store.MinRowBytes {
		return nil, fmt.Errorf("%w: sqlite: maxRowBytes %d must be at least %d", store.ErrInvalid, maxRowBytes, store.MinRowBytes)
	}
	return newDriver(context.Background(), path, table, maxRowBytes)
}

func newDriver(ctx context.Context, path, table string, maxRowBytes int) (*Driver, error) {
	if !store.ValidIdentifier(table) {
		return nil, fmt.Errorf("%w: sqlite: table name %q must be letters, digits and underscores, starting with a letter or underscore, at most 63 characters", store.ErrInvalid, table)
	}
	path, err := checkPath(path)
	if err != nil {
		return nil, err
	}
	c, err := acquire(ctx, path)
	if err != nil {
		return nil, err
	}
	d := &Driver{conn: c, table: table, limits: store.Limits{MaxRowBytes: maxRowBytes}}
	if err := d.init(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("sqlite: table %s in %s: %w", table, path, err)
	}
	return d, nil
}

// checkPath validates and cleans the database path. It does not create directories: a missing
// directory is usually a typo or an unmounted volume, and a fresh empty database there would
// hide it.
func checkPath(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%w: sqlite: database path %q is not absolute; want %s", store.ErrInvalid, path, urlForm)
	}
	if strings.HasSuffix(path, "/") {
		return "", fmt.Errorf("%w: sqlite: database path %q names a directory, not a file", store.ErrInvalid, path)
	}
	path = filepath.Clean(path)
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("sqlite: directory %s for database %s does not exist; create it first: %w", dir, filepath.Base(path), fs.ErrNotExist)
	case err != nil:
		return "", fmt.Errorf("sqlite: directory %s: %w: %w", dir, store.ErrUnavailable, err)
	case !fi.IsDir():
		return "", fmt.Errorf("%w: sqlite: %s is not a directory", store.ErrInvalid, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "", fmt.Errorf("%w: sqlite: database path %s is a directory, not a file", store.ErrInvalid, path)
	}
	return path, nil
}

// acquire returns the process's connection to path, opening it on first use.
func acquire(ctx context.Context, path string) (*sharedConn, error) {
	connsMu.Lock()
	defer connsMu.Unlock()
	if c := conns[path]; c != nil {
		c.refs++
		return c, nil
	}
	// The file: URI form keeps '?', '#' and '%' in the path from being read as syntax.
	dsn := (&url.URL{Scheme: "file", Path: path}).String() + "?" + url.Values{
		"_txlock":       {"immediate"},
		"_busy_timeout": {strconv.FormatInt(busyTimeout.Milliseconds(), 10)},
		// A new file gets 16 KB pages: a row larger than about a quarter of a page (a DAAL row
		// with a full write log, ~2 KB) spills to an overflow page in a WITHOUT ROWID table,
		// which every scan of its partition then reads too. A file that exists keeps its own.
		"_pragma":       {"page_size(16384)"},
		"_journal_mode": {"WAL"},
		// In WAL mode a NORMAL commit survives a process crash; an OS crash or power loss can
		// lose the latest commits but never corrupts the file.
		"_synchronous": {"NORMAL"},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// One connection per process and file: the process's operations queue in database/sql
	// instead of contending for SQLite's file locks.
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapErr(ctx, err))
	}
	c := &sharedConn{path: path, db: db, refs: 1}
	conns[path] = c
	return c, nil
}

func (c *sharedConn) release() error {
	connsMu.Lock()
	defer connsMu.Unlock()
	if c.refs--; c.refs > 0 {
		return nil
	}
	delete(conns, c.path)
	return c.db.Close()
}

func (d *Driver) init(ctx context.Context) error {
	t := `"` + d.table + `"` // quoted so names like "order" work; ValidIdentifier excludes quotes
	if _, err := d.conn.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+t+
		` (pk TEXT NOT NULL, sk TEXT NOT NULL, attrs BLOB NOT NULL, PRIMARY KEY (pk, sk)) WITHOUT ROWID`); err != nil {
		return mapErr(ctx, err)
	}
	for _, s := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&d.get, `SELECT attrs FROM ` + t + ` WHERE pk = ? AND sk = ?`},
		// LIMIT -1 means no limit in SQLite, so one statement per direction serves every Limit.
		{&d.scan, `SELECT sk, attrs FROM ` + t + ` WHERE pk = ? ORDER BY sk LIMIT ?`},
		{&d.scanDesc, `SELECT sk, attrs FROM ` + t + ` WHERE pk = ? ORDER BY sk DESC LIMIT ?`},
		{&d.put, `INSERT INTO ` + t + ` (pk, sk, attrs) VALUES (?, ?, ?) ON CONFLICT (pk, sk) DO UPDATE SET attrs = excluded.attrs`},
		{&d.del, `DELETE FROM ` + t + ` WHERE pk = ? AND sk = ?`},
		{&d.swap, `UPDATE ` + t + ` SET attrs = ? WHERE pk = ? AND sk = ? AND attrs = ?`},
	} {
		stmt, err := d.conn.db.PrepareContext(ctx, s.sql)
		if err != nil {
			return fmt.Errorf("%w (an existing table of this name needs columns pk, sk, attrs)", mapErr(ctx, err))
		}
		*s.stmt = stmt
	}
	return nil
}

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	return d.GetProjected(ctx, key, nil)
}

// GetProjected implements store.ProjectedGetter: only the projected attributes are decoded.
func (d *Driver) GetProjected(ctx context.Context, key store.Key, proj []store.Path) (store.Attrs, bool, error) {
	if d.closed.Load() {
		return nil, false, store.ErrClosed
	}
	a, found, err := d.readProjected(ctx, d.get, key, proj)
	return a, found, d.wrap(ctx, err)
}

func (d *Driver) read(ctx context.Context, get *sql.Stmt, key store.Key) (store.Attrs, bool, error) {
	return d.readProjected(ctx, get, key, nil)
}

// readProjected reads key's row with get, decoding the attributes proj names (all if nil).
func (d *Driver) readProjected(ctx context.Context, get *sql.Stmt, key store.Key, proj []store.Path) (store.Attrs, bool, error) {
	var blob []byte
	switch err := get.QueryRowContext(ctx, key.Partition, key.Sort).Scan(&blob); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	a, err := store.DecodeProjected(blob, proj)
	if err != nil {
		return nil, false, fmt.Errorf("row %s: %w", key, err)
	}
	return a, true, nil
}

// Update implements store.Driver.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	if d.closed.Load() {
		return store.UpdateResult{}, store.ErrClosed
	}
	// Validate here too: encoding an unvalidated value would panic mid-transaction.
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	r, err := d.update(ctx, key, cond, upd)
	return r, d.wrap(ctx, err)
}

func (d *Driver) update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	u := store.BatchUpdate{Key: key, Cond: cond, Update: upd}
	if p, ok := d.takePresumed(key); ok {
		if r, swapped, err := d.swapPresumed(ctx, d.swap, u, p); err != nil || swapped {
			return r, err
		}
	}
	rs, err := d.inTx(ctx, []store.BatchUpdate{u})
	if err != nil {
		return store.UpdateResult{}, err
	}
	return rs[0], nil
}

// Presume implements store.Presumer: the caller believes key's row holds exactly attrs (an
// update's result said so), and the next update of key tries them first: the update is decided
// on attrs and sent as one compare-and-swap statement on their bytes, with no transaction of its
// own around a read. Where the row is other bytes (or the update does not apply on attrs) it is
// decided on the row as it is, in a transaction, as without the presumption. Whichever update of
// key comes next takes the presumption, which is right for any of them: the swap applies only
// on the very row the update was decided on. The caller must not change attrs afterwards.
func (d *Driver) Presume(key store.Key, attrs store.Attrs) bool {
	blob := store.EncodeAttrs(attrs)
	d.presumedMu.Lock()
	defer d.presumedMu.Unlock()
	if d.presumed == nil || len(d.presumed) >= maxPresumed {
		d.presumed = make(map[store.Key]presumedRow)
	}
	d.presumed[key] = presumedRow{attrs: attrs, blob: blob}
	return true
}

func (d *Driver) takePresumed(key store.Key) (presumedRow, bool) {
	d.presumedMu.Lock()
	defer d.presumedMu.Unlock()
	p, ok := d.presumed[key]
	delete(d.presumed, key)
	return p, ok
}

// swapPresumed applies u as a compare-and-swap (the statement swap, on its own or in a
// transaction) of the presumed row p, and reports whether it did; false (with no error) when u
// does not apply on p or the row is no longer p.
func (d *Driver) swapPresumed(ctx context.Context, swap *sql.Stmt, u store.BatchUpdate, p presumedRow) (store.UpdateResult, bool, error) {
	res, blob, err := u.Evaluate(p.attrs, true, d.limits.MaxRowBytes)
	if err != nil || !res.Applied {
		return store.UpdateResult{}, false, nil // decided on the row as it is instead
	}
	r, err := swap.ExecContext(ctx, blob, u.Key.Partition, u.Key.Sort, p.blob)
	if err != nil {
		return store.UpdateResult{}, false, err
	}
	n, err := r.RowsAffected()
	return res, err == nil && n == 1, err
}

// UpdateBatch implements store.Batcher: every update in one transaction, so one commit.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	rs, err := d.inTx(ctx, ups)
	return rs, d.wrap(ctx, err)
}

// UpdateBatchAtomic implements store.AtomicBatcher: the batch's transaction commits only if
// every update applied, and rolls back otherwise.
func (d *Driver) UpdateBatchAtomic(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	if d.closed.Load() {
		return nil, false, store.ErrClosed
	}
	for _, u := range ups {
		if err := u.Update.Validate(); err != nil {
			return nil, false, err
		}
	}
	tx, err := d.conn.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE, via _txlock
	if err != nil {
		return nil, false, d.wrap(ctx, err)
	}
	defer tx.Rollback()
	rs, err := d.applyAll(ctx, tx, ups)
	if err != nil {
		return nil, false, d.wrap(ctx, err)
	}
	for _, r := range rs {
		if !r.Applied {
			return nil, false, nil // rolled back
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, false, d.wrap(ctx, err)
	}
	return rs, true, nil
}

// inTx applies each conditional update in turn within one BEGIN IMMEDIATE transaction, which
// holds the write lock from the first read, so no other writer interleaves.
func (d *Driver) inTx(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	tx, err := d.conn.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE, via _txlock
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	out, err := d.applyAll(ctx, tx, ups)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return out, nil
}

// applyAll evaluates and applies each conditional update in turn inside tx. An update of a
// presumed row (Presume) is first tried as one compare-and-swap statement, as on its own: the
// transaction holds the write lock, so the row it swaps is the row the update was decided on.
func (d *Driver) applyAll(ctx context.Context, tx *sql.Tx, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	get, put := tx.StmtContext(ctx, d.get), tx.StmtContext(ctx, d.put)
	var swap *sql.Stmt
	out := make([]store.UpdateResult, len(ups))
	for i, u := range ups {
		if p, ok := d.takePresumed(u.Key); ok {
			if swap == nil {
				swap = tx.StmtContext(ctx, d.swap)
			}
			r, swapped, err := d.swapPresumed(ctx, swap, u, p)
			if err != nil {
				return nil, err
			}
			if swapped {
				out[i] = r
				continue
			}
		}
		cur, exists, err := d.read(ctx, get, u.Key)
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
		if _, err := put.ExecContext(ctx, u.Key.Partition, u.Key.Sort, blob); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Scan implements store.Driver.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	rows, err := d.scanRows(ctx, nil, partition, opts)
	return rows, d.wrap(ctx, err)
}

// scanRows scans a partition, inside tx when it is not nil.
func (d *Driver) scanRows(ctx context.Context, tx *sql.Tx, partition string, opts store.ScanOptions) ([]store.Row, error) {
	stmt, limit := d.scan, opts.Limit
	if opts.Reverse {
		stmt = d.scanDesc
	}
	if tx != nil {
		stmt = tx.StmtContext(ctx, stmt)
	}
	if limit <= 0 {
		limit = -1
	}
	rs, err := stmt.QueryContext(ctx, partition, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := []store.Row{}
	for rs.Next() {
		var sk string
		var blob sql.RawBytes // decoding copies, so the driver's buffer can be borrowed
		if err := rs.Scan(&sk, &blob); err != nil {
			return nil, err
		}
		key := store.Key{Partition: partition, Sort: sk}
		a, err := store.DecodeProjected(blob, opts.Projection)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", key, err)
		}
		out = append(out, store.Row{Key: key, Attrs: a})
	}
	return out, rs.Err()
}

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	if d.closed.Load() {
		return false, store.ErrClosed
	}
	deleted, err := d.delete(ctx, key, cond)
	return deleted, d.wrap(ctx, err)
}

func (d *Driver) delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	if cond.Op == store.OpTrue {
		// Nothing to evaluate, so one statement is atomic on its own.
		res, err := d.del.ExecContext(ctx, key.Partition, key.Sort)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
	tx, err := d.conn.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if deleted, err := d.deleteIn(ctx, tx, key, cond); err != nil || !deleted {
		return false, err
	}
	return true, tx.Commit()
}

// deleteIn deletes the row inside tx if cond holds.
func (d *Driver) deleteIn(ctx context.Context, tx *sql.Tx, key store.Key, cond store.Cond) (bool, error) {
	cur, exists, err := d.read(ctx, tx.StmtContext(ctx, d.get), key)
	if err != nil || !exists || !cond.Eval(cur, exists) {
		return false, err
	}
	if _, err := tx.StmtContext(ctx, d.del).ExecContext(ctx, key.Partition, key.Sort); err != nil {
		return false, err
	}
	return true, nil
}

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return d.limits }

// Drop implements store.Dropper.
func (d *Driver) Drop(ctx context.Context) error {
	_, err := d.conn.db.ExecContext(ctx, `DROP TABLE IF EXISTS "`+d.table+`"`) // quoted, as in init
	return d.wrap(ctx, err)
}

// Close implements store.Driver. The file stays open while other Drivers in the process use it.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, s := range []*sql.Stmt{d.get, d.scan, d.scanDesc, d.put, d.del, d.swap} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	errs = append(errs, d.conn.release())
	return errors.Join(errs...)
}

func (d *Driver) wrap(ctx context.Context, err error) error {
	if err != nil && d.closed.Load() {
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return mapErr(ctx, err)
}

// mapErr maps SQLite's transient and I/O failures onto store.ErrUnavailable and its size limit
// onto store.ErrTooLarge, keeping the original error in the chain.
func mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %w", ctxErr, err) // SQLite reports a cancelled call as "interrupted"
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case sqlite3.SQLITE_TOOBIG:
		return fmt.Errorf("%w: %w", store.ErrTooLarge, err)
	}
	return err
}
