package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
	"github.com/ssfkit/ssfkit/tests/crashtest"
	"github.com/ssfkit/ssfkit/tests/lincheck"
	"github.com/ssfkit/ssfkit/tests/txtest"
)

// tablePlaceholder and queuePlaceholder mark where `ssfkit conformance` puts each fresh
// table's and queue's name in -store and -queue.
const (
	tablePlaceholder = store.TablePlaceholder
	queuePlaceholder = "{queue}"
)

// storeSuites run against -store, queueSuites against -queue, in this order.
var (
	storeSuites = []string{"driver", "crash", "linearizability", "transactions", "log"}
	queueSuites = []string{"queue"}
)

func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("conformance", "Runs the store driver conformance suite, the runtime's crash-injection, linearizability\n"+
		"and transaction suites and the shared log's suite against a live store, and the queue driver suite against a live\n"+
		"queue (an emulator or a real account, with the usual credentials), then prints a\n"+
		"per-test table and a verdict. Every test gets fresh tables and queues: write {table} and\n"+
		"{queue} in the URLs where their names go. Tables are dropped afterwards unless\n"+
		"-keep-tables is given (drivers that cannot drop say so); queues are left.\n\n"+
		"Examples:\n"+
		"  ssfkit conformance -store 'sqlite:///tmp/conf.db?table={table}'\n"+
		"  ssfkit conformance -store 'postgres://user@db:5432/app?table={table}'\n"+
		"  ssfkit conformance -store 'dynamodb://{table}?region=eu-west-1&create=true' \\\n"+
		"                     -queue 'sqs://{queue}?region=eu-west-1&create=true'", stderr)
	storeURL := fs.String("store", "", "store URL containing "+tablePlaceholder)
	queueURL := fs.String("queue", "", "queue URL containing "+queuePlaceholder)
	all := append(slices.Clone(storeSuites), queueSuites...)
	suites := fs.String("suites", "", "comma-separated suites to run (default: every suite of the URLs given): "+strings.Join(all, ", "))
	stride := fs.Int("stride", 8, "crash suites: crash at every Nth injection point (1 = all of them; slower)")
	schedules := fs.Int("schedules", 4, "crash suite: randomised multi-crash schedules")
	duration := fs.Duration("duration", 5*time.Second, "linearizability: how long the clients keep starting instances (at least 4 lifetimes, so the GC reclaims rows)")
	lifetime := fs.Duration("lifetime", 500*time.Millisecond, "linearizability: the execution lifetime bound; transactions: how long an unfinished transfer waits before the intent collector relaunches it (raise it for high-latency backends)")
	keep := fs.Bool("keep-tables", false, "leave the tables the tests created")
	verbose := fs.Bool("v", false, "print the log of every test, not only of failed ones")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *storeURL == "" && *queueURL == "" {
		return &cliUsageError{err: errors.New("conformance: give -store, -queue or both (see ssfkit help conformance)")}
	}
	if *storeURL != "" && !strings.Contains(*storeURL, tablePlaceholder) {
		return &cliUsageError{err: fmt.Errorf("conformance: -store %q has no %s: write it where each test's fresh table name goes, e.g. sqlite:///tmp/conf.db?table=%s", redactURL(*storeURL, tablePlaceholder), tablePlaceholder, tablePlaceholder)}
	}
	if *queueURL != "" && !strings.Contains(*queueURL, queuePlaceholder) {
		return &cliUsageError{err: fmt.Errorf("conformance: -queue %q has no %s: write it where each test's fresh queue name goes, e.g. sqs://%s?region=eu-west-1&create=true", redactURL(*queueURL, queuePlaceholder), queuePlaceholder, queuePlaceholder)}
	}
	selected, err := selectSuites(*suites, *storeURL != "", *queueURL != "")
	if err != nil {
		return &cliUsageError{err: err}
	}
	if *stride < 1 || *schedules < 0 || *lifetime <= 0 || *duration < 4**lifetime {
		return &cliUsageError{err: errors.New("conformance: -stride must be >= 1, -schedules >= 0, -lifetime positive and -duration at least 4 × -lifetime")}
	}

	var names *nameMaker
	if names, err = newNameMaker(); err != nil {
		return err
	}
	var tables *tableMaker
	var queues *queueMaker
	var where []string
	if *storeURL != "" {
		if tables, err = newTableMaker(ctx, *storeURL, names, *keep); err != nil {
			return err
		}
		where = append(where, tables.redacted)
	}
	if *queueURL != "" {
		if queues, err = newQueueMaker(ctx, *queueURL, names); err != nil {
			return err
		}
		where = append(where, queues.redacted)
	}
	fmt.Fprintf(stderr, "conformance: %s on %s (tables and queues named %s*)\n", strings.Join(selected, ", "), strings.Join(where, " and "), names.prefix)
	var results []suite.Result
	var mu sync.Mutex
	report := func(r suite.Result) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, r)
		status := "ok  "
		if !r.Passed {
			status = "FAIL"
		}
		fmt.Fprintf(stderr, "  %s %-60s %v\n", status, r.Name, r.Duration.Round(time.Millisecond))
	}
	start := time.Now()
	for _, name := range selected {
		var run func(suite.T)
		switch name {
		case "driver":
			run = func(t suite.T) { storetest.Suite(t, tables.driver) }
		case "crash":
			run = func(t suite.T) {
				crashtest.Run(t, tables.table, crashtest.Options{Stride: *stride, Schedules: *schedules})
			}
		case "linearizability":
			run = func(t suite.T) {
				lincheck.Run(t, tables.table, lincheck.Options{Clients: 6, Duration: *duration, Keys: 3, Seed: time.Now().UnixNano(),
					MaxDelay: 300 * time.Microsecond, Crash: 0.01, Lifetime: *lifetime})
			}
		case "transactions":
			run = func(t suite.T) {
				txtest.Run(t, tables.table, txtest.Options{Stride: *stride, RelaunchDelay: *lifetime})
			}
		case "log":
			run = func(t suite.T) { logtest.Run(t, tables.table, logtest.Options{HoleTimeout: 2 * *lifetime}) }
		case "queue":
			run = func(t suite.T) { queuetest.Suite(t, queues.queue) }
		}
		suite.RunStandalone(ctx, name, run, report)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	failed := printConformance(stdout, results, *verbose)
	if tables != nil && !*keep {
		if n := tables.undropped.Load(); n > 0 {
			fmt.Fprintf(stdout, "\nnote: %d tables named %s* were left behind: this driver cannot drop tables\n", n, names.prefix)
		}
	}
	if queues != nil {
		fmt.Fprintf(stdout, "\nnote: %d queues named %s* were left behind: delete them with your cloud's console or CLI\n", queues.n.Load(), names.prefix)
	}
	total, on := len(results), strings.Join(where, " and ")
	if failed > 0 {
		return fmt.Errorf("FAIL: %d of %d tests failed on %s (%v)", failed, total, on, time.Since(start).Round(time.Second))
	}
	fmt.Fprintf(stdout, "\nPASS: all %d tests passed on %s (%v)\n", total, on, time.Since(start).Round(time.Second))
	return nil
}

