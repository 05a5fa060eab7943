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

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/tests/crashtest"
	"github.com/ssfkit/ssfkit/tests/lincheck"
	"github.com/ssfkit/ssfkit/tests/txtest"
)

// tablePlaceholder marks where `ssfkit conformance` puts each fresh table's name in --store.
const tablePlaceholder = "{table}"

// conformanceSuites are the suites `ssfkit conformance` can run, in the order it runs them.
var conformanceSuites = []string{"driver", "crash", "linearizability", "transactions"}

func runConformance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("conformance", "Runs the driver conformance suite and the runtime's crash-injection, linearizability and\n"+
		"transaction suites against a live backend (an emulator or a real account, with the usual\n"+
		"credentials), then prints a per-test table and a verdict. Every test gets fresh tables:\n"+
		"write {table} in the URL where their names go. Tables are dropped afterwards unless\n"+
		"-keep-tables is given (drivers that cannot drop say so).\n\n"+
		"Examples:\n"+
		"  ssfkit conformance -store 'sqlite:///tmp/conf.db?table={table}'\n"+
		"  ssfkit conformance -store 'postgres://user@db:5432/app?table={table}'\n"+
		"  ssfkit conformance -store 'dynamodb://{table}?region=eu-west-1&create=true'", stderr)
	storeURL := fs.String("store", "", "store URL containing "+tablePlaceholder+" (required)")
	suites := fs.String("suites", strings.Join(conformanceSuites, ","), "comma-separated suites to run: "+strings.Join(conformanceSuites, ", "))
	stride := fs.Int("stride", 8, "crash suites: crash at every Nth injection point (1 = all of them; slower)")
	schedules := fs.Int("schedules", 4, "crash suite: randomised multi-crash schedules")
	duration := fs.Duration("duration", 5*time.Second, "linearizability: how long the clients keep starting instances (at least 4 lifetimes, so the GC reclaims rows)")
	lifetime := fs.Duration("lifetime", 500*time.Millisecond, "linearizability: the execution lifetime bound (raise it for high-latency backends)")
	keep := fs.Bool("keep-tables", false, "leave the tables the tests created")
	verbose := fs.Bool("v", false, "print the log of every test, not only of failed ones")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *storeURL == "" {
		return &cliUsageError{err: errors.New("conformance: -store is required (see ssfkit help conformance)")}
	}
	if !strings.Contains(*storeURL, tablePlaceholder) {
		return &cliUsageError{err: fmt.Errorf("conformance: -store %q has no %s: write it where each test's fresh table name goes, e.g. sqlite:///tmp/conf.db?table=%s", redactStoreURL(*storeURL), tablePlaceholder, tablePlaceholder)}
	}
	selected, err := selectSuites(*suites)
	if err != nil {
		return &cliUsageError{err: err}
	}
	if *stride < 1 || *schedules < 0 || *lifetime <= 0 || *duration < 4**lifetime {
		return &cliUsageError{err: errors.New("conformance: -stride must be >= 1, -schedules >= 0, -lifetime positive and -duration at least 4 × -lifetime")}
	}

	tables, err := newTableMaker(ctx, *storeURL, *keep)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "conformance: %s on %s (tables %s*)\n", strings.Join(selected, ", "), tables.redacted, tables.prefix)
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
			run = func(t suite.T) { txtest.Run(t, tables.table, *stride) }
		}
		suite.RunStandalone(ctx, name, run, report)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	failed := printConformance(stdout, results, *verbose)
	if n := tables.undropped.Load(); n > 0 && !*keep {
		fmt.Fprintf(stdout, "\nnote: %d tables named %s* were left behind: this driver cannot drop tables\n", n, tables.prefix)
	}
	total := len(results)
	if failed > 0 {
		return fmt.Errorf("FAIL: %d of %d tests failed on %s (%v)", failed, total, tables.redacted, time.Since(start).Round(time.Second))
	}
	fmt.Fprintf(stdout, "\nPASS: all %d tests passed on %s (%v)\n", total, tables.redacted, time.Since(start).Round(time.Second))
	return nil
}

func selectSuites(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(conformanceSuites, s) {
			return nil, fmt.Errorf("conformance: unknown suite %q (known: %s)", s, strings.Join(conformanceSuites, ", "))
		}
		if !slices.Contains(out, s) {
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

// tableMaker opens fresh tables for the suites by putting a new name where the URL has
// {table}. Names are letters and digits only, which every backend accepts as a table name.
type tableMaker struct {
	ctx       context.Context
	url       string
	redacted  string
	prefix    string
	keep      bool
	n         atomic.Int64
	undropped atomic.Int64
}

func newTableMaker(ctx context.Context, url string, keep bool) (*tableMaker, error) {
	id, err := rand.Int(rand.Reader, big.NewInt(36*36*36*36*36))
	if err != nil {
		return nil, err
	}
	m := &tableMaker{ctx: ctx, url: url, redacted: redactStoreURL(url), prefix: "ssfk" + strings.ToLower(fmt.Sprintf("%05s", id.Text(36))) + "t", keep: keep}
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
	url := strings.ReplaceAll(m.url, tablePlaceholder, fmt.Sprintf("%s%d", m.prefix, m.n.Add(1)))
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

// redactStoreURL hides a password in a URL for printing, keeping the placeholder readable.
func redactStoreURL(raw string) string {
	u, err := store.ParseURL(strings.ReplaceAll(raw, tablePlaceholder, "TABLE"))
	if err != nil {
		return "(unparseable URL)"
	}
	return strings.ReplaceAll(u.Redacted(), "TABLE", tablePlaceholder)
}
