package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
)

// The kinds of store request a Driver serves.
const (
	reqScan = iota
	reqGet
	reqUpdate
	reqDelete
	numReqKinds
)

// Counts are the store requests issued and the time spent in them, as a countingDriver sees it.
type Counts struct {
	N           [numReqKinds]int64
	Time        [numReqKinds]time.Duration
	ScannedRows int64
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	for k := range c.N {
		c.N[k] -= o.N[k]
		c.Time[k] -= o.Time[k]
	}
	c.ScannedRows -= o.ScannedRows
	return c
}

func (c Counts) add(o Counts) Counts {
	for k := range c.N {
		c.N[k] += o.N[k]
		c.Time[k] += o.Time[k]
	}
	c.ScannedRows += o.ScannedRows
	return c
}

// RoundTrips is the number of store requests (a scan is one, whatever it returns).
func (c Counts) RoundTrips() int64 {
	var n int64
	for _, k := range c.N {
		n += k
	}
	return n
}

// PerOp averages c over n operations.
func (c Counts) PerOp(n int) StoreOps {
	if n == 0 {
		return StoreOps{}
	}
	f := float64(n)
	avg := func(k int) float64 { return float64(c.N[k]) / f }
	avgUS := func(k int) float64 { return us(c.Time[k]) / f }
	return StoreOps{
		Scans: avg(reqScan), ScannedRows: float64(c.ScannedRows) / f, Gets: avg(reqGet), Updates: avg(reqUpdate), Deletes: avg(reqDelete),
		ScanUS: avgUS(reqScan), GetUS: avgUS(reqGet), UpdateUS: avgUS(reqUpdate), DeleteUS: avgUS(reqDelete),
	}
}

// StoreOps are the store requests one benchmarked operation issued, and the time it spent in
// each kind, on average.
type StoreOps struct {
	Scans       float64 `json:"scans"`
	ScannedRows float64 `json:"scanned_rows"` // rows returned by those scans
	Gets        float64 `json:"gets"`
	Updates     float64 `json:"updates"`
	Deletes     float64 `json:"deletes"`
	ScanUS      float64 `json:"scan_us"`
	GetUS       float64 `json:"get_us"`
	UpdateUS    float64 `json:"update_us"`
	DeleteUS    float64 `json:"delete_us"`
}

// RoundTrips is the average number of store requests.
func (s StoreOps) RoundTrips() float64 { return s.Gets + s.Updates + s.Scans + s.Deletes }

// StoreUS is the average time spent in the store.
func (s StoreOps) StoreUS() float64 { return s.ScanUS + s.GetUS + s.UpdateUS + s.DeleteUS }

// String renders the requests as "1 scan (21 rows) + 1 get + 1.03 updates".
func (s StoreOps) String() string {
	var parts []string
	term := func(n float64, one, many string) {
		if n < 0.005 {
			return
		}
		name := many
		if num(n) == "1" {
			name = one
		}
		parts = append(parts, num(n)+" "+name)
	}
	term(s.Scans, "scan", "scans")
	if len(parts) > 0 {
		parts[0] += " (" + num(s.ScannedRows/s.Scans) + " rows)"
	}
	term(s.Gets, "get", "gets")
	term(s.Updates, "update", "updates")
	term(s.Deletes, "delete", "deletes")
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " + ")
}

// num formats an average: whole numbers without decimals, others with two.
func num(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	return strings.TrimSuffix(s, ".00")
}

