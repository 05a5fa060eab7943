// Package sharedlog is a shared log with FlexLog's semantics (seeds/004) on any ssfkit store:
// records appended to colors (totally ordered logs), each record numbered by a sequence number
// (SN) unique within its color, readable by SN, scannable forwards and backwards, subscribable,
// trimmable, with atomic appends across colors and tenants that cannot see each other's colors.
//
// Layout, in one store table shared by every tenant:
//
//   - ("c|TENANT", COLOR): the color's sequencer row: next (the first SN not yet handed out), trim
//     (records up to it are gone), gc (records up to it are deleted), parent.
//   - ("r|TENANT|COLOR|BUCKET", SN as 20 digits): a record: v (its data), w (the token of the
//     append that wrote it), m (the multi-color append it belongs to), or hole=true. Buckets of
//     1024 SNs spread a busy color over partitions (hot keys) and keep partitions small.
//   - ("m|TENANT", ID): a multi-color or exactly-once append: its parts, the SNs they got, done.
//   - ("t|", TENANT): the directory of the table's tenants, so a garbage collector that knows only
//     the table collects every tenant's log (CollectTable).
//
// An append reserves SNs with one atomic add on the sequencer row, then writes each record with
// create-if-absent. Appends of one process to one color share reservations (FlexLog's
// aggregation): while one reservation is in flight, the appends that arrive wait and go together
// in the next. A writer that dies between reserving and writing leaves a pending SN; a reader that
// needs it waits up to HoleTimeout and then fills it with a hole, which the late writer's
// create-if-absent cannot overwrite (that writer appends its record again, at a new SN). So reads
// never see a record appear below one they already saw: each color is linearizable.
//
// Records are immutable once written, so they are cached; a read still reads the sequencer row
// after the record, so a completed Trim is never contradicted.
//
// Imports (docs/architecture.md): the runtime and the store API; never a host, a command or the
// test kit.
package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Errors.
var (
	// ErrNoColor: the color does not exist for this tenant (AddColor creates colors).
	ErrNoColor = errors.New("sharedlog: no such color")
	// ErrColorExists: AddColor of a color that exists with another parent.
	ErrColorExists = errors.New("sharedlog: color exists")
	// ErrTrimmed: the SN was trimmed.
	ErrTrimmed = errors.New("sharedlog: trimmed")
	// ErrNotFound: no record has that SN (a hole, or beyond the tail).
	ErrNotFound = errors.New("sharedlog: no record")
	// ErrInvalid: a malformed argument.
	ErrInvalid = errors.New("sharedlog: invalid argument")
	// ErrBusy: the color changed under every attempt of an operation that needs a quiet
	// moment (CheckTail); retrying may succeed.
	ErrBusy = errors.New("sharedlog: color too busy")
)

// Record is a record of a color.
type Record struct {
	Color string
	SN    uint64
	Data  []byte
}

// Options tune a Log.
type Options struct {
	// HoleTimeout is how long a reader waits for a reserved SN's record before filling it with a
	// hole (default 2 s). It must exceed the time a live writer takes from reserving to writing.
	HoleTimeout time.Duration
	// Poll is the interval between checks while waiting for a pending SN (default 5 ms).
	Poll time.Duration
	// CachedRecords bounds the record cache (default 4096; negative: no cache).
	CachedRecords int
	// Fault, when set, is called at each step of an append and may stop it there (crash tests).
	Fault func(point string) error
}

// Fault points, in the order an append reaches them.
const (
	FaultReserved     = "reserved"      // SNs reserved, no record written
	FaultMultiCreated = "multi-created" // the multi-color append's row written
	FaultPartReserved = "part-reserved" // one part's SN recorded in the multi row
	FaultPartWritten  = "part-written"  // one part's record written
)

// Log is one tenant's view of the shared log in a table. It is safe for concurrent use.
type Log struct {
	tbl    *store.Table
	tenant string
	opts   Options

	mu    sync.Mutex
	seqs  map[string]*sequencer
	cache map[recordID]Record
	done  map[string]bool // multi-color appends known finished

	stats Stats
}

type recordID struct {
	color string
	sn    uint64
}

