// Command ssfkit is the one CLI of ssfkit: run the demo, a local development environment, and
// benchmarks.
package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/ssfkit/ssfkit/internal/deploy"
)

// command is one subcommand. run receives the arguments after the subcommand's name; it parses
// them with its own flag.FlagSet, so `-h` prints the subcommand's flags.
type command struct {
	name string
	// variants are the choices of the first argument (applications, actions, benchmarks), from
	// the tables that define them; nil when the command has none. optional: it may be left out.
	variants func() []string
	optional bool
	args     string // what follows the variant in the help: flags and operands
	summary  string
	run      func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands, in the order the help lists them; the help is generated from
// this table and the variants' own tables.
var commands = []command{
	{name: "demo", variants: apps.DemoNames, optional: true, args: "[flags]", run: runDemo,
		summary: "run an example on a temporary SQLite store while crashing executions at random, " +
			"then check its invariants: bank (the default) or travel; temporal runs the travel app as " +
			"workflows on an embedded Temporal server and SIGKILLs the worker process"},
	{name: "dev", args: "[flags]", run: runDev,
		summary: "serve an example's SSFs over HTTP on 127.0.0.1:8080 (--addr), on the SQLite database " +
			".ssfkit/dev.db (--store), with the collectors, a web console at /console/, provenance in " +
			".ssfkit/provenance.db, an embedded Temporal server on 127.0.0.1:7233 (--temporal-port; " +
			"--temporal off) kept in .ssfkit/temporal.db with its Web UI on 127.0.0.1:8233 (--ui-addr), and the " +
			"coordination service for ZooKeeper clients on 127.0.0.1:2181 (--zk-addr; --zk-addr off)"},
	{name: "worker", args: "[flags]", run: runWorker,
		summary: "host an example's SSFs as Temporal activities and its workflows on a Temporal cluster " +
			"(127.0.0.1:7233, e.g. dev's; --temporal), with the collectors"},
	{name: "bench", variants: benchNames, args: "[flags]", run: benchMain,
		summary: "benchmark exactly-once operations, DAAL length, travel transactions, the backends, " +
			"Temporal steps, the shared log, the coordination service and tracing (BENCHMARKS.md)"},
	{name: "build", args: "--cloud " + strings.Join(deploy.Clouds, "|") + " --app APP|--pkg PKG --out FILE", run: runBuild,
		summary: "build the artifact a cloud's ssf module deploys (a zip, or a container image for gcp)"},
	{name: "up", args: "--cloud " + cloudChoices() + " [flags]", run: runUp,
		summary: "stand an environment up and write its ssfkit config: local, a table per SSF of --app " +
			"in .ssfkit/dev.db; a cloud, terraform plan, the policies on the plan, apply"},
	{name: "down", args: "--cloud " + cloudChoices() + " [flags]", run: runDown,
		summary: "destroy what 'ssfkit up' stood up (a cloud: terraform destroy), then remove its config"},
	{name: "coord", variants: func() []string { return []string{"serve"} }, args: "--store URL [flags]", run: runCoord,
		summary: "serve the coordination service (ZooKeeper's model on a store table) to ZooKeeper clients " +
			"on 127.0.0.1:2181 (--addr); docs/coordination.md"},
	{name: "log", variants: logActionNames, args: "-store URL [flags]", run: runLog,
		summary: "list, read, trim and collect a shared log in a live store"},
	{name: "policy", variants: func() []string { return []string{"check"} }, args: "[flags] PLAN.json", run: runPolicy,
		summary: "run ssfkit's policies on a Terraform plan (conftest-compatible)"},
	{name: "instance", args: "-store URL | -config FILE -ssf NAME [flags] ID", run: runInstance,
		summary: "show one instance (an idempotency key) of an SSF: pending, done, given up, expired"},
	{name: "trace", variants: traceQueryNames, args: "[flags] OPERANDS", run: runTrace,
		summary: "ask the provenance the SSFs exported (docs/provenance.md): a request's tree, an item's history, " +
			"its state at a time, taint, or SQL"},
	{name: "conformance", args: "-store URL [-queue URL] [flags]", run: runConformance,
		summary: "run the driver and runtime suites against a live store or queue"},
	{name: "help", args: "[COMMAND [VARIANT]]", // handled by run
		summary: "show this help, or a command's flags ('ssfkit help demo temporal' is 'ssfkit demo temporal -h')"},
}

// cloudChoices are up's and down's --cloud values.
func cloudChoices() string { return strings.Join(append([]string{"local"}, deploy.Clouds...), "|") }

// usageLine is the command's synopsis in the help: name, variants, arguments.
func (c command) usageLine() string {
	parts := []string{"ssfkit", c.name}
	if c.variants != nil {
		v := strings.Join(c.variants(), "|")
		if c.optional {
			v = "[" + v + "]"
		}
		parts = append(parts, v)
	}
	if c.args != "" {
		parts = append(parts, c.args)
	}
	return strings.Join(parts, " ")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process, should a graceful stop hang
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}

// cliUsageError is a command-line mistake; it exits with status 2, as flag.ExitOnError does.
// printed says the message and usage were already shown (the flag package prints its own).
type cliUsageError struct {
	err     error
	printed bool
}

func (e *cliUsageError) Error() string { return e.err.Error() }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stdout)
		return nil
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		if len(rest) == 0 || rest[0] == "help" {
			printUsage(stdout)
			return nil
		}
		// `ssfkit help demo` is `ssfkit demo -h`, `ssfkit help demo temporal` is
		// `ssfkit demo temporal -h`.
		name, rest = rest[0], append(slices.Clone(rest[1:]), "-h")
	}
	for _, c := range commands {
		if c.name == name && c.run != nil {
			return c.run(ctx, rest, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "ssfkit: unknown command %q\n\n", name)
	printUsage(stderr)
	return &cliUsageError{err: fmt.Errorf("unknown command %q", name), printed: true}
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "ssfkit runs exactly-once stateful serverless functions.\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n%s", c.usageLine(), wrapText(c.summary, 6, 92))
	}
	fmt.Fprintf(w, "\nRun 'ssfkit help COMMAND [VARIANT]' for a command's flags.\n")
}

