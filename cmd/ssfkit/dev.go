package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/net/netutil"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/apps"
	"github.com/ssfkit/ssfkit/internal/console"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/internal/deploy"
	"github.com/ssfkit/ssfkit/internal/telemetry"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

const devSynopsis = `Hosts an example's SSFs and serves them over HTTP, with the intent and garbage
collectors on timers: the bank (teller, accounts, audit) or the travel reservation
app (frontend, order, hotel, flight and six more, its hotels, flights and users
loaded at start). Stop it with Ctrl-C.

What it starts and writes, and the flags that move it or turn it off:
  HTTP API   on 127.0.0.1:8080 (--addr)
  store      the SQLite database .ssfkit/dev.db, a table per SSF, kept across
             restarts (--store: another file, or mem:// for a throwaway run;
             --config: the stores 'ssfkit up' wrote)
  Temporal   an embedded Temporal server, its frontend on 127.0.0.1:7233
             (--temporal-port), its state in .ssfkit/temporal.db (--temporal-db),
             and a worker for the example's workflows and its SSFs as activities;
             --temporal off runs without Temporal, --temporal HOST:PORT uses that
             cluster instead of starting one
  ZooKeeper  the coordination service for ZooKeeper clients on 127.0.0.1:2181
             (--zk-addr; --zk-addr off turns it off), its state in the table
             zookeeper of the store; with --zk-blobs, large log entries in a
             bucket rather than split across rows`

// Runtime timing in dev: short enough that an abandoned request finishes within half a minute
// and logs are reclaimed within minutes, long enough for any request to the example. The
// intent collector waits a lifetime before relaunching, so it never duplicates a live
// execution (a config with a shorter relaunch delay is refused).
// devMaxConnections bounds the dev server's open connections.
const devMaxConnections = 256

// zkOff turns dev's ZooKeeper endpoint off; coordTable is the coordination service's table in
// dev's store (no example has an SSF of that name).
const (
	zkOff      = "off"
	coordTable = "zookeeper"
)

