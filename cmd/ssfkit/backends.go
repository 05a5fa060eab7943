package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/bench"
	"github.com/ssfkit/ssfkit/internal/pgtest"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// localBackends are the backends `ssfkit bench backends` can start on this machine, each
// returning a store URL with store.TablePlaceholder.
func localBackends(tmpDir string) []bench.Backend {
	return []bench.Backend{
		{Name: "sqlite", URL: func() (string, error) {
			return "sqlite://" + filepath.Join(tmpDir, "bench.db") + "?table=" + store.TablePlaceholder, nil
		}},
		// A durable server (fsync on), as in production: commits cost what they cost there.
		{Name: "postgres", URL: func() (string, error) {
			base, err := pgtest.DurableBaseURL()
			return base + "?table=" + store.TablePlaceholder, err
		}},
		// The same server without store.Transactor: the portable path, to measure the
		// transactional one against.
		{Name: "postgres-portable", URL: func() (string, error) {
			base, err := pgtest.DurableBaseURL()
			return base + "?transactions=off&table=" + store.TablePlaceholder, err
		}},
		{Name: "azure-tables", URL: func() (string, error) {
			addr, err := testservers.Azurite.Get()
			if err != nil {
				return "", err
			}
			table := strings.Fields(addr)[0]
			return "aztables://" + url.UserPassword(testservers.AzuriteAccount, testservers.AzuriteKey).String() + "@" +
				store.TablePlaceholder + "?create=true&endpoint=" + url.QueryEscape(table), nil
		}},
		// moto serves one request at a time correctly (see internal/testtables/dynamo.go);
		// the benchmark issues one at a time. The AWS SDK reads moto's dummy credentials from the
		// environment.
		{Name: "dynamodb", URL: func() (string, error) {
			endpoint, err := testservers.Moto.Get()
			if err != nil {
				return "", err
			}
			for k, v := range testservers.MotoEnv {
				if err := os.Setenv(k, v); err != nil {
					return "", err
				}
			}
			return "dynamodb://" + store.TablePlaceholder + "?create=true&endpoint=" + url.QueryEscape(endpoint), nil
		}},
		{Name: "bigtable", URL: func() (string, error) {
			addr, err := testservers.Bigtable.Get()
			return "bigtable://ssfkit-bench/ssfkit-bench/" + store.TablePlaceholder + "?create=true&emulator=" + addr, err
		}},
		{Name: "firestore", URL: func() (string, error) {
			addr, err := testservers.Firestore.Get()
			return "firestore://ssfkit-bench/" + store.TablePlaceholder + "?emulator=" + addr, err
		}},
	}
}

func benchBackends(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tmpDir, err := os.MkdirTemp("", "ssfkit-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	all := localBackends(tmpDir)
	names := backendNames(all)
	fs := newFlagSet("bench backends", "Runs `bench ops` (short DAAL) on each backend in turn, starting its server on 127.0.0.1\n"+
		"(PostgreSQL; moto, Azurite, bttest and the Firestore emulator for the clouds), and prints\n"+
		"one Markdown table of raw vs exactly-once latencies (or JSON with --json), optionally with\n"+
		"a bar chart of the EO/raw ratios. Progress goes to stderr.", stderr)
	list := fs.String("backends", strings.Join(names, ","), "comma-separated backends: "+strings.Join(names, ", "))
	cfg := bench.BackendsConfig{}
	fs.IntVar(&cfg.Ops, "ops", 400, "measured operations per kind and backend, raw and exactly-once each")
	fs.IntVar(&cfg.Warmup, "warmup", 40, "unmeasured operations per kind, variant and backend first")
	fs.IntVar(&cfg.Block, "block", bench.DefaultBlock, "operations per block; raw and exactly-once blocks alternate")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a PNG bar chart of the EO/raw median ratios to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Backends, err = pickBackends("bench backends", all, *list); err != nil {
		return err
	}
	defer pgtest.Stop()
	defer testservers.StopAll()
	rep, err := bench.RunBackends(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench backends", rep, *plotPath, *out, *asJSON)
}

func benchLog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tmpDir, err := os.MkdirTemp("", "ssfkit-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	all := localBackends(tmpDir)
	names := backendNames(all)
	fs := newFlagSet("bench log", "Measures the shared log against direct table writes and reads of the same records on\n"+
		"each backend (starting its server on 127.0.0.1): append and read latency, and throughput\n"+
		"with concurrent writers, with and without batching. Markdown (or JSON with --json).", stderr)
	list := fs.String("backends", "sqlite,postgres", "comma-separated backends: "+strings.Join(names, ", "))
	cfg := bench.LogConfig{}
	fs.IntVar(&cfg.Records, "records", 400, "records per measurement")
	fs.IntVar(&cfg.Writers, "writers", 8, "concurrent writers in the throughput runs")
	fs.IntVar(&cfg.Batch, "batch", 10, "records per Append call in the batched run")
	fs.IntVar(&cfg.RecordBytes, "bytes", 256, "bytes per record")
	out := fs.String("out", "", "also write the Markdown report to `FILE`")
	plotPath := fs.String("plot", "", "write a PNG bar chart of throughput relative to direct writes to `FILE`")
	asJSON := fs.Bool("json", false, "print JSON instead of Markdown")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Records < 20 || cfg.Writers < 1 || cfg.Batch < 1 || cfg.RecordBytes < 1 {
		return &cliUsageError{err: fmt.Errorf("bench log: --records must be at least 20, --writers, --batch and --bytes at least 1")}
	}
	if cfg.Backends, err = pickBackends("bench log", all, *list); err != nil {
		return err
	}
	defer pgtest.Stop()
	defer testservers.StopAll()
	rep, err := bench.RunLog(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	return emitPlottedReport(stdout, stderr, "bench log", rep, *plotPath, *out, *asJSON)
}

// backendNames lists the backends' names, for --backends' help and errors.
func backendNames(all []bench.Backend) []string {
	names := make([]string, len(all))
	for i, b := range all {
		names[i] = b.Name
	}
	return names
}

// pickBackends returns the backends a comma-separated --backends list names.
func pickBackends(cmd string, all []bench.Backend, list string) ([]bench.Backend, error) {
	var picked []bench.Backend
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(all, func(b bench.Backend) bool { return b.Name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, &cliUsageError{err: fmt.Errorf("%s: unknown backend %q (known: %s)", cmd, name, strings.Join(backendNames(all), ", "))}
		}
		picked = append(picked, all[i])
	}
	return picked, nil
}
