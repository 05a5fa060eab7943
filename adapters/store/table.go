package store

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Table is the portable handle applications and the runtime use. It validates arguments
// before they reach a driver and names the table and row in every error.
type Table struct {
	drv    Driver
	name   string
	closed atomic.Bool
}

// NewTable wraps a driver; name (usually the redacted URL) appears in errors.
func NewTable(d Driver, name string) *Table { return &Table{drv: d, name: name} }

// Name is the table's display name (its redacted URL).
func (t *Table) Name() string { return t.name }

// Limits reports the backend's size limits.
func (t *Table) Limits() Limits { return t.drv.Limits() }

// Driver returns the underlying driver, for escape hatches to native features.
func (t *Table) Driver() Driver { return t.drv }

func (t *Table) check(key Key) error {
	if t.closed.Load() {
		return ErrClosed
	}
	if key.Partition == "" {
		return fmt.Errorf("%w: empty partition key", ErrInvalid)
	}
	return nil
}

func (t *Table) wrap(op string, key Key, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store %s: %s %s: %w", t.name, op, key, err)
}

// Get returns the row's attributes, or found=false if it does not exist.
func (t *Table) Get(ctx context.Context, key Key) (Attrs, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, t.wrap("get", key, err)
	}
	a, found, err := t.drv.Get(ctx, key)
	return a, found, t.wrap("get", key, err)
}

// GetProjected reads a row's attributes named by proj (store.GetProjected).
func (t *Table) GetProjected(ctx context.Context, key Key, proj []Path) (Attrs, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, t.wrap("get", key, err)
	}
	a, found, err := GetProjected(ctx, t.drv, key, proj)
	return a, found, t.wrap("get", key, err)
}

// Update atomically applies upd if cond holds (see Driver.Update).
func (t *Table) Update(ctx context.Context, key Key, cond Cond, upd Update) (UpdateResult, error) {
	if err := t.check(key); err != nil {
		return UpdateResult{}, t.wrap("update", key, err)
	}
	if err := upd.Validate(); err != nil {
		return UpdateResult{}, t.wrap("update", key, err)
	}
	r, err := t.drv.Update(ctx, key, cond, upd)
	return r, t.wrap("update", key, err)
}

// UpdateBatch applies several conditional updates, in one request where the driver can (see
// Batcher); each behaves as Update.
func (t *Table) UpdateBatch(ctx context.Context, ups []BatchUpdate) ([]UpdateResult, error) {
	for _, u := range ups {
		if err := t.check(u.Key); err != nil {
			return nil, t.wrap("update batch", u.Key, err)
		}
		if err := u.Update.Validate(); err != nil {
			return nil, t.wrap("update batch", u.Key, err)
		}
	}
	if len(ups) == 0 {
		return nil, nil
	}
	rs, err := UpdateBatch(ctx, t.drv, ups)
	return rs, t.wrap("update batch", ups[0].Key, err)
}

// Put stores attrs as the whole row, unconditionally.
func (t *Table) Put(ctx context.Context, key Key, attrs Attrs) error {
	if err := ValidateAttrs(attrs); err != nil {
		return t.wrap("put", key, err)
	}
	upd := make(Update, 0, len(attrs))
	for k, v := range attrs {
		upd = append(upd, SetAttr(Attr(k), v))
	}
	_, err := t.Update(ctx, key, Always(), upd)
	return err
}

// Scan returns every row of one partition ordered by sort key.
func (t *Table) Scan(ctx context.Context, partition string, opts ScanOptions) ([]Row, error) {
	key := Key{Partition: partition}
	if err := t.check(key); err != nil {
		return nil, t.wrap("scan", key, err)
	}
	rows, err := t.drv.Scan(ctx, partition, opts)
	return rows, t.wrap("scan", key, err)
}

// DeleteBlind deletes key's row, if any, without telling whether there was one (BlindDeleter).
func (t *Table) DeleteBlind(ctx context.Context, key Key) error {
	if err := t.check(key); err != nil {
		return t.wrap("delete", key, err)
	}
	return t.wrap("delete", key, DeleteBlind(ctx, t.drv, key))
}

// Presume tells a transaction's driver that key's row holds attrs (Presumer); false when the
// driver does not take it, and the row must be read.
func (t *Table) Presume(key Key, attrs Attrs) bool {
	return t.check(key) == nil && Presume(t.drv, key, attrs)
}

// Delete removes the row if cond holds.
func (t *Table) Delete(ctx context.Context, key Key, cond Cond) (bool, error) {
	if err := t.check(key); err != nil {
		return false, t.wrap("delete", key, err)
	}
	ok, err := t.drv.Delete(ctx, key, cond)
	return ok, t.wrap("delete", key, err)
}

// Close releases the driver. Later calls fail with ErrClosed.
func (t *Table) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	return t.drv.Close()
}