// devTemporalPort is the embedded Temporal server's default frontend port, Temporal's own.
const devTemporalPort = 7233

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", devSynopsis, stderr)
	appName := fs.String("app", apps.Default, "the example to host: "+appChoices())
	storeFlag := fs.String("store", "", "store `URL`: sqlite:///abs/path.db, or mem:// for a throwaway run; each SSF gets its own table (default: sqlite database .ssfkit/dev.db in the current directory)")
	configFile := fs.String("config", "", "an ssfkit config `file` ('ssfkit up' writes it): each SSF on the store it names, instead of --store")
	addr := fs.String("addr", "127.0.0.1:8080", "HTTP listen `address`")
	public := fs.Bool("public", false, "allow a non-loopback --addr or --zk-addr; neither has authentication")
	zkAddr := fs.String("zk-addr", coordDefaultAddr, "the coordination service's ZooKeeper client `address` ('off': none)")
	zkBlobs := fs.String("zk-blobs", "", "bucket `URL` for the coordination service's log entries too large for a row (default: split across rows), as 'ssfkit coord serve --blobs'")
	icEvery := fs.Duration("ic-every", time.Second, "intent collector period (0 disables it)")
	gcEvery := fs.Duration("gc-every", 10*time.Second, "garbage collector period (0 disables it)")
	var tf temporalFlags
	tf.register(fs, temporalEmbedded, "Temporal: '"+temporalEmbedded+"' starts a server in this process (state in --temporal-db, frontend on 127.0.0.1:--temporal-port) and a worker on it; 'off' runs without Temporal; HOST:PORT uses that cluster")
	temporalDB := fs.String("temporal-db", filepath.Join(".ssfkit", "temporal.db"), "the embedded Temporal server's SQLite `file` (created if missing, kept across restarts)")
	temporalPort := fs.Int("temporal-port", devTemporalPort, "the embedded Temporal server's frontend `port` on 127.0.0.1 (--temporal off: none)")
	captureFlag := fs.String("provenance", string(provenance.CaptureMetadata), "what the SSFs record of what they did (`level`): off, metadata (every invocation and data access, with digests of values) or full (the values too); docs/provenance.md")
	uiAddr := fs.String("ui-addr", "127.0.0.1:8233", "the Temporal Web UI's `address` ('off': none; only with Temporal)")
	provenanceDB := fs.String("provenance-db", "", "the SQLite `file` the garbage collector exports provenance to ('ssfkit trace' reads it; default: provenance.db beside the --store SQLite file or the --config file, else .ssfkit/provenance.db)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	capture, err := provenance.ParseCapture(*captureFlag)
	if err != nil {
		return &cliUsageError{err: fmt.Errorf("dev: --provenance: %w", err)}
	}
	if *provenanceDB == "" {
		*provenanceDB = defaultProvenanceDB(*storeFlag, *configFile)
	}
	stopTelemetry, err := telemetry.Start(ctx, "ssfkit-dev")
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer stopTelemetry(context.WithoutCancel(ctx))
	if err := checkListenAddr("dev", "--addr", *addr, *public); err != nil {
		return &cliUsageError{err: err}
	}
	if *zkAddr != zkOff {
		if err := checkListenAddr("dev", "--zk-addr", *zkAddr, *public); err != nil {
			return &cliUsageError{err: err}
		}
	} else if *zkBlobs != "" {
		return &cliUsageError{err: errors.New("dev: --zk-blobs is for the coordination service, which --zk-addr off turns off")}
	}
	if *uiAddr != "off" {
		if err := checkListenAddr("dev", "--ui-addr", *uiAddr, *public); err != nil {
			return &cliUsageError{err: err}
		}
	}
	if *icEvery < 0 || *gcEvery < 0 {
		return &cliUsageError{err: errors.New("dev: --ic-every and --gc-every must not be negative")}
	}
	ex, ok := apps.Lookup(*appName)
	if !ok {
		return &cliUsageError{err: fmt.Errorf("dev: --app %q: want %s", *appName, appChoices())}
	}
	place, err := devTables(*storeFlag, *configFile)
	if err != nil {
		return err
	}
	// Listen first: a port in use fails the command before anything starts.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("dev: %s is already in use (another ssfkit dev?); pass --addr 127.0.0.1:PORT to listen on another port: %w", *addr, syscall.EADDRINUSE)
		}
		return fmt.Errorf("dev: %w", err)
	}
	defer ln.Close()
	var zkLn net.Listener
	if *zkAddr != zkOff {
		if zkLn, err = listenZooKeeper("dev", "--zk-addr", *zkAddr, ", or --zk-addr off to run without it"); err != nil {
			return err
		}
		defer zkLn.Close()
	}

	cfg := apps.DevConfig()
	var temporalClient client.Client
	if tf.address != temporalOff {
		c, closeTemporal, err := connectTemporal(ctx, &tf, *temporalDB, *temporalPort, stderr)
		if err != nil {
			if tf.address == temporalEmbedded && errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("dev: the embedded Temporal server's port 127.0.0.1:%[1]d is already in use (another ssfkit dev, or a Temporal server?): "+
					"pass --temporal-port PORT to move it, --temporal 127.0.0.1:%[1]d to use the server there, or --temporal off to run without Temporal: %[2]w", *temporalPort, syscall.EADDRINUSE)
			}
			return fmt.Errorf("dev: %w", err)
		}
		defer closeTemporal()
		temporalClient = c
	}
	provenanceLine := "off"
	var sink provenance.Sink
	if capture != provenance.CaptureOff {
		if err := os.MkdirAll(filepath.Dir(*provenanceDB), 0o755); err != nil {
			return fmt.Errorf("dev: --provenance-db: %w", err)
		}
		abs, err := filepath.Abs(*provenanceDB)
		if err != nil {
			return fmt.Errorf("dev: --provenance-db: %w", err)
		}
		if sink, err = provenance.Open(ctx, "sqlite://"+filepath.ToSlash(abs)); err != nil {
			return fmt.Errorf("dev: --provenance-db: %w", err)
		}
		defer sink.Close()
		provenanceLine = fmt.Sprintf("%s, exported to %s T after each instance finishes\n              inspect: ssfkit trace request ID --db %s", capture, *provenanceDB, *provenanceDB)
	}
	tune := func(name string, c *ssf.Config) {
		if place.tune != nil {
			place.tune(name, c)
		}
		c.Provenance, c.ProvenanceSink = capture, sink
		if temporalClient != nil {
			// Keep an activity's instance while its workflow may retry it, and T after.
			c.Hold = ssftemporal.HoldWhileOpen(temporalClient, max(c.GCBound, 2*c.Lifetime))
		}
	}
	app, err := apps.OpenTuned(ctx, ex.Handlers(), place.tableURL, cfg, tune)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer app.Close()
	if ex.Load != nil {
		if err := ex.Load(ctx, app.Host); err != nil {
			return fmt.Errorf("dev: %w", err)
		}
	}
	zkLine := "off"
	var coordService *coord.Service
	if zkLn != nil {
		zk, err := coordserve.Start(ctx, place.coordURL, *zkBlobs, zkLn, coord.Config{}, func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) })
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer zk.Close()
		coordService = zk.Service()
		zkLine = fmt.Sprintf("%s, ZooKeeper's protocol (zkCli.sh -server %[1]s), on %s", zkLn.Addr(), place.coordDescribe)
		if *zkBlobs != "" {
			zkLine += ", large entries in " + coordblob.Redacted(*zkBlobs)
		}
	}
	// A dev server may be left running: slow or idle clients cannot hold connections for
	// ever, nor open without bound.
	ln = netutil.LimitListener(ln, devMaxConnections)
	longest := time.Duration(0)
	for _, rt := range app.Runtimes {
		longest = max(longest, rt.Config().Lifetime)
	}
	uiLine, uiURL := "off", ""
	if temporalClient != nil && *uiAddr != "off" {
		stopUI, err := console.StartTemporalUI(*uiAddr, tf.address, tf.namespace)
		if err != nil {
			return fmt.Errorf("dev: the Temporal UI on %s (--ui-addr; --ui-addr off for none): %w", *uiAddr, err)
		}
		defer stopUI()
		uiURL = "http://" + *uiAddr
		uiLine = uiURL + "/namespaces/" + tf.namespace + "/workflows"
	}
	mux := http.NewServeMux()
	mux.Handle("/", logRequests(stdout, local.HTTPHandler(app.Host)))
	mux.Handle(console.Prefix, console.Handler(console.Config{Title: ex.Title, Runtimes: app.Runtimes, ProvenanceDB: provenancePath(capture, *provenanceDB),
		Coord: coordService, TemporalUI: uiURL}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      longest + 30*time.Second, // a request may run its instance for a lifetime
		IdleTimeout:       time.Minute,
	}

	colCtx, stopCollectors := context.WithCancel(ctx)
	var collectors sync.WaitGroup
	collectors.Go(func() { app.Host.RunCollectors(colCtx, *icEvery, *gcEvery, nil) })
	defer func() { stopCollectors(); collectors.Wait() }()

	temporalLine := "off"
	if temporalClient != nil {
		w, err := startWorker(temporalClient, &tf, app, ex)
		if err != nil {
			return fmt.Errorf("dev: %w", err)
		}
		defer w.Stop()
		temporalLine = temporalBannerLine(&tf, ex)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	printDevBanner(stdout, ex, place, "http://"+ln.Addr().String(), app.Runtimes, *icEvery, *gcEvery, temporalLine, zkLine, provenanceLine, uiLine)

	select {
	case err := <-served:
		return fmt.Errorf("dev: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), longest)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("dev: shutdown: %w", err)
	}
	return nil
}

// temporalBannerLine is the banner's Temporal line: where the worker runs and, for an example
// with workflows, how to list them (the bank has none: its SSFs are only activities).
func temporalBannerLine(tf *temporalFlags, ex apps.App) string {
	line := fmt.Sprintf("%s, namespace %s, task queue %s", tf.address, tf.namespace, tf.taskQueue)
	if ex.Workflows == nil {
		return line + fmt.Sprintf("\n              the %s example has no workflows: its SSFs are activities (ssf.NAME)\n"+
			"              for workflows of yours; ssfkit dev --app travel runs some", ex.Name)
	}
	return line + "\n              inspect: temporal workflow list --address " + tf.address
}

// checkListenAddr refuses addresses reachable from other machines unless public is set: dev's
// API invokes functions and shows their state without authentication, and a ZooKeeper
// endpoint's nodes are as open as their ACLs. cmd and flagName name the command and flag in errors.
func checkListenAddr(cmd, flagName, addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %s %q: %v (want HOST:PORT, e.g. 127.0.0.1:8080)", cmd, flagName, addr, err)
	}
	if public {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	what := "host " + host
	if host == "" {
		what = "every interface"
	}
	return fmt.Errorf("%s: %s %q listens on %s, not a loopback address; it has no authentication, so pass --public to expose it", cmd, flagName, addr, what)
}

// devPlacement is where dev puts each SSF, and how it runs it.
type devPlacement struct {
	describe string                                // for the banner
	tableURL func(ssfName string) (string, error)  // each SSF's table
	tune     func(ssfName string, cfg *ssf.Config) // a config file's timings; nil: dev's
	// overrides says, for the banner, what dev does differently from the config file and why.
	overrides string
	// coordURL is the coordination service's table; coordDescribe says where it is.
	coordURL, coordDescribe string
}

// devTables returns where each SSF's table is: the stores of the config file when one is
// given, with its lifetime, T and relaunch delay, else a table per SSF in the store of --store.
func devTables(storeFlag, configFile string) (devPlacement, error) {
	if configFile != "" {
		if storeFlag != "" {
			return devPlacement{}, &cliUsageError{err: errors.New("dev: give --store or --config, not both")}
		}
		cfg, err := deploy.Load(configFile)
		if err != nil {
			return devPlacement{}, fmt.Errorf("dev: --config: %w", err)
		}
		seconds := func(n int, def time.Duration) time.Duration {
			if n == 0 {
				return def
			}
			return time.Duration(n) * time.Second
		}
		return devPlacement{
			describe: fmt.Sprintf("config %s (%s, environment %s)", configFile, cfg.Cloud, cfg.Environment),
			tableURL: func(name string) (string, error) {
				s, ok := cfg.SSFs[name]
				if !ok {
					return "", fmt.Errorf("%s has no SSF %s", configFile, name)
				}
				return s.Store, nil
			},
			tune: func(name string, c *ssf.Config) {
				s := cfg.SSFs[name]
				c.Lifetime = seconds(s.LifetimeSeconds, ssf.DefaultLifetime)
				c.GCBound = seconds(s.GCBoundSeconds, 0)
				c.RelaunchDelay = seconds(s.RelaunchDelaySeconds, ssf.DefaultRelaunchDelay)
			},
			overrides: "asynchronous starts and relaunches run in this process, not on the config's queues:\n" +
				"              the deployed functions consume those, and dev must not take their messages",
			// A config names no coordination table; dev's stays in memory rather than on a cloud.
			coordURL: "mem://", coordDescribe: "mem:// (a config names no coordination table)",
		}, nil
	}
	base, err := devStoreURL(storeFlag)
	if err != nil {
		return devPlacement{}, err
	}
	tableURL, err := apps.TablePerSSF(base)
	if err != nil {
		return devPlacement{}, &cliUsageError{err: fmt.Errorf("dev: --store: %w", err)}
	}
	coordURL, err := tableURL(coordTable)
	if err != nil {
		return devPlacement{}, fmt.Errorf("dev: --store: %w", err)
	}
	return devPlacement{describe: base, tableURL: tableURL, coordURL: coordURL, coordDescribe: "table " + coordTable + " of the store"}, nil
}

// devStoreURL returns the store URL from --store, defaulting to .ssfkit/dev.db under the
// current directory; a bare file path is taken as a SQLite database.
func devStoreURL(flagValue string) (string, error) {
	if strings.Contains(flagValue, "://") {
		return flagValue, nil
	}
	path := flagValue
	if path == "" {
		path = filepath.Join(".ssfkit", "dev.db")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("dev: --store %s: %w", path, err)
	}
	if flagValue == "" {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return "", fmt.Errorf("dev: %w", err)
		}
	}
	return apps.SQLiteURL(abs), nil
}

// timings describes the runtimes' lifetime, T and key retention, for the banner: one value
// each when all SSFs agree, else each SSF's.
func timings(runtimes map[string]*ssf.Runtime) string {
	seen := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(runtimes)) {
		c := runtimes[name].Config()
		t := fmt.Sprintf("logs are kept %v after an instance finishes, which may run %v;\n              answers to keys are kept %v", c.GCBound, c.Lifetime, c.KeyRetention)
		seen[t] = append(seen[t], name)
	}
	if len(seen) == 1 {
		for t := range seen {
			return t
		}
	}
	var lines []string
	for _, t := range slices.Sorted(maps.Keys(seen)) {
		lines = append(lines, strings.Join(seen[t], ", ")+": "+t)
	}
	return strings.Join(lines, "\n              ")
}

