// Package store is ssfkit's portable view of a strongly consistent key-value table.
//
// Beldi needs exactly four things of a store, and the Driver interface is exactly that small:
// a strongly consistent read of one row, an atomic conditional update of one row (the
// atomicity scope), a scan of one partition with projection, and a conditional delete.
// Conditions and updates are portable ASTs (Cond, Update). A driver either pushes them down
// natively (DynamoDB condition expressions, SQL WHERE) or evaluates them itself with Eval and
// Apply under a compare-and-swap on a version or ETag.
//
// Drivers register a URL scheme with Register; applications open tables with Open, so moving an
// application between backends is a configuration change.
//
// Imports (docs/architecture.md): no package of this module but internal/driverurl; drivers
// (adapters/store/*) import only this one.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/ssfkit/ssfkit/internal/driverurl"
)

// Key identifies one row: rows sharing a Partition can be scanned together, ordered by Sort.
type Key struct {
	Partition string
	Sort      string
}

func (k Key) String() string { return fmt.Sprintf("(%q, %q)", k.Partition, k.Sort) }

// Attrs are a row's attributes. Values are int64, string, []byte, bool, or a one-level
// map[string]any of those scalars; ValidateAttrs enforces this so every backend can store them.
type Attrs map[string]any

// Row is a row returned by Scan.
type Row struct {
	Key   Key
	Attrs Attrs
}

// ScanOptions shape a partition scan.
type ScanOptions struct {
	// Projection limits the returned attributes; nil returns all of them. A path naming a map
	// entry (Attr("m").Entry("k")) returns the map with only that entry, if present.
	Projection []Path
	// Reverse returns rows in descending sort-key order.
	Reverse bool
	// Limit, when positive, returns at most that many rows (the first in the scan's order).
	// Reverse with Limit 1 reads the last row of a partition in one request.
	Limit int
}

// UpdateResult reports a conditional update's outcome.
type UpdateResult struct {
	// Applied is true when the condition held and the update took effect.
	Applied bool
	// Attrs is the row after the update when Applied, or the row as it was when the condition
	// failed (nil if the row did not exist). Drivers that cannot return it atomically re-read.
	Attrs Attrs
}

// Limits are a driver's size limits; the runtime checks values against them before writing.
type Limits struct {
	// MaxRowBytes is the largest encoded row (keys plus attributes) the backend accepts.
	MaxRowBytes int
}

// Driver is the interface a backend implements. All methods must be safe for concurrent use and
// strongly consistent: a call observes every call that completed before it started.
type Driver interface {
	// Get returns the row's attributes, or found=false if the row does not exist.
	Get(ctx context.Context, key Key) (attrs Attrs, found bool, err error)
	// Update atomically applies upd if cond holds on the row's current state, creating the row if
	// it does not exist (a missing row is evaluated as having no attributes).
	Update(ctx context.Context, key Key, cond Cond, upd Update) (UpdateResult, error)
	// Scan returns the rows of one partition ordered by sort key (ascending, or descending with
	// Reverse), at most Limit of them when Limit > 0. Each row is read atomically; the scan as a
	// whole is not a snapshot.
	Scan(ctx context.Context, partition string, opts ScanOptions) ([]Row, error)
	// Delete removes the row if cond holds; deleting a missing row whose condition holds is not
	// an error. It reports whether a row was removed.
	Delete(ctx context.Context, key Key, cond Cond) (deleted bool, err error)
	// Limits reports the backend's size limits.
	Limits() Limits
	// Close releases the driver's resources.
	Close() error
}

// BatchUpdate is one conditional update in a batch.
type BatchUpdate struct {
	Key    Key
	Cond   Cond
	Update Update
}

// Batcher is an optional Driver interface for backends that can apply several conditional
// updates in one request (a SQL transaction, DynamoDB TransactWriteItems). Each update must
// behave exactly as Update would: its condition evaluated on its row's current state and its
// result returned in order. Callers must not rely on the batch being all-or-nothing.
type Batcher interface {
	UpdateBatch(ctx context.Context, ups []BatchUpdate) ([]UpdateResult, error)
}

// AtomicBatcher is an optional Driver interface for backends that can apply a batch all or
// nothing in one request (SQLite: one transaction; mem). UpdateBatchAtomic applies ups in order,
// each evaluated on its row as the updates before it left it, only if every update's condition
// holds; then applied is true and rs are the results, as UpdateBatch's. If any condition does
// not hold, it changes nothing and returns applied false and no results.
type AtomicBatcher interface {
	UpdateBatchAtomic(ctx context.Context, ups []BatchUpdate) (rs []UpdateResult, applied bool, err error)
}

// Transactor is an optional Driver interface for backends with multi-row transactions
// (PostgreSQL). Transact runs fn with a Driver whose operations all belong to one transaction,
// committed when fn returns nil and rolled back when it returns an error (which Transact
// returns). Operations inside keep their single-row semantics — each conditional update is
// evaluated on its row's current state, under a row lock held to the end — and the transaction
// adds all-or-nothing and one commit for all of them. fn may run again after a deadlock or
// serialization failure, so it must have no effects outside tx.
type Transactor interface {
	Transact(ctx context.Context, fn func(tx Driver) error) error
}

