package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ssfkit/ssfkit/internal/provquery"
)

// traceQueries are ssfkit trace's questions, in the order the help lists them.
var traceQueries = []struct{ name, operands, summary string }{
	{"request", "ID", "the tree of the request whose first instance is ID: instances, steps, calls, transactions, timings"},
	{"item", "SSF TABLE/KEY", "every version of an item: who wrote it, who read it"},
	{"at", "SSF TABLE/KEY TIME", "the version of an item current at TIME (RFC 3339, or unix nanoseconds)"},
	{"taint", "ID | SSF:TABLE/KEY@VERSION", "every instance and item version downstream of an instance or a write, transitively"},
	{"sql", "QUERY", "run a read-only SQL query on the provenance tables (docs/provenance.md)"},
	{"check", "", "check the database's invariants: each version written once, every version read was written"},
}

func traceQueryNames() []string {
	names := make([]string, len(traceQueries))
	for i, q := range traceQueries {
		names[i] = q.name
	}
	return names
}

// runTrace answers questions about what SSFs did, from the provenance their garbage collectors
// exported (an instance appears T after it finished).
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var lines []string
	for _, q := range traceQueries {
		lines = append(lines, fmt.Sprintf("  %-8s %-27s %s", q.name, q.operands, q.summary))
	}
	synopsis := "Usage: ssfkit trace QUERY [flags] OPERANDS\n\nQueries:\n" + strings.Join(lines, "\n") +
		"\n\nThe database is the one `ssfkit dev` exports to (--provenance-db), or a copy of a cloud sink's.\n" +
		"\nExamples:\n  ssfkit trace request t-1\n  ssfkit trace item accounts balances/alice\n" +
		"  ssfkit trace at accounts balances/alice 2026-11-26T14:05:00Z\n  ssfkit trace taint accounts:balances/alice@3\n" +
		"  ssfkit trace sql \"SELECT ssf, outcome, count(*) FROM invocations GROUP BY 1, 2\""
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stderr, synopsis)
		return nil
	}
	query := ""
	if len(args) > 0 {
		query = args[0]
	}
	operands := -1
	for _, q := range traceQueries {
		if q.name == query {
			operands = len(strings.Fields(strings.NewReplacer(" | ", "|").Replace(q.operands)))
		}
	}
	if operands < 0 {
		err := fmt.Errorf("trace: unknown query %q", query)
		if query == "" || strings.HasPrefix(query, "-") {
			err = errors.New("trace: give a query first")
		}
		fmt.Fprintf(stderr, "ssfkit %v\n\n%s\n", err, synopsis)
		return &cliUsageError{err: err, printed: true}
	}
	fs := newFlagSetUsage("trace "+query, "ssfkit trace "+query+" [flags] OPERANDS", "See ssfkit trace -h for the queries.", stderr)
	dbPath := fs.String("db", filepath.Join(".ssfkit", "provenance.db"), "the provenance database `file`")
	asJSON := fs.Bool("json", false, "print the answer as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliUsageError{err: err, printed: true}
	}
	if fs.NArg() != operands {
		return &cliUsageError{err: fmt.Errorf("trace %s: want %d operands after the flags, got %q", query, operands, fs.Args())}
	}
	db, err := provquery.Open(ctx, *dbPath)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer db.Close()
	out := func(v any, text func(io.Writer)) error {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		text(stdout)
		return nil
	}
	switch query {
	case "request":
		n, err := provquery.Tree(ctx, db, fs.Arg(0))
		if err != nil {
			return fmt.Errorf("trace request: %w", err)
		}
		return out(n, func(w io.Writer) { printTree(w, n, "") })
	case "item":
		ssfName, table, key, err := itemOperand(fs.Arg(0), fs.Arg(1))
		if err != nil {
			return err
		}
		h, err := provquery.History(ctx, db, ssfName, table, key)
		if err != nil {
			return fmt.Errorf("trace item: %w", err)
		}
		return out(h, func(w io.Writer) { printHistory(w, h) })
	case "at":
		ssfName, table, key, err := itemOperand(fs.Arg(0), fs.Arg(1))
		if err != nil {
			return err
		}
		at, err := parseTime(fs.Arg(2))
		if err != nil {
			return &cliUsageError{err: fmt.Errorf("trace at: %w", err)}
		}
		v, ok, err := provquery.StateAt(ctx, db, ssfName, table, key, at)
		if err != nil {
			return fmt.Errorf("trace at: %w", err)
		}
		if !ok {
			return fmt.Errorf("trace at: %w: no exported write of %s/%s (SSF %s) at or before %s", provquery.ErrNotFound, table, key, ssfName, at.UTC().Format(time.RFC3339Nano))
		}
		return out(v, func(w io.Writer) {
			fmt.Fprintf(w, "%s/%s at %s: version %d, written by %s (step %d) at %s\n", table, key, at.UTC().Format(time.RFC3339Nano),
				v.Version, v.Writer, v.Step, v.At.UTC().Format(time.RFC3339Nano))
			printValue(w, "  ", v.Value, v.Digest)
		})
	case "taint":
		t, err := taint(ctx, db, fs.Arg(0))
		if err != nil {
			return err
		}
		return out(t, func(w io.Writer) {
			fmt.Fprintf(w, "%d instances and %d item versions downstream of %s\n", len(t.Instances), len(t.Items), fs.Arg(0))
			for _, in := range t.Instances {
				fmt.Fprintf(w, "  instance %s\n", in)
			}
			for _, it := range t.Items {
				fmt.Fprintf(w, "  item     %s\n", it)
			}
		})
	case "sql":
		return runSQL(ctx, db, fs.Arg(0), stdout)
	default: // check
		if err := provquery.Check(ctx, db); err != nil {
			return fmt.Errorf("trace check: %w", err)
		}
		fmt.Fprintln(stdout, "ok: every version was written once, and every version read was written")
		return nil
	}
}