// selectSuites returns the suites named in list (all of those the given URLs can run when
// list is empty), in run order.
func selectSuites(list string, haveStore, haveQueue bool) ([]string, error) {
	var avail []string
	if haveStore {
		avail = append(avail, storeSuites...)
	}
	if haveQueue {
		avail = append(avail, queueSuites...)
	}
	if list == "" {
		return avail, nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case slices.Contains(avail, s):
			want[s] = true
		case slices.Contains(storeSuites, s):
			return nil, fmt.Errorf("conformance: suite %q needs -store", s)
		case slices.Contains(queueSuites, s):
			return nil, fmt.Errorf("conformance: suite %q needs -queue", s)
		default:
			return nil, fmt.Errorf("conformance: unknown suite %q (known: %s)", s, strings.Join(append(slices.Clone(storeSuites), queueSuites...), ", "))
		}
	}
	var out []string
	for _, s := range avail {
		if want[s] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("conformance: -suites names no suite")
	}
	return out, nil
}

// printConformance writes the per-test table (and the logs of failed tests, or of all tests
// when verbose) and returns the number of failed tests.
func printConformance(w io.Writer, results []suite.Result, verbose bool) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tRESULT\tTIME")
	failed := 0
	for _, r := range results {
		status := "pass"
		if !r.Passed {
			status = "FAIL"
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\n", r.Name, status, r.Duration.Round(time.Millisecond))
	}
	tw.Flush()
	for _, r := range results {
		if r.Log != "" && (verbose || !r.Passed) {
			fmt.Fprintf(w, "\n--- %s\n%s", r.Name, indent(r.Log))
		}
	}
	return failed
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

// nameMaker names the tables and queues of one run: "ssfk", a random run id, a number. Letters
// and digits only, lower case, which every backend accepts as a table or queue name.
type nameMaker struct {
	prefix string
	n      atomic.Int64
}

func newNameMaker() (*nameMaker, error) {
	id, err := rand.Int(rand.Reader, big.NewInt(36*36*36*36*36))
	if err != nil {
		return nil, err
	}
	return &nameMaker{prefix: "ssfk" + fmt.Sprintf("%05s", id.Text(36)) + "n"}, nil
}

func (m *nameMaker) next() string { return fmt.Sprintf("%s%d", m.prefix, m.n.Add(1)) }

// tableMaker opens fresh tables for the suites by putting a new name where the URL has
// {table}.
type tableMaker struct {
	ctx       context.Context
	url       string
	redacted  string
	names     *nameMaker
	keep      bool
	undropped atomic.Int64
}

func newTableMaker(ctx context.Context, url string, names *nameMaker, keep bool) (*tableMaker, error) {
	m := &tableMaker{ctx: ctx, url: url, redacted: redactURL(url, tablePlaceholder), names: names, keep: keep}
	// Open one table up front, so a bad URL, missing credentials or an unreachable backend is
	// one clear error rather than a failure in every test.
	probe, url, err := m.open()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	probe.Close()
	if err := m.drop(url); err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	return m, nil
}

// open opens a fresh table and returns it with its URL.
func (m *tableMaker) open() (*store.Table, string, error) {
	url := strings.ReplaceAll(m.url, tablePlaceholder, m.names.next())
	tbl, err := store.Open(m.ctx, url)
	return tbl, url, err
}

// drop drops the table at url (unless keep) through a handle of its own, so it works after
// the suite closed its handles.
func (m *tableMaker) drop(url string) error {
	if m.keep {
		return nil
	}
	ctx := context.WithoutCancel(m.ctx)
	tbl, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer tbl.Close()
	dr, ok := tbl.Driver().(store.Dropper)
	if !ok {
		m.undropped.Add(1)
		return nil
	}
	if err := dr.Drop(ctx); err != nil {
		return fmt.Errorf("drop %s: %w", tbl.Name(), err)
	}
	return nil
}

// driver is the driver suite's harness: a fresh driver, which the suite closes.
func (m *tableMaker) driver(t suite.T) store.Driver { return m.fresh(t, false).Driver() }

// table is the runtime suites' factory.
func (m *tableMaker) table(t suite.T, _ string) *store.Table { return m.fresh(t, true) }

// fresh opens a fresh table whose table is dropped when t ends, after closing the handle if
// closeAtEnd.
func (m *tableMaker) fresh(t suite.T, closeAtEnd bool) *store.Table {
	tbl, url, err := m.open()
	if err != nil {
		t.Fatalf("open a fresh table: %v", err)
	}
	t.Cleanup(func() {
		if closeAtEnd {
			tbl.Close()
		}
		if err := m.drop(url); err != nil {
			t.Errorf("%v", err)
		}
	})
	return tbl
}

// queueMaker opens fresh queues for the queue suite by putting a new name where the URL has
// {queue}.
type queueMaker struct {
	ctx      context.Context
	url      string
	redacted string
	names    *nameMaker
	n        atomic.Int64
}

func newQueueMaker(ctx context.Context, url string, names *nameMaker) (*queueMaker, error) {
	m := &queueMaker{ctx: ctx, url: url, redacted: redactURL(url, queuePlaceholder), names: names}
	probe, err := m.open()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	probe.Close()
	return m, nil
}

func (m *queueMaker) open() (*queue.Queue, error) {
	m.n.Add(1)
	return queue.Open(m.ctx, strings.ReplaceAll(m.url, queuePlaceholder, m.names.next()))
}

// queue is the queue suite's harness: a fresh queue, closed when the test ends.
func (m *queueMaker) queue(t suite.T) *queue.Queue {
	q, err := m.open()
	if err != nil {
		t.Fatalf("open a fresh queue: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// redactURL hides a password in a URL for printing, keeping the placeholder readable.
func redactURL(raw, placeholder string) string {
	u, err := store.ParseURL(strings.ReplaceAll(raw, placeholder, "PLACEHOLDER"))
	if err != nil {
		return "(unparseable URL)"
	}
	return strings.ReplaceAll(u.Redacted(), "PLACEHOLDER", placeholder)
}