// wrapText breaks text into lines of at most limit columns, each indented, each ending in a
// newline.
func wrapText(text string, indent, limit int) string {
	var b strings.Builder
	width := 0
	for _, word := range strings.Fields(text) {
		switch {
		case width == 0:
		case width+1+len(word) > limit:
			b.WriteString("\n")
			width = 0
		default:
			b.WriteString(" ")
			width++
		}
		if width == 0 {
			b.WriteString(strings.Repeat(" ", indent))
			width = indent
		}
		b.WriteString(word)
		width += len(word)
	}
	b.WriteString("\n")
	return b.String()
}

// exitStatus reports err and returns the process's exit status: 0 for success and for -h,
// 2 for command-line mistakes, 1 for everything else.
func exitStatus(err error, stderr io.Writer) int {
	var usage *cliUsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintln(stderr, "ssfkit:", err)
		}
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "ssfkit: interrupted")
		return 1
	}
	fmt.Fprintln(stderr, "ssfkit:", err)
	return 1
}

// newFlagSet returns a subcommand's flag set, whose usage text starts with synopsis and goes,
// with parse errors, to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	return newFlagSetUsage(name, "ssfkit "+name+" [flags]", synopsis, stderr)
}

// newFlagSetUsage is newFlagSet with the usage line given.
func newFlagSetUsage(name, usage, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ssfkit "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", usage, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a subcommand's arguments, which must all be flags.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &cliUsageError{err: err, printed: true} // the flag package printed it with usage
	}
	if fs.NArg() > 0 {
		return &cliUsageError{err: fmt.Errorf("%s takes no arguments, got %q (flags go before any argument)", fs.Name(), fs.Args())}
	}
	return nil
}