// Counter counts the requests of every countingDriver that shares it.
type Counter struct {
	n           [numReqKinds]atomic.Int64
	ns          [numReqKinds]atomic.Int64
	scannedRows atomic.Int64
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Counts {
	var s Counts
	for k := range s.N {
		s.N[k], s.Time[k] = c.n[k].Load(), time.Duration(c.ns[k].Load())
	}
	s.ScannedRows = c.scannedRows.Load()
	return s
}

func (c *Counter) done(kind int, start time.Time) {
	c.ns[kind].Add(int64(time.Since(start)))
	c.n[kind].Add(1)
}

// countingDriver is a store.Driver decorator that counts requests and times them, so a report
// can say what an exactly-once operation costs in store round trips, which is what its latency
// is made of.
type countingDriver struct {
	store.Driver
	c *Counter
}

func (d countingDriver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	defer d.c.done(reqGet, time.Now())
	return d.Driver.Get(ctx, key)
}

// GetProjected forwards store.ProjectedGetter, counted as a get.
func (d countingDriver) GetProjected(ctx context.Context, key store.Key, proj []store.Path) (store.Attrs, bool, error) {
	defer d.c.done(reqGet, time.Now())
	return store.GetProjected(ctx, d.Driver, key, proj)
}

func (d countingDriver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	defer d.c.done(reqUpdate, time.Now())
	return d.Driver.Update(ctx, key, cond, upd)
}

// UpdateBatch counts a batch as one update request: on a store that batches (SQLite: one
// transaction, one commit) that is what it costs. Without a Batcher each update counts.
func (d countingDriver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if _, ok := d.Driver.(store.Batcher); !ok {
		return store.UpdateEach(ctx, d, ups)
	}
	defer d.c.done(reqUpdate, time.Now())
	return store.UpdateBatch(ctx, d.Driver, ups)
}

func (d countingDriver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	defer d.c.done(reqScan, time.Now())
	rows, err := d.Driver.Scan(ctx, partition, opts)
	d.c.scannedRows.Add(int64(len(rows)))
	return rows, err
}

func (d countingDriver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	defer d.c.done(reqDelete, time.Now())
	return d.Driver.Delete(ctx, key, cond)
}

// The optional interfaces of a store transaction's driver are forwarded, so that the runtime
// takes the same path through a counted store as through the store itself.

// UpdateBatchFinal forwards store.FinalBatcher, counted as one update request; without it, it
// is UpdateBatch, which never commits.
func (d countingDriver) UpdateBatchFinal(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	fb, ok := d.Driver.(store.FinalBatcher)
	if !ok {
		rs, err := d.UpdateBatch(ctx, ups)
		return rs, false, err
	}
	defer d.c.done(reqUpdate, time.Now())
	return fb.UpdateBatchFinal(ctx, ups)
}

// countingAtomic keeps the store's all-or-nothing batches (store.AtomicBatcher) visible to the
// runtime, counted as one update request each.
type countingAtomic struct{ countingDriver }

func (d countingAtomic) UpdateBatchAtomic(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, bool, error) {
	defer d.c.done(reqUpdate, time.Now())
	return d.Driver.(store.AtomicBatcher).UpdateBatchAtomic(ctx, ups)
}

// DeleteBlind forwards store.BlindDeleter, counted as a delete (the store may send it with the
// transaction's next request).
func (d countingDriver) DeleteBlind(ctx context.Context, key store.Key) error {
	defer d.c.done(reqDelete, time.Now())
	return store.DeleteBlind(ctx, d.Driver, key)
}

// Presume forwards store.Presumer; it sends nothing.
func (d countingDriver) Presume(key store.Key, attrs store.Attrs) bool {
	return store.Presume(d.Driver, key, attrs)
}

// Drop forwards store.Dropper, so the suite can drop the tables it made.
func (d countingDriver) Drop(ctx context.Context) error {
	if dr, ok := d.Driver.(store.Dropper); ok {
		return dr.Drop(ctx)
	}
	return nil
}

// openCounted opens the table at rawURL with its driver wrapped to count into c.
func openCounted(ctx context.Context, rawURL string, c *Counter) (*store.Table, error) {
	t, err := store.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	counted := countingDriver{Driver: t.Driver(), c: c}
	var d store.Driver = counted
	if _, ok := t.Driver().(store.Transactor); ok {
		d = countingTransactor{counted}
	} else if _, ok := t.Driver().(store.AtomicBatcher); ok {
		d = countingAtomic{counted}
	}
	return store.NewTable(d, t.Name()), nil
}

// countingTransactor keeps the store's transactions visible to the runtime, counting the
// requests made inside them.
type countingTransactor struct{ countingDriver }

func (d countingTransactor) Transact(ctx context.Context, fn func(store.Driver) error) error {
	return d.Driver.(store.Transactor).Transact(ctx, func(tx store.Driver) error {
		return fn(countingDriver{Driver: tx, c: d.c})
	})
}

// siblingURL names another table next to the one at rawURL, so each SSF of the benchmark has
// its own table (Beldi's data sovereignty) on the same backend. On a URL with
// store.TablePlaceholder, the sibling's name extends the placeholder (letters and digits only,
// which every backend accepts); the suite fills it in when it opens the table.
func siblingURL(rawURL, suffix string) (string, error) {
	if strings.Contains(rawURL, store.TablePlaceholder) {
		alnum := strings.Map(func(r rune) rune {
			if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return r
			}
			return -1
		}, suffix)
		return strings.ReplaceAll(rawURL, store.TablePlaceholder, store.TablePlaceholder+alnum), nil
	}
	u, err := store.ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "sqlite":
		q := u.Query
		q.Set("table", u.Param("table", sqlitestore.DefaultTable)+"_"+suffix)
		return (&url.URL{Scheme: "sqlite", Path: u.Path, RawQuery: q.Encode()}).String(), nil
	case "mem":
		host := u.Host
		if host != "" {
			host += "_" + suffix // mem:// alone is already a fresh private table
		}
		out := "mem://" + host
		if len(u.Query) > 0 {
			out += "?" + u.Query.Encode()
		}
		return out, nil
	}
	return "", fmt.Errorf("bench: store URL %s: write %s where the benchmark's table names go (e.g. dynamodb://%s?create=true); only sqlite:// and mem:// URLs can do without", u.Redacted(), store.TablePlaceholder, store.TablePlaceholder)
}
