package aztablestore

import (
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Two caches save requests on the runtime's hot path, where a DAAL access starts by looking up
// the partition's last row (a reverse scan) and a write then updates that row. Neither is ever
// trusted for what it returns. A cached row is used only for a write guarded by its ETag, which
// the service refuses if the row has changed; a tail hint only narrows a query, whose result
// shows whether the hint still holds.
const (
	rowCacheBytes = 4 << 20  // per driver
	maxCachedRow  = 64 << 10 // larger rows are not cached
	maxTailHints  = 4096     // per driver
)

// cachedRow is a row as this driver last read or wrote it.
type cachedRow struct {
	etag azcore.ETag
	blob []byte // never handed out, so never modified
}

// rowCache holds recently seen rows, within a byte budget; when full, arbitrary rows make room.
type rowCache struct {
	mu    sync.Mutex
	rows  map[store.Key]cachedRow
	bytes int
}

func (c *rowCache) get(k store.Key) (cachedRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.rows[k]
	return r, ok
}

// put records the row at k; an empty etag (the service sent none) forgets it.
func (c *rowCache) put(k store.Key, etag azcore.ETag, blob []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(k)
	if etag == "" || len(blob) > maxCachedRow {
		return
	}
	for other := range c.rows {
		if c.bytes+len(blob) <= rowCacheBytes {
			break
		}
		c.dropLocked(other)
	}
	if c.rows == nil {
		c.rows = map[store.Key]cachedRow{}
	}
	c.rows[k] = cachedRow{etag: etag, blob: blob}
	c.bytes += len(blob)
}

func (c *rowCache) drop(k store.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(k)
}

func (c *rowCache) dropLocked(k store.Key) {
	if r, ok := c.rows[k]; ok {
		c.bytes -= len(r.blob)
		delete(c.rows, k)
	}
}

// tailHints maps a partition to the escaped RowKey from which its last rows were found.
type tailHints struct {
	mu    sync.Mutex
	hints map[string]string
}

func (t *tailHints) get(partition string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.hints[partition]
	return h, ok
}

// put records a hint; an empty rk forgets it.
func (t *tailHints) put(partition, rk string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hints, partition)
	if rk == "" {
		return
	}
	for other := range t.hints {
		if len(t.hints) < maxTailHints {
			break
		}
		delete(t.hints, other)
	}
	if t.hints == nil {
		t.hints = map[string]string{}
	}
	t.hints[partition] = rk
}