func printDevBanner(w io.Writer, ex apps.App, place devPlacement, base string, runtimes map[string]*ssf.Runtime, icEvery, gcEvery time.Duration, temporal, zk, prov, ui string) {
	every := func(d time.Duration) string {
		if d == 0 {
			return "off"
		}
		return "every " + d.String()
	}
	overrides := ""
	if place.overrides != "" {
		overrides = "\n  overrides   " + place.overrides
	}
	// The SSFs' line ends with " (a table each)": 15 columns.
	fmt.Fprintf(w, `ssfkit dev: %[8]s, exactly-once

  store       %[1]s
  SSFs        %[3]s (a table each)
  collectors  intents %[4]s, garbage %[5]s
              %[6]s%[7]s
  Temporal    %[10]s
  ZooKeeper   %[11]s
  provenance  %[12]s
  listening   %[2]s
  console     %[2]s/console/
  Temporal UI %[13]s
  API         POST /v1/ssf/{name}                 invoke; JSON in and out
              GET  /v1/ssf/{name}/instances/{id}  status and result
              GET  /v1/ssf/{name}/items           current state
              GET  /healthz

Try:
%[9]s
Repeat a request with the same Idempotency-Key: it is never applied twice. Its answer
is replayed (marked Idempotent-Replayed: true) while it is kept; after that the key is
refused as expired.
Press Ctrl-C to stop.

`, place.describe, base, apps.WrapJoin(slices.Sorted(maps.Keys(runtimes)), 14, 64), every(icEvery), every(gcEvery), timings(runtimes), overrides, ex.Title, ex.Try(base), temporal, zk, prov, ui)
}