// Stats count what a Log did, for benchmarks.
type Stats struct {
	Appends      int64 // records appended
	Reservations int64 // sequencer row updates
	HolesFilled  int64
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

func checkName(what, s string) error {
	if !namePattern.MatchString(s) {
		return fmt.Errorf("%w: %s %q: want 1-128 letters, digits, '_', '.' or '-'", ErrInvalid, what, s)
	}
	return nil
}

// New returns tenant's log in tbl.
func New(tbl *store.Table, tenant string, opts Options) (*Log, error) {
	if err := checkName("tenant", tenant); err != nil {
		return nil, err
	}
	if opts.HoleTimeout <= 0 {
		opts.HoleTimeout = 2 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Millisecond
	}
	if opts.CachedRecords == 0 {
		opts.CachedRecords = 4096
	}
	return &Log{tbl: tbl, tenant: tenant, opts: opts, seqs: map[string]*sequencer{}, cache: map[recordID]Record{}, done: map[string]bool{}}, nil
}

// Table is the table the log lives in (the log-backed queue keeps its leases there).
func (l *Log) Table() *store.Table { return l.tbl }

// Tenant is the log's tenant.
func (l *Log) Tenant() string { return l.tenant }

// Stats returns the counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

func (l *Log) count(f func(*Stats)) {
	l.mu.Lock()
	f(&l.stats)
	l.mu.Unlock()
}

func (l *Log) colorKey(color string) store.Key {
	return store.Key{Partition: "c|" + l.tenant, Sort: color}
}

// bucketBits is log2 of the SNs per record partition.
const bucketBits = 10

func (l *Log) recordKey(color string, sn uint64) store.Key {
	return store.Key{Partition: fmt.Sprintf("r|%s|%s|%d", l.tenant, color, sn>>bucketBits), Sort: fmt.Sprintf("%020d", sn)}
}

func tenantKey(tenant string) store.Key { return store.Key{Partition: "t|", Sort: tenant} }

func (l *Log) multiKey(id string) store.Key { return store.Key{Partition: "m|" + l.tenant, Sort: id} }

func (l *Log) fault(point string) error {
	if l.opts.Fault != nil {
		return l.opts.Fault(point)
	}
	return nil
}

// AddColor creates the color child under parent ("" for a top-level color). Adding a color that
// exists with the same parent does nothing.
func (l *Log) AddColor(ctx context.Context, child, parent string) error {
	if err := checkName("color", child); err != nil {
		return err
	}
	if parent != "" {
		if _, err := l.sequencerRow(ctx, parent); err != nil {
			return fmt.Errorf("AddColor %s: parent: %w", child, err)
		}
	} else if _, err := l.tbl.Update(ctx, tenantKey(l.tenant), store.RowAbsent(), store.Update{store.SetAttr(store.Attr("since"), time.Now().UnixMilli())}); err != nil {
		// A top-level color is where a tenant's log starts; listing the tenant first means no
		// color is ever outside the directory.
		return err
	}
	res, err := l.tbl.Update(ctx, l.colorKey(child), store.RowAbsent(), store.Update{
		store.SetAttr(store.Attr("next"), int64(1)), store.SetAttr(store.Attr("trim"), int64(0)),
		store.SetAttr(store.Attr("gc"), int64(0)), store.SetAttr(store.Attr("parent"), parent),
	})
	if err != nil {
		return err
	}
	if !res.Applied && res.Attrs["parent"] != parent {
		return fmt.Errorf("%w: %s has parent %q", ErrColorExists, child, res.Attrs["parent"])
	}
	return nil
}

// seqRow is a color's sequencer row.
type seqRow struct {
	next, trim, gc uint64
	parent         string
}

func (l *Log) sequencerRow(ctx context.Context, color string) (seqRow, error) {
	if err := checkName("color", color); err != nil {
		return seqRow{}, err
	}
	a, found, err := l.tbl.Get(ctx, l.colorKey(color))
	if err != nil {
		return seqRow{}, err
	}
	if !found {
		return seqRow{}, fmt.Errorf("%w: %s (tenant %s)", ErrNoColor, color, l.tenant)
	}
	return parseSeqRow(a), nil
}

func parseSeqRow(a store.Attrs) seqRow {
	n, _ := a["next"].(int64)
	t, _ := a["trim"].(int64)
	g, _ := a["gc"].(int64)
	p, _ := a["parent"].(string)
	return seqRow{next: uint64(n), trim: uint64(t), gc: uint64(g), parent: p}
}

// Colors lists the tenant's colors.
func (l *Log) Colors(ctx context.Context) ([]string, error) {
	rows, err := l.tbl.Scan(ctx, "c|"+l.tenant, store.ScanOptions{Projection: []store.Path{store.Attr("next")}})
	if err != nil {
		return nil, err
	}
	colors := make([]string, len(rows))
	for i, r := range rows {
		colors[i] = r.Key.Sort
	}
	return colors, nil
}
