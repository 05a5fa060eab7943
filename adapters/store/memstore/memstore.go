// Package memstore is an in-memory store driver for tests and throwaway runs.
//
// URL: mem://NAME opens the process-wide table NAME (every Open of the same name shares it, the
// way separate functions share one cloud table); mem:// opens a fresh private table.
// Parameter max_row_bytes (default 409600, DynamoDB's item limit) bounds encoded rows.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("mem", open) }

// DefaultMaxRowBytes matches DynamoDB's 400 KB item limit so oversize bugs surface locally.
const DefaultMaxRowBytes = store.PortableMaxRowBytes

var (
	sharedMu sync.Mutex
	shared   = map[string]*data{}
)

type data struct {
	mu         sync.Mutex
	partitions map[string]map[string]store.Attrs
}

// Driver is the in-memory driver.
type Driver struct {
	d      *data
	name   string // the shared table's name; "" for a private table
	limits store.Limits
}

func open(_ context.Context, u *store.URL) (store.Driver, error) {
	if err := u.CheckParams("max_row_bytes"); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: mem URL takes a name, not a path: want mem://NAME, got path %q", store.ErrInvalid, u.Path)
	}
	limit, err := store.MaxRowBytes(u, DefaultMaxRowBytes)
	if err != nil {
		return nil, err
	}
	if u.Host == "" {
		return New(limit), nil
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	d, ok := shared[u.Host]
	if !ok {
		d = &data{partitions: map[string]map[string]store.Attrs{}}
		shared[u.Host] = d
	}
	return &Driver{d: d, name: u.Host, limits: store.Limits{MaxRowBytes: limit}}, nil
}

// New returns a fresh private in-memory driver.
func New(maxRowBytes int) *Driver {
	return &Driver{d: &data{partitions: map[string]map[string]store.Attrs{}}, limits: store.Limits{MaxRowBytes: maxRowBytes}}
}

// Get implements store.Driver.
func (m *Driver) Get(_ context.Context, key store.Key) (store.Attrs, bool, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	a, ok := m.d.partitions[key.Partition][key.Sort]
	return a.Clone(), ok, nil
}

// Update implements store.Driver.
func (m *Driver) Update(_ context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	cur, exists := m.d.partitions[key.Partition][key.Sort]
	res, _, err := store.BatchUpdate{Key: key, Cond: cond, Update: upd}.Evaluate(cur, exists, m.limits.MaxRowBytes)
	if err != nil || !res.Applied {
		res.Attrs = res.Attrs.Clone() // the caller must not alias the stored row
		return res, err
	}
	next := res.Attrs
	p := m.d.partitions[key.Partition]
	if p == nil {
		p = map[string]store.Attrs{}
		m.d.partitions[key.Partition] = p
	}
	p[key.Sort] = next
	return store.UpdateResult{Applied: true, Attrs: next.Clone()}, nil
}

// UpdateBatchAtomic implements store.AtomicBatcher: under the lock, every update is evaluated
// on the rows as the ones before it left them, and the rows are stored only if all applied.
func (m *Driver) UpdateBatchAtomic(_ context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	next := map[store.Key]store.Attrs{}
	rs := make([]store.UpdateResult, len(ups))
	for i, u := range ups {
		cur, exists := next[u.Key]
		if !exists {
			cur, exists = m.d.partitions[u.Key.Partition][u.Key.Sort]
		}
		res, _, err := u.Evaluate(cur, exists, m.limits.MaxRowBytes)
		if err != nil {
			return nil, false, err
		}
		if !res.Applied {
			return nil, false, nil
		}
		next[u.Key] = res.Attrs
		rs[i] = store.UpdateResult{Applied: true, Attrs: res.Attrs.Clone()}
	}
	for k, a := range next {
		p := m.d.partitions[k.Partition]
		if p == nil {
			p = map[string]store.Attrs{}
			m.d.partitions[k.Partition] = p
		}
		p[k.Sort] = a
	}
	return rs, true, nil
}

// Scan implements store.Driver.
func (m *Driver) Scan(_ context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	p := m.d.partitions[partition]
	sorts := make([]string, 0, len(p))
	for sk := range p {
		sorts = append(sorts, sk)
	}
	sort.Slice(sorts, func(i, j int) bool { return (sorts[i] < sorts[j]) != opts.Reverse })
	if opts.Limit > 0 && len(sorts) > opts.Limit {
		sorts = sorts[:opts.Limit]
	}
	rows := make([]store.Row, len(sorts))
	for i, sk := range sorts {
		rows[i] = store.Row{Key: store.Key{Partition: partition, Sort: sk}, Attrs: p[sk].Project(opts.Projection)}
	}
	return rows, nil
}

// Delete implements store.Driver.
func (m *Driver) Delete(_ context.Context, key store.Key, cond store.Cond) (bool, error) {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	cur, exists := m.d.partitions[key.Partition][key.Sort]
	if !cond.Eval(cur, exists) || !exists {
		return false, nil
	}
	delete(m.d.partitions[key.Partition], key.Sort)
	if len(m.d.partitions[key.Partition]) == 0 {
		delete(m.d.partitions, key.Partition)
	}
	return true, nil
}

// Partitions lists the partitions that hold rows, sorted: what tests check is left behind.
func (m *Driver) Partitions() []string {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	parts := make([]string, 0, len(m.d.partitions))
	for p := range m.d.partitions {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return parts
}

// Limits implements store.Driver.
func (m *Driver) Limits() store.Limits { return m.limits }

// Drop implements store.Dropper: the rows go, and the name no longer refers to them.
func (m *Driver) Drop(context.Context) error {
	sharedMu.Lock()
	if shared[m.name] == m.d {
		delete(shared, m.name)
	}
	sharedMu.Unlock()
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	m.d.partitions = map[string]map[string]store.Attrs{}
	return nil
}

// Close implements store.Driver; shared tables outlive their handles.
func (m *Driver) Close() error { return nil }