// logRequests writes one line per request, so the developer sees the traffic.
func logRequests(w io.Writer, next http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: rw, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		mu.Lock()
		defer mu.Unlock()
		key := ""
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			key = " key=" + logSafe(k)
		}
		fmt.Fprintf(w, "%s %s %s %d %v%s\n", start.Format("15:04:05"), logSafe(r.Method), logSafe(r.URL.Path), sw.status, time.Since(start).Round(10*time.Microsecond), key)
	})
}

// logSafe is s as one log word: quoted (Go syntax, so no newline, control character or
// terminal escape reaches the terminal) when it has anything but printable ASCII other than
// spaces and quotes, as is otherwise.
func logSafe(s string) string {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || c == '"' {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// defaultProvenanceDB keeps provenance beside the state it describes: next to the --store SQLite
// file or the --config file, else in .ssfkit.
func defaultProvenanceDB(storeFlag, configFile string) string {
	if configFile != "" {
		return filepath.Join(filepath.Dir(configFile), "provenance.db")
	}
	if u, err := store.ParseURL(storeFlag); err == nil && u.Scheme == "sqlite" && u.Path != "" {
		return filepath.Join(filepath.Dir(u.Path), "provenance.db")
	}
	return filepath.Join(".ssfkit", "provenance.db")
}

// provenancePath is the provenance database the console reads, "" when capture is off.
func provenancePath(capture provenance.Capture, db string) string {
	if capture == provenance.CaptureOff {
		return ""
	}
	return db
}
