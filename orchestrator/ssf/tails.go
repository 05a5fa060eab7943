package ssf

import (
	"context"
	"sync"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// tailCache remembers, per item, the DAAL row this runtime's last committed write of the item
// applied to, as that write left it, so that the next write of the item can try case B there
// without reading the item first (writeDAAL). It is a hint, never trusted: the write's
// conditions decide on the row as the store holds it, and any doubt sends the write the
// scanning way. What makes the row a valid candidate is that it was linked when the write
// applied to it (a write only reaches rows through links: the head, a linked last row, a
// NextRow, a successor its appender linked). A row that was ever linked and has no successor is
// the tail, since only the tail gains a successor, a row the collector unlinks keeps its
// NextRow, and row ids are never reused (the head, which numbers them, is never deleted). Its
// PriorWrites summary never changes, so it still rules a step out of every row before it.
type tailCache struct {
	mu   sync.Mutex
	rows map[tailKey]chainRow
}

type tailKey struct{ table, part string }

const (
	// maxCachedTails bounds the items remembered; past it, an arbitrary one is forgotten.
	maxCachedTails = 1024
	// maxCachedValueBytes keeps rows with large values (up to a row's limit) out of memory: their
	// writes read the item first, as every write would without the cache.
	maxCachedValueBytes = 16 << 10
)

// take removes and returns the row remembered for the item, so that a write that does not
// finish (a store transaction that runs again, a crash) does not try it twice.
func (c *tailCache) take(table, part string) (chainRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tailKey{table, part}
	r, ok := c.rows[k]
	delete(c.rows, k)
	return r, ok
}

// rowID returns the id of the row remembered for the item, leaving it remembered (a read).
func (c *tailCache) rowID(table, part string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.rows[tailKey{table, part}]
	return r.id, ok
}

// forget drops the row remembered for the item if it is still row id.
func (c *tailCache) forget(table, part, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := (tailKey{table, part}); c.rows[k].id == id {
		delete(c.rows, k)
	}
}

// put remembers row r, as a committed write left it, for the item in partition part.
func (c *tailCache) put(table, part string, r chainRow) {
	v, _ := r.attrs[attrValue].([]byte)
	tv, _ := r.attrs[attrTxValue].([]byte)
	if len(v)+len(tv) > maxCachedValueBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = make(map[tailKey]chainRow)
	}
	k := tailKey{table, part}
	if _, ok := c.rows[k]; !ok && len(c.rows) >= maxCachedTails {
		for old := range c.rows {
			delete(c.rows, old)
			break
		}
	}
	c.rows[k] = r
}

// writableAt reports whether step lk may be written as case B at remembered row c: the row, as
// remembered, is a tail with room without the step, and it is the head or its summary rules
// the step out of every row before it.
func (rt *Runtime) writableAt(c chainRow, lk string) bool {
	prior, _ := c.attrs[attrPriorWrites].([]byte)
	return rt.caseB(c.attrs, lk) && (c.id == headRowID || !priorMayHold(prior, lk))
}

// writeCached tries write w as case B on row c, the tail this runtime's last write of the item
// left, and reports whether it applied there. It tries only where c, as remembered, is in case B
// and rules the step out of every row before it (the head, or its PriorWrites summary); the
// store's condition checks the rest on the row as it is. Where the row changed under a condition
// or version the write pinned, gained a successor, filled up, logged the step or is gone, the
// write does not apply, and the caller reads the item as it would have without the cache.
func (rt *Runtime) writeCached(ctx context.Context, st *store.Table, part string, c chainRow, lk string, w daalWrite) (daalOutcome, bool, error) {
	if !rt.writableAt(c, lk) {
		return daalOutcome{}, false, nil
	}
	key := store.Key{Partition: part, Sort: c.id}
	// A store transaction that remembers rows (pgstore) then swaps the row in one statement.
	st.Presume(key, c.attrs)
	out, r, err := rt.caseBWrite(ctx, st, key, c.attrs, lk, w)
	if err != nil || !r.Applied {
		return daalOutcome{}, false, err
	}
	rt.stats.cachedWrites.inc()
	return out, true, nil
}