// FinalBatcher is an optional interface of the Driver a Transactor hands its function
// (PostgreSQL): UpdateBatchFinal applies ups as the transaction's last operations and may commit
// the transaction in the same round trip when every update applies, which committed reports; the
// caller promises to make no other operation in the transaction when every update applies. When
// the driver cannot tell in advance that they all apply, it applies them as UpdateBatch does
// (committed false), or it ends the attempt with an error that makes Transact run the function
// again, in an attempt where UpdateBatchFinal never commits.
type FinalBatcher interface {
	UpdateBatchFinal(ctx context.Context, ups []BatchUpdate) (rs []UpdateResult, committed bool, err error)
}

// BlindDeleter is an optional interface of the Driver a Transactor hands its function
// (PostgreSQL): DeleteBlind deletes key's row, if there is one, as part of the transaction,
// without telling whether there was one, so that the store may send it with the
// transaction's next request (or its COMMIT) instead of in a round trip of its own.
type BlindDeleter interface {
	DeleteBlind(ctx context.Context, key Key) error
}

// ProjectedGetter is an optional Driver interface for backends that can return only some of a
// row's attributes from a get, as a scan's Projection does, for less than the whole row costs.
type ProjectedGetter interface {
	GetProjected(ctx context.Context, key Key, proj []Path) (Attrs, bool, error)
}

// GetProjected gets key's row projected to proj (see ScanOptions.Projection), with d's
// ProjectedGetter if it has one, else with a get of the whole row, projected here.
func GetProjected(ctx context.Context, d Driver, key Key, proj []Path) (Attrs, bool, error) {
	if g, ok := d.(ProjectedGetter); ok {
		return g.GetProjected(ctx, key, proj)
	}
	a, found, err := d.Get(ctx, key)
	if err != nil || !found {
		return nil, found, err
	}
	return a.Project(proj), true, nil
}

// Presumer is an optional interface of the Driver a Transactor hands its function
// (PostgreSQL), or of a Driver itself (SQLite): Presume tells the driver that key's row holds
// exactly attrs (the caller wrote them, in an update whose result said so), so that it may plan
// the next update of the row (in a transaction: the transaction's updates of it) on them
// without reading it first. An update planned so applies only if the row still holds those
// bytes; where it does not, the driver decides the update on the row's current state, as if
// nothing had been presumed (it may run the function again to do so). A presumption is only
// ever a hint: whichever update of the key takes it is decided right. Presume reports whether
// the driver took the presumption; the caller must not change attrs afterwards.
type Presumer interface {
	Presume(key Key, attrs Attrs) bool
}

// Presume presumes key's row holds attrs with d's Presumer, if it has one; false otherwise (the
// caller reads the row instead).
func Presume(d Driver, key Key, attrs Attrs) bool {
	p, ok := d.(Presumer)
	return ok && p.Presume(key, attrs)
}

// DeleteBlind deletes key's row with d's BlindDeleter if it has one, else with an unconditional
// Delete.
func DeleteBlind(ctx context.Context, d Driver, key Key) error {
	if b, ok := d.(BlindDeleter); ok {
		return b.DeleteBlind(ctx, key)
	}
	_, err := d.Delete(ctx, key, Always())
	return err
}

// Dropper is an optional Driver interface: Drop deletes the table with every row in it. `ssfkit
// conformance` drops the tables it creates with it; applications never need it.
type Dropper interface {
	Drop(ctx context.Context) error
}

// UpdateBatch applies ups with the driver's Batcher if it has one, else with UpdateEach.
func UpdateBatch(ctx context.Context, d Driver, ups []BatchUpdate) ([]UpdateResult, error) {
	if b, ok := d.(Batcher); ok {
		return b.UpdateBatch(ctx, ups)
	}
	return UpdateEach(ctx, d, ups)
}

// UpdateEach applies ups one Update at a time, in order: the batch semantics without a batch
// request. Driver decorators use it to keep per-update behaviour when their backend cannot batch.
func UpdateEach(ctx context.Context, d Driver, ups []BatchUpdate) ([]UpdateResult, error) {
	out := make([]UpdateResult, len(ups))
	for i, u := range ups {
		r, err := d.Update(ctx, u.Key, u.Cond, u.Update)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// Errors every driver maps its native errors onto, so callers can test with errors.Is.
var (
	// ErrTooLarge: the row would exceed the backend's size limit. Nothing was written.
	ErrTooLarge = errors.New("row exceeds the store's size limit")
	// ErrInvalid: a key, attribute or condition the store cannot represent.
	ErrInvalid = driverurl.ErrInvalid
	// ErrUnavailable: the backend could not be reached; the operation may or may not have applied.
	ErrUnavailable = errors.New("store unavailable")
	// ErrClosed: the table was used after Close.
	ErrClosed = errors.New("store is closed")
)

// Opener opens a driver from a parsed URL.
type Opener func(ctx context.Context, u *URL) (Driver, error)

var registry = driverurl.NewRegistry[Driver]("store", "sqlite:///path/to/file.db or mem://name",
	"github.com/ssfkit/ssfkit/adapters/store/sqlitestore")

// Register makes a driver available under a URL scheme. It panics on a duplicate, like
// database/sql.Register, because two drivers claiming one scheme is a programming error.
func Register(scheme string, open Opener) { registry.Register(scheme, open) }

// Schemes lists the registered URL schemes.
func Schemes() []string { return registry.Schemes() }

// Open opens the table named by rawURL with the driver registered for its scheme.
func Open(ctx context.Context, rawURL string) (*Table, error) {
	d, u, err := registry.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return NewTable(d, u.Redacted()), nil
}