func itemOperand(ssfName, item string) (string, string, string, error) {
	table, key, ok := strings.Cut(item, "/")
	if !ok || table == "" || key == "" {
		return "", "", "", &cliUsageError{err: fmt.Errorf("trace: item %q: want TABLE/KEY", item)}
	}
	return ssfName, table, key, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(0, n), nil
	}
	return time.Time{}, fmt.Errorf("time %q is neither RFC 3339 (2026-11-26T14:05:00Z) nor unix nanoseconds", s)
}

// taint parses a seed: an instance id, or SSF:TABLE/KEY@VERSION.
func taint(ctx context.Context, db *sql.DB, seed string) (provquery.Tainted, error) {
	ssfName, rest, isItem := strings.Cut(seed, ":")
	if !isItem {
		t, err := provquery.TaintFromInstance(ctx, db, seed)
		if err != nil {
			return t, fmt.Errorf("trace taint: %w", err)
		}
		return t, nil
	}
	item, version, ok := strings.Cut(rest, "@")
	table, key, ok2 := strings.Cut(item, "/")
	v, err := strconv.ParseInt(version, 10, 64)
	if !ok || !ok2 || err != nil || v < 1 {
		return provquery.Tainted{}, &cliUsageError{err: fmt.Errorf("trace taint: %q: want an instance id or SSF:TABLE/KEY@VERSION (a version from 'ssfkit trace item')", seed)}
	}
	t, err := provquery.TaintFromWrite(ctx, db, provquery.Item{SSF: ssfName, Table: table, Key: key, Version: v})
	if err != nil {
		return t, fmt.Errorf("trace taint: %w", err)
	}
	return t, nil
}

func printTree(w io.Writer, n *provquery.Node, indent string) {
	took := n.Finished.Sub(n.Started)
	fmt.Fprintf(w, "%s%s %s  %s  %s (%v)", indent, n.SSF, n.ID, n.Outcome, n.Started.UTC().Format(time.RFC3339Nano), took.Round(time.Microsecond))
	for _, kv := range [][2]string{{"error", n.Error}, {"tx", n.TxID}, {"ends tx", n.EndsTx}, {"builtin", n.Builtin},
		{"workflow", n.WorkflowID}, {"run", n.RunID}, {"trace", n.TraceID}} {
		if kv[1] != "" {
			fmt.Fprintf(w, "  %s=%s", kv[0], kv[1])
		}
	}
	fmt.Fprintln(w)
	children := map[string]*provquery.Node{}
	for _, c := range n.Children {
		children[c.ID] = c
	}
	for _, s := range n.Steps {
		at := "+" + s.At.Sub(n.Started).Round(time.Microsecond).String()
		switch s.Kind {
		case "call":
			fmt.Fprintf(w, "%s  step %-3d %-12s call %s\n", indent, s.Step, at, s.Callee)
			if c := children[s.CalleeID]; c != nil {
				printTree(w, c, indent+"    ")
			} else {
				fmt.Fprintf(w, "%s    %s %s: not exported yet\n", indent, s.Callee, s.CalleeID)
			}
		case "sql", "sql-query":
			outcome := "committed"
			switch {
			case !s.Applied:
				outcome = "failed, rolled back"
			case s.Kind == "sql-query":
				outcome = "read only"
			}
			fmt.Fprintf(w, "%s  step %-3d %-12s %s (%s, result %s)\n", indent, s.Step, at, s.Kind, outcome, s.Digest)
		default:
			fmt.Fprintf(w, "%s  step %-3d %-12s %-5s %s/%s%s\n", indent, s.Step, at, s.Kind, s.Table, s.Key, versionNote(s))
		}
	}
}

func versionNote(s provquery.Step) string {
	note := ""
	switch {
	case s.Shadow:
		note = " (the transaction's copy)"
	case s.Version != nil:
		note = "@" + strconv.FormatInt(*s.Version, 10)
	}
	if s.Kind == "write" && !s.Applied {
		note += " condition failed"
	}
	return note
}

func printHistory(w io.Writer, h []provquery.Version) {
	for _, v := range h {
		if v.Writer.ID == "" {
			fmt.Fprintf(w, "version %d: no write exported (the item's state before any, or a writer not exported yet)\n", v.Version)
		} else {
			fmt.Fprintf(w, "version %d: written by %s (step %d) at %s\n", v.Version, v.Writer, v.Step, v.At.UTC().Format(time.RFC3339Nano))
			printValue(w, "  ", v.Value, v.Digest)
		}
		for _, r := range v.Readers {
			what := "read by"
			if r.Write {
				what = "condition failed for"
			}
			fmt.Fprintf(w, "  %s %s (step %d) at %s\n", what, r.Instance, r.Step, r.At.UTC().Format(time.RFC3339Nano))
		}
	}
}

func printValue(w io.Writer, indent string, value []byte, digest string) {
	if value != nil {
		fmt.Fprintf(w, "%svalue %s\n", indent, value)
	} else if digest != "" {
		fmt.Fprintf(w, "%sdigest %s (the SSF captures metadata, not values)\n", indent, digest)
	}
}

// runSQL prints a query's rows tab-separated under their column names.
func runSQL(ctx context.Context, db *sql.DB, query string, stdout io.Writer) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("trace sql: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(cols))
		for i, v := range vals {
			switch x := v.(type) {
			case nil:
				cells[i] = "NULL"
			case []byte:
				cells[i] = string(x)
			default:
				cells[i] = fmt.Sprint(x)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("trace sql: %w", err)
	}
	return tw.Flush()
}
