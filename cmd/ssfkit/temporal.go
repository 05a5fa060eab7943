package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal/devserver"
)

// temporalFlags say how a command reaches a Temporal cluster: a local one, a self-hosted
// cluster with TLS, or Temporal Cloud with an API key or mTLS.
type temporalFlags struct {
	address, namespace, taskQueue string
	tls                           bool
	tlsCert, tlsKey, tlsCA        string
	tlsServerName                 string
	apiKey                        string
	stickyTimeout                 time.Duration
}

func (f *temporalFlags) register(fs *flag.FlagSet, defaultAddress, addressUsage string) {
	fs.StringVar(&f.address, "temporal", defaultAddress, addressUsage)
	fs.StringVar(&f.namespace, "namespace", "default", "Temporal `namespace`")
	fs.StringVar(&f.taskQueue, "task-queue", ssftemporal.DefaultTaskQueue, "Temporal task `queue` the workflows and SSF activities run on")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (implied by --tls-cert, --tls-ca and --api-key)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "client certificate `FILE` (PEM) for mTLS, with --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "client private key `FILE` (PEM) for mTLS")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "CA certificate `FILE` (PEM) to verify the server with (default: the system's)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "server `name` to verify, if not the address's host")
	fs.StringVar(&f.apiKey, "api-key", "", "Temporal Cloud API `key` (default: $TEMPORAL_API_KEY)")
	fs.DurationVar(&f.stickyTimeout, "sticky-timeout", 5*time.Second, "how long a workflow task waits for this worker's cache before any worker takes it (Temporal's StickyScheduleToStartTimeout)")
}

// clientOptions turns the flags into client options, checking them first.
func (f *temporalFlags) clientOptions(logger *slog.Logger) (client.Options, error) {
	o := client.Options{HostPort: f.address, Namespace: f.namespace, Logger: sdklog.NewStructuredLogger(logger)}
	// Traces run from the workflow into its SSF activities (docs/observability.md); without
	// OTEL_* settings nothing records.
	tracing, err := ssftemporal.TracingInterceptor()
	if err != nil {
		return o, fmt.Errorf("Temporal's tracing interceptor: %w", err)
	}
	o.Interceptors = append(o.Interceptors, tracing)
	if _, _, err := net.SplitHostPort(f.address); err != nil || f.address == "" {
		return o, fmt.Errorf("--temporal %q: want the cluster's HOST:PORT, e.g. 127.0.0.1:%d", f.address, devTemporalPort)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return o, errors.New("--tls-cert and --tls-key go together (mTLS needs both)")
	}
	key := f.apiKey
	if key == "" {
		key = os.Getenv("TEMPORAL_API_KEY")
	}
	if !f.tls && f.tlsCert == "" && f.tlsCA == "" && key == "" {
		return o, nil
	}
	cfg := &tls.Config{ServerName: f.tlsServerName, MinVersion: tls.VersionTLS12}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return o, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.tlsCA)
		}
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return o, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	o.ConnectionOptions.TLS = cfg
	if key != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(key)
	}
	return o, nil
}

// dial connects to the cluster, failing with the address in the message if it is unreachable.
func (f *temporalFlags) dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	o, err := f.clientOptions(logger)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s (namespace %s): %w", f.address, f.namespace, err)
	}
	return c, nil
}

// startWorker hosts the app's SSFs as activities and the example's workflows on the task
// queue; Stop the worker to leave.
func startWorker(c client.Client, f *temporalFlags, app *apps.Hosted, ex apps.App) (worker.Worker, error) {
	w := worker.New(c, f.taskQueue, worker.Options{StickyScheduleToStartTimeout: f.stickyTimeout})
	ssftemporal.Register(w, app.Host.Runtimes()...)
	if ex.Workflows != nil {
		ex.Workflows(w)
	}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting the Temporal worker on task queue %s: %w", f.taskQueue, err)
	}
	return w, nil
}

// The --temporal values of dev that are not addresses.
const (
	temporalEmbedded = "embedded"
	temporalOff      = "off"
)

// connectTemporal connects dev to Temporal, starting the embedded server first if asked;
// closeAll disconnects and stops the server.
func connectTemporal(ctx context.Context, tf *temporalFlags, dbFile string, port int, stderr io.Writer) (c client.Client, closeAll func(), err error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopServer := func() {}
	if tf.address == temporalEmbedded {
		if err := os.MkdirAll(filepath.Dir(dbFile), 0o755); err != nil {
			return nil, nil, err
		}
		srv, err := devserver.Start(devserver.Options{DBFile: dbFile, Namespace: tf.namespace, Port: port, Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("embedded Temporal server: %w", err)
		}
		stopServer = srv.Stop
		tf.address = srv.Addr()
	}
	if c, err = tf.dial(ctx, logger); err != nil {
		stopServer()
		return nil, nil, err
	}
	return c, func() { c.Close(); stopServer() }, nil
}
