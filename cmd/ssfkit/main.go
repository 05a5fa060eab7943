// Command ssfkit is the one CLI of ssfkit: run the demo, a local development environment, and
// benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run receives the arguments after the subcommand's name; it parses
// them with its own flag.FlagSet, so `-h` prints the subcommand's flags.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"demo", "run the bank demo, or 'demo travel', on embedded SQLite with crashes injected", runDemo},
	{"dev", "serve an example's SSFs over HTTP on embedded SQLite, with collectors", runDev},
	{"worker", "host an example's SSFs and workflows on a Temporal cluster, with collectors", runWorker},
	{"bench", "benchmark exactly-once operations, DAAL length, travel transactions", func(ctx context.Context, args []string, _, _ io.Writer) error {
		return runBench(ctx, args)
	}},
	{"build", "build the artifact a cloud's ssf module deploys: ssfkit build --cloud aws --app bank --out bank.zip", runBuild},
	{"up", "stand an environment up and write its ssfkit config: ssfkit up --cloud local|aws|azure|gcp", runUp},
	{"down", "destroy what ssfkit up stood up: ssfkit down --cloud local|aws|azure|gcp", runDown},
	{"log", "inspect, trim and collect a shared log in a live store: ssfkit log colors -store URL -tenant T", runLog},
	{"policy", "run ssfkit's policies on a Terraform plan (conftest-compatible): ssfkit policy check PLAN.json", runPolicy},
	{"instance", "show one instance (an idempotency key) of an SSF: pending, done, given up, expired: ssfkit instance -store URL ID", runInstance},
	{"conformance", "run the driver and runtime suites against a live store: ssfkit conformance -store URL", runConformance},
	{"help", "show this help, or a command's flags: ssfkit help COMMAND", nil}, // handled by run
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
		// `ssfkit help demo` is `ssfkit demo -h`.
		name, rest = rest[0], []string{"-h"}
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
	fmt.Fprintf(w, "ssfkit runs exactly-once stateful serverless functions.\n\nUsage:\n  ssfkit COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'ssfkit help COMMAND' for a command's flags.\n")
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
	fs := flag.NewFlagSet("ssfkit "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ssfkit %s [flags]\n\n%s\n\nFlags:\n", name, synopsis)
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
