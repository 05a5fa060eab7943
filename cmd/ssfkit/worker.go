package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"
	"github.com/ssfkit/ssfkit/internal/telemetry"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

const workerSynopsis = `Hosts an example's SSFs as Temporal activities (exactly once however often
Temporal retries them) and its workflows, on a Temporal cluster: the one
'ssfkit dev' embeds, a self-hosted cluster, or Temporal Cloud. It runs the
intent and garbage collectors on timers too. Stop it with Ctrl-C; kill it at
any moment and start it again: Temporal retries the activities it was running.`

// defaultWorkerTemporal is the worker's default cluster: the frontend ssfkit dev embeds.
var defaultWorkerTemporal = fmt.Sprintf("127.0.0.1:%d", devTemporalPort)

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker", workerSynopsis, stderr)
	appName := fs.String("app", "travel", "the example to host: "+appChoices())
	storeFlag := fs.String("store", "", "store `URL` (as for dev; default: sqlite database .ssfkit/dev.db in the current directory)")
	var tf temporalFlags
	tf.register(fs, defaultWorkerTemporal, "Temporal frontend `address` (HOST:PORT), e.g. ssfkit dev's embedded server")
	icEvery := fs.Duration("ic-every", time.Second, "intent collector period (0 disables it)")
	gcEvery := fs.Duration("gc-every", 10*time.Second, "garbage collector period (0 disables it)")
	load := fs.Bool("load", true, "load the example's data at start (idempotent: fixed request ids)")
	verbose := fs.Bool("v", false, "log the Temporal SDK's info messages too")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	stopTelemetry, err := telemetry.Start(ctx, "ssfkit-worker")
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer stopTelemetry(context.WithoutCancel(ctx))
	ex, ok := apps.Lookup(*appName)
	if !ok {
		return &cliUsageError{err: fmt.Errorf("worker: --app %q: want %s", *appName, appChoices())}
	}
	if *icEvery < 0 || *gcEvery < 0 {
		return &cliUsageError{err: errors.New("worker: --ic-every and --gc-every must not be negative")}
	}
	if tf.address == temporalOff || tf.address == temporalEmbedded {
		return &cliUsageError{err: fmt.Errorf("worker: --temporal %s is only for dev: the worker needs a Temporal cluster's HOST:PORT (default %s, where ssfkit dev embeds one)", tf.address, defaultWorkerTemporal)}
	}
	if _, err := tf.clientOptions(slog.Default()); err != nil {
		return &cliUsageError{err: fmt.Errorf("worker: %w", err)}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	base, err := devStoreURL(*storeFlag)
	if err != nil {
		return err
	}
	tableURL, err := apps.TablePerSSF(base)
	if err != nil {
		return &cliUsageError{err: fmt.Errorf("worker: --store: %w", err)}
	}
	c, err := tf.dial(ctx, logger)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer c.Close()
	// The collectors keep an activity's logs while its workflow may still retry it.
	cfg := apps.DevConfig()
	cfg.Logger, cfg.Hold = logger, ssftemporal.HoldWhileOpen(c, apps.DevGCBound)
	app, err := apps.Open(ctx, ex.Handlers(), tableURL, cfg)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer app.Close()
	if ex.Load != nil && *load {
		if err := ex.Load(ctx, app.Host); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	w, err := startWorker(c, &tf, app, ex)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer w.Stop()

	colCtx, stopCollectors := context.WithCancel(ctx)
	var collectors sync.WaitGroup
	collectors.Go(func() { app.Host.RunCollectors(colCtx, *icEvery, *gcEvery, nil) })
	defer func() { stopCollectors(); collectors.Wait() }()

	fmt.Fprintf(stdout, "ssfkit worker: %s on %s, Temporal %s namespace %s task queue %s\n  SSFs (activities ssf.NAME): %s\n",
		ex.Title, base, tf.address, tf.namespace, tf.taskQueue, strings.Join(slices.Sorted(maps.Keys(app.Runtimes)), ", "))
	<-ctx.Done()
	fmt.Fprintln(stdout, "ssfkit worker: stopping")
	return nil
}
