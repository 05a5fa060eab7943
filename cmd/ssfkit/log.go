package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// logActions are ssfkit log's actions, in the order the help lists them.
var logActions = []struct{ name, summary string }{
	{"colors", "list the tenant's colors with their tails"},
	{"read", "print a color's records from -from on (at most -limit)"},
	{"trim", "trim a color up to -upto (reads below fail; collect deletes them)"},
	{"collect", "run the log's collector on every tenant of the table (or -tenant's)"},
}

// logActionNames are the actions' names, for the help.
func logActionNames() []string {
	names := make([]string, len(logActions))
	for i, a := range logActions {
		names[i] = a.name
	}
	return names
}

// runLog inspects and maintains a shared log in a live store: what an operator needs, and the
// scheduled job that collects a log kept outside every SSF's table.
func runLog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var names []string
	for _, a := range logActions {
		names = append(names, fmt.Sprintf("  %-8s %s", a.name, a.summary))
	}
	synopsis := "Usage: ssfkit log ACTION -store URL [flags]\n\nActions:\n" + strings.Join(names, "\n") +
		"\n\nExamples:\n  ssfkit log colors -store 'sqlite:///tmp/app.db?table=log' -tenant wordcount\n" +
		"  ssfkit log read -store 'dynamodb://log?region=eu-west-1' -tenant wordcount -color job1.barrier\n" +
		"  ssfkit log collect -store 'dynamodb://log?region=eu-west-1'"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintln(stderr, synopsis)
		return nil
	}
	action := ""
	if len(args) > 0 {
		action = args[0]
	}
	known := false
	for _, a := range logActions {
		known = known || a.name == action
	}
	if !known {
		err := fmt.Errorf("log: unknown action %q", action)
		if action == "" || strings.HasPrefix(action, "-") {
			err = errors.New("log: give an action first")
		}
		fmt.Fprintf(stderr, "ssfkit %v\n\n%s\n", err, synopsis)
		return &cliUsageError{err: err, printed: true}
	}
	fs := newFlagSet("log "+action, "See ssfkit log -h for the actions.", stderr)
	storeURL := fs.String("store", "", "the store URL of the log's table")
	tenant := fs.String("tenant", "", "the tenant whose log to use (collect: default every tenant)")
	color := fs.String("color", "", "read, trim: the color")
	from := fs.Uint64("from", 1, "read: the first SN")
	limit := fs.Int("limit", 100, "read: at most this many records (0: no limit)")
	upTo := fs.Uint64("upto", 0, "trim: the last SN to trim")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *storeURL == "" {
		return &cliUsageError{err: fmt.Errorf("log %s: -store is required", action)}
	}
	needTenant := action != "collect"
	needColor := action == "read" || action == "trim"
	switch {
	case needTenant && *tenant == "":
		return &cliUsageError{err: fmt.Errorf("log %s: -tenant is required", action)}
	case needColor && *color == "":
		return &cliUsageError{err: fmt.Errorf("log %s: -color is required", action)}
	case action == "trim" && *upTo == 0:
		return &cliUsageError{err: errors.New("log trim: -upto is required (the last SN to trim)")}
	}
	tbl, err := store.Open(ctx, *storeURL)
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	defer tbl.Close()
	var l *sharedlog.Log
	if *tenant != "" {
		if l, err = sharedlog.New(tbl, *tenant, sharedlog.Options{}); err != nil {
			return &cliUsageError{err: fmt.Errorf("log %s: %w", action, err)}
		}
	}
	switch action {
	case "colors":
		colors, err := l.Colors(ctx)
		if err != nil {
			return err
		}
		for _, c := range colors {
			tail, err := l.CheckTail(ctx, c)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\ttail %d\n", c, tail)
		}
		if len(colors) == 0 {
			fmt.Fprintf(stdout, "tenant %s has no color in this table\n", *tenant)
		}
	case "read":
		tail, err := l.CheckTail(ctx, *color)
		if errors.Is(err, sharedlog.ErrNoColor) {
			return fmt.Errorf("log read: tenant %s has no color %q in this table (ssfkit log colors lists its colors)", *tenant, *color)
		}
		if err != nil {
			return fmt.Errorf("log read: %w", err)
		}
		first, n := *from, 0
		for ; *limit == 0 || n < *limit; n++ {
			rec, found, err := l.ReadNext(ctx, *color, *from)
			if err != nil {
				return err
			}
			if !found {
				break
			}
			fmt.Fprintf(stdout, "%d\t%s\n", rec.SN, printable(rec.Data))
			*from = rec.SN + 1
		}
		if n == 0 { // the color exists: say why nothing was printed, off stdout
			fmt.Fprintf(stderr, "log read: color %s has no record from SN %d on (its tail is %d)\n", *color, first, tail)
		}
	case "trim":
		if err := l.Trim(ctx, *color, *upTo); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "trimmed %s up to %d; `ssfkit log collect` (or the SSFs' garbage collectors) deletes the records\n", *color, *upTo)
	case "collect":
		var rep sharedlog.CollectReport
		if l == nil {
			rep, err = sharedlog.CollectTable(ctx, tbl, sharedlog.Options{})
		} else if rep, err = l.Collect(ctx); err == nil {
			rep.Tenants = 1
		}
		fmt.Fprintf(stdout, "collected %d tenants: %d records deleted, %d unfinished appends finished, %d append rows deleted\n",
			rep.Tenants, rep.RecordsDeleted, rep.Finished, rep.AppendsDeleted)
		return err
	}
	return nil
}

// printable shows a record's data as text when it is printable UTF-8, else as base64.
func printable(data []byte) string {
	if utf8.Valid(data) && strings.IndexFunc(string(data), func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return string(data)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(data)
}
