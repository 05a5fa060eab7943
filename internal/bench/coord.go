package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue" // the serverless targets' wake-ups
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// Defaults of `ssfkit bench coord`: ~15 s on a loaded 2-core machine for ZooKeeper, mem and
// SQLite (a durable PostgreSQL adds ~40 s).
const (
	DefaultCoordOps           = 1000
	DefaultCoordWarmup        = 200
	DefaultCoordBlock         = 50
	DefaultCoordClients       = 8
	DefaultCoordThroughputOps = 6000
	DefaultCoordDataBytes     = 128
	DefaultCoordTick          = time.Minute
)

// ZooKeeperTarget is the name of the real ZooKeeper server in a CoordReport.
const ZooKeeperTarget = "zookeeper"

// The operations `bench coord` times, in its report's order.
var CoordOps = []string{"create", "get", "set", "getChildren", "exists", "watch"}

// CoordConfig configures RunCoord.
type CoordConfig struct {
	// Stores are the stores ssfkit's endpoint runs on, one target each (store.TablePlaceholder
	// where the table's name goes).
	Stores []Backend `json:"-"`
	// Serverless are the stores the serverless path runs on, one target each: `ssfkit coord
	// proxy` with its writes decided by a writer woken through an in-process queue (so the
	// cloud queue's own latency is left out and named in the report).
	Serverless []Backend `json:"-"`
	// ZooKeeper returns a real ZooKeeper server's HOST:PORT; it is measured in the same run.
	ZooKeeper func() (string, error) `json:"-"`
	// Ops is the measured operations per kind and target, after Warmup unmeasured ones; targets
	// take turns in blocks of Block operations.
	Ops, Warmup, Block int
	// Clients is the number of concurrent clients (one session each) in the throughput runs,
	// which do ThroughputOps operations per kind and target, in 3 rounds taking turns.
	Clients, ThroughputOps int
	// DataBytes is the size of the data created and set.
	DataBytes int
	// Tick is the coordination service's tick (log tail and expirer). Long by default so the
	// store requests counted per operation are the operation's own; the idle cost of the tick
	// is 1 log read and 1 session scan per tick per server.
	Tick time.Duration
}

// CoordReport compares ssfkit's ZooKeeper endpoint on each store with a real ZooKeeper server,
// all measured in one run, taking turns in blocks.
type CoordReport struct {
	Machine    Machine            `json:"machine"`
	Started    time.Time          `json:"started"`
	Seconds    float64            `json:"seconds"`
	Config     CoordSettings      `json:"config"`
	Targets    []string           `json:"targets"`
	Ops        []CoordOpResult    `json:"ops"`
	Throughput []CoordThroughput  `json:"throughput"`
	Stages     []CoordStageResult `json:"write_stages"`
}

// CoordSettings records how the report was measured.
type CoordSettings struct {
	Ops           int     `json:"ops"`
	Warmup        int     `json:"warmup"`
	Block         int     `json:"block"`
	Clients       int     `json:"clients"`
	ThroughputOps int     `json:"throughput_ops"`
	DataBytes     int     `json:"data_bytes"`
	TickSeconds   float64 `json:"tick_seconds"`
}

// CoordOpResult is one operation's latency on every target.
type CoordOpResult struct {
	Op      string          `json:"op"`
	Targets []CoordOpTarget `json:"targets"`
}

// CoordOpTarget is one operation's latency on one target, its ratio to ZooKeeper's (measured
// side by side), and for ssfkit the store requests it made.
type CoordOpTarget struct {
	Target      string    `json:"target"`
	Latency     Summary   `json:"latency"`
	RatioMedian float64   `json:"ratio_median,omitempty"` // target / zookeeper
	RatioP99    float64   `json:"ratio_p99,omitempty"`
	Store       *StoreOps `json:"store,omitempty"`
	// StoreRequests is Store's round trips per operation (absent for ZooKeeper).
	StoreRequests float64 `json:"store_requests,omitempty"`
}

// CoordThroughput is operations per second with Clients concurrent clients.
type CoordThroughput struct {
	Op      string                  `json:"op"`
	Targets []CoordThroughputTarget `json:"targets"`
}

// CoordThroughputTarget is one target's throughput and its ratio to ZooKeeper's.
type CoordThroughputTarget struct {
	Target string  `json:"target"`
	PerSec float64 `json:"per_sec"`
	Ratio  float64 `json:"ratio,omitempty"`
}

// CoordStageResult is the write path's time per stage on one ssfkit target, over the measured
// sets (FaaSKeeper's Table 3).
type CoordStageResult struct {
	Target string       `json:"target"`
	Stages []StageTimes `json:"stages"`
}

// StageTimes are one stage's quantiles, µs.
type StageTimes struct {
	Stage string  `json:"stage"`
	N     int     `json:"n"`
	MinUS float64 `json:"min_us"`
	P50US float64 `json:"p50_us"`
	P90US float64 `json:"p90_us"`
	P99US float64 `json:"p99_us"`
}

func stageTimes(name string, d []time.Duration) StageTimes {
	if len(d) == 0 {
		return StageTimes{Stage: name}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return StageTimes{Stage: name, N: len(s), MinUS: us(s[0]), P50US: us(quantile(s, 0.5)), P90US: us(quantile(s, 0.9)), P99US: us(quantile(s, 0.99))}
}

// coordTarget is one server under test and its clients.
type coordTarget struct {
	name    string
	addr    string
	srv     *coordserve.Server // nil for ZooKeeper
	counter *Counter           // nil for ZooKeeper
	a, b    *zk.Conn           // the timed client, and the watcher for watch latency
	pool    []*zk.Conn         // throughput clients
	root    string
	version int32 // of root/n, for versioned sets
	created int

	mu        sync.Mutex
	recording bool
	stages    []coord.WriteStages
	proposals []coord.ProposeStages // serverless targets: the proxy's stages
	decides   []time.Duration       // serverless targets: the writer's Decide per wake-up
	stop      func()                // serverless targets: stops the writer
}

func (t *coordTarget) onPropose(st coord.ProposeStages) {
	t.mu.Lock()
	if t.recording {
		t.proposals = append(t.proposals, st)
	}
	t.mu.Unlock()
}

func (t *coordTarget) onWrite(st coord.WriteStages) {
	t.mu.Lock()
	if t.recording {
		t.stages = append(t.stages, st)
	}
	t.mu.Unlock()
}

func (t *coordTarget) close() {
	for _, c := range append([]*zk.Conn{t.a, t.b}, t.pool...) {
		if c != nil {
			c.Close()
		}
	}
	if t.srv != nil {
		t.srv.Close()
	}
	if t.stop != nil {
		t.stop()
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// zkConnect opens a session on addr and waits until it has one.
func zkConnect(addr string) (*zk.Conn, error) {
	c, events, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-deadline:
			c.Close()
			return nil, fmt.Errorf("no session from %s within 20 s", addr)
		}
	}
}

// RunCoord measures every target's latency per operation, taking turns in blocks, then their
// throughput with concurrent clients.
func RunCoord(ctx context.Context, cfg CoordConfig, progress io.Writer) (*CoordReport, error) {
	if cfg.ZooKeeper == nil {
		return nil, errors.New("bench coord: no ZooKeeper server to compare with")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultCoordTick
	}
	rep := &CoordReport{Machine: thisMachine(), Started: time.Now(), Config: CoordSettings{
		Ops: cfg.Ops, Warmup: cfg.Warmup, Block: cfg.Block, Clients: cfg.Clients, ThroughputOps: cfg.ThroughputOps,
		DataBytes: cfg.DataBytes, TickSeconds: cfg.Tick.Seconds()}}
	var targets []*coordTarget
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()
	fmt.Fprintf(progress, "bench coord: starting Apache ZooKeeper ...\n")
	addr, err := cfg.ZooKeeper()
	if err != nil {
		return nil, fmt.Errorf("bench coord: %w", err)
	}
	run := fmt.Sprintf("/bench%d", time.Now().UnixNano()%1e9)
	targets = append(targets, &coordTarget{name: ZooKeeperTarget, addr: addr, root: run})
	for _, b := range cfg.Stores {
		t := &coordTarget{name: "ssfkit-" + b.Name, root: run, counter: &Counter{}}
		targets = append(targets, t)
		if err := startCoordTarget(ctx, t, b, cfg.Tick); err != nil {
			return nil, fmt.Errorf("bench coord: %s: %w", t.name, err)
		}
	}
	for _, b := range cfg.Serverless {
		t := &coordTarget{name: "ssfkit-" + b.Name + "-serverless", root: run, counter: &Counter{}}
		targets = append(targets, t)
		if err := startServerlessTarget(ctx, t, b, cfg.Tick); err != nil {
			return nil, fmt.Errorf("bench coord: %s: %w", t.name, err)
		}
	}
	data := []byte(strings.Repeat("d", cfg.DataBytes))
	for _, t := range targets {
		rep.Targets = append(rep.Targets, t.name)
		if err := setupCoordTarget(t, cfg.Clients, data); err != nil {
			return nil, fmt.Errorf("bench coord: %s: %w", t.name, err)
		}
	}
	for _, op := range CoordOps {
		fmt.Fprintf(progress, "bench coord: %s ...\n", op)
		res, err := measureCoordOp(targets, op, cfg, data)
		if err != nil {
			return nil, fmt.Errorf("bench coord: %s: %w", op, err)
		}
		rep.Ops = append(rep.Ops, *res)
	}
	for _, t := range targets {
		if t.srv == nil {
			continue
		}
		r := CoordStageResult{Target: t.name}
		if t.stop != nil {
			var stages [5][]time.Duration
			for _, p := range t.proposals {
				stages[0] = append(stages[0], p.Store)
				stages[1] = append(stages[1], p.Wake)
				stages[2] = append(stages[2], p.Await)
				stages[4] = append(stages[4], p.Store+p.Wake+p.Await)
			}
			stages[3] = t.decides
			for i, name := range []string{"proxy: store the request (conditional create)", "proxy: wake a writer (queue send)",
				"until the proxy sees the decision (delivery, writer, log tail reads)", "of which the writer's Decide", "serverless write path total"} {
				r.Stages = append(r.Stages, stageTimes(name, stages[i]))
			}
			rep.Stages = append(rep.Stages, r)
			continue
		}
		var stages [5][]time.Duration
		for _, s := range t.stages {
			stages[0] = append(stages[0], s.CatchUp)
			stages[1] = append(stages[1], s.Validate)
			stages[2] = append(stages[2], s.Append)
			stages[3] = append(stages[3], s.Apply)
			stages[4] = append(stages[4], s.CatchUp+s.Validate+s.Append+s.Apply)
		}
		for i, name := range []string{"catch up (read log tail)", "validate", "log append (conditional create)", "apply + notify", "server write path total"} {
			r.Stages = append(r.Stages, stageTimes(name, stages[i]))
		}
		rep.Stages = append(rep.Stages, r)
	}
	for _, op := range []string{"get", "set"} {
		fmt.Fprintf(progress, "bench coord: throughput of %s with %d clients ...\n", op, cfg.Clients)
		res, err := measureCoordThroughput(targets, op, cfg, data)
		if err != nil {
			return nil, fmt.Errorf("bench coord: throughput of %s: %w", op, err)
		}
		rep.Throughput = append(rep.Throughput, *res)
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

func startCoordTarget(ctx context.Context, t *coordTarget, b Backend, tick time.Duration) error {
	urlPattern, err := b.URL()
	if err != nil {
		return err
	}
	url := strings.ReplaceAll(urlPattern, store.TablePlaceholder, fmt.Sprintf("coordbench%d", time.Now().UnixNano()%1e9))
	tbl, err := openCounted(ctx, url, t.counter)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tbl.Close()
		return err
	}
	srv, err := coordserve.StartTable(ctx, tbl, ln, coord.Config{Tick: tick, OnWrite: t.onWrite}, nil)
	if err != nil {
		ln.Close()
		tbl.Close()
		return err
	}
	t.srv, t.addr = srv, ln.Addr().String()
	return nil
}

// startServerlessTarget serves the serverless path on b: a proxy (coordserve, with a Waker)
// whose writes a writer Service decides, woken through an in-process queue; both count their
// store requests on one counter, so an operation's count is the whole path's.
func startServerlessTarget(ctx context.Context, t *coordTarget, b Backend, tick time.Duration) error {
	urlPattern, err := b.URL()
	if err != nil {
		return err
	}
	n := time.Now().UnixNano() % 1e9
	url := strings.ReplaceAll(urlPattern, store.TablePlaceholder, fmt.Sprintf("coordbench%d", n))
	tbl, err := openCounted(ctx, url, t.counter)
	if err != nil {
		return err
	}
	q, err := queue.Open(ctx, fmt.Sprintf("mem://coordbench-requests-%d", n))
	if err != nil {
		tbl.Close()
		return err
	}
	dlq, err := queue.Open(ctx, fmt.Sprintf("mem://coordbench-dead-%d", n))
	if err != nil {
		tbl.Close()
		return err
	}
	writer, err := coord.New(ctx, tbl, coord.Config{Tick: -1})
	if err != nil {
		tbl.Close()
		return err
	}
	decide := coordhost.Writer(writer)
	serveCtx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = queue.Serve(serveCtx, q, func(ctx context.Context, m *queue.Message) error {
			start := time.Now()
			err := decide(ctx, m)
			t.mu.Lock()
			if t.recording {
				t.decides = append(t.decides, time.Since(start))
			}
			t.mu.Unlock()
			return err
		}, queue.ServeOptions{DeadLetter: dlq, Wait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	t.stop = func() {
		cancel()
		<-served
		writer.Close()
		q.Close()
		dlq.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.stop()
		tbl.Close()
		return err
	}
	srv, err := coordserve.StartTable(ctx, tbl, ln, coord.Config{Tick: tick, Waker: coordhost.QueueWaker{Queue: q}, OnPropose: t.onPropose}, nil)
	if err != nil {
		ln.Close()
		t.stop()
		tbl.Close()
		return err
	}
	t.srv, t.addr = srv, ln.Addr().String()
	return nil
}

// setupCoordTarget connects the clients and creates the nodes the operations use: root/n (get,
// set, exists), root/w (watch), root/c (creates' parent), root/kids with 10 children, and one
// node per throughput client under root/t.
func setupCoordTarget(t *coordTarget, clients int, data []byte) error {
	var err error
	if t.a, err = zkConnect(t.addr); err != nil {
		return err
	}
	if t.b, err = zkConnect(t.addr); err != nil {
		return err
	}
	for range clients {
		c, err := zkConnect(t.addr)
		if err != nil {
			return err
		}
		t.pool = append(t.pool, c)
	}
	acl := zk.WorldACL(zk.PermAll)
	paths := []string{t.root, t.root + "/n", t.root + "/w", t.root + "/c", t.root + "/kids", t.root + "/t"}
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("%s/kids/k%02d", t.root, i))
	}
	for i := range clients {
		paths = append(paths, fmt.Sprintf("%s/t/%d", t.root, i))
	}
	for _, p := range paths {
		if _, err := t.a.Create(p, data, 0, acl); err != nil {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// coordOp runs operation op once on t.
func coordOp(t *coordTarget, op string, data []byte) error {
	switch op {
	case "create":
		t.created++
		_, err := t.a.Create(fmt.Sprintf("%s/c/%d", t.root, t.created), data, 0, zk.WorldACL(zk.PermAll))
		return err
	case "get":
		_, _, err := t.a.Get(t.root + "/n")
		return err
	case "set":
		st, err := t.a.Set(t.root+"/n", data, t.version)
		if err == nil {
			t.version = st.Version
		}
		return err
	case "getChildren":
		kids, _, err := t.a.Children(t.root + "/kids")
		if err == nil && len(kids) != 10 {
			err = fmt.Errorf("getChildren: %d children, want 10", len(kids))
		}
		return err
	case "exists":
		ok, _, err := t.a.Exists(t.root + "/n")
		if err == nil && !ok {
			err = errors.New("exists: the node is missing")
		}
		return err
	}
	return fmt.Errorf("unknown operation %q", op)
}

// watchOnce sets a data watch with client B, then times from client A's set to the event's
// arrival at B.
func watchOnce(t *coordTarget, data []byte) (time.Duration, error) {
	_, _, ch, err := t.b.GetW(t.root + "/w")
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := t.a.Set(t.root+"/w", data, -1); err != nil {
		return 0, err
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged {
			return 0, fmt.Errorf("watch: got %v (%v), want a data change", ev.Type, ev.Err)
		}
		return time.Since(start), nil
	case <-time.After(10 * time.Second):
		return 0, errors.New("watch: no event within 10 s of the set")
	}
}

func measureCoordOp(targets []*coordTarget, op string, cfg CoordConfig, data []byte) (*CoordOpResult, error) {
	samples := make([][]time.Duration, len(targets))
	counts := make([]Counts, len(targets))
	once := func(i int, record bool) error {
		t := targets[i]
		if op == "watch" {
			d, err := watchOnce(t, data)
			if err == nil && record {
				samples[i] = append(samples[i], d)
			}
			return err
		}
		start := time.Now()
		err := coordOp(t, op, data)
		if err == nil && record {
			samples[i] = append(samples[i], time.Since(start))
		}
		return err
	}
	for i, t := range targets {
		for range cfg.Warmup {
			if err := once(i, false); err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
		}
	}
	for block := 0; block*cfg.Block < cfg.Ops; block++ {
		n := min(cfg.Block, cfg.Ops-block*cfg.Block)
		// Each block starts with the next target, so no target always follows the same one.
		for k := range targets {
			i := (block + k) % len(targets)
			t := targets[i]
			var before Counts
			if t.counter != nil {
				before = t.counter.Snapshot()
			}
			t.mu.Lock()
			t.recording = op == "set"
			t.mu.Unlock()
			for range n {
				if err := once(i, true); err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
			}
			t.mu.Lock()
			t.recording = false
			t.mu.Unlock()
			if t.counter != nil {
				counts[i] = counts[i].add(t.counter.Snapshot().Sub(before))
			}
		}
	}
	res := &CoordOpResult{Op: op}
	zkSum := Summarize(samples[0])
	for i, t := range targets {
		r := CoordOpTarget{Target: t.name, Latency: Summarize(samples[i])}
		if i > 0 {
			r.RatioMedian, r.RatioP99 = ratio(r.Latency.MedianUS, zkSum.MedianUS), ratio(r.Latency.P99US, zkSum.P99US)
		}
		if t.counter != nil {
			so := counts[i].PerOp(len(samples[i]))
			r.Store, r.StoreRequests = &so, so.RoundTrips()
		}
		res.Targets = append(res.Targets, r)
	}
	return res, nil
}

func measureCoordThroughput(targets []*coordTarget, op string, cfg CoordConfig, data []byte) (*CoordThroughput, error) {
	const rounds = 3
	ops := make([]int, len(targets))
	took := make([]time.Duration, len(targets))
	per := max(cfg.ThroughputOps/rounds, len(targets[0].pool))
	for round := range rounds {
		for k := range targets {
			i := (round + k) % len(targets)
			t := targets[i]
			var next sync.Mutex
			issued := 0
			var firstErr error
			var wg sync.WaitGroup
			start := time.Now()
			for c, conn := range t.pool {
				path := t.root + "/n"
				if op == "set" {
					path = fmt.Sprintf("%s/t/%d", t.root, c) // each client its own node
				}
				wg.Go(func() {
					for {
						next.Lock()
						if issued >= per || firstErr != nil {
							next.Unlock()
							return
						}
						issued++
						next.Unlock()
						var err error
						if op == "set" {
							_, err = conn.Set(path, data, -1)
						} else {
							_, _, err = conn.Get(path)
						}
						if err != nil {
							next.Lock()
							firstErr = err
							next.Unlock()
							return
						}
					}
				})
			}
			wg.Wait()
			if firstErr != nil {
				return nil, fmt.Errorf("%s: %w", t.name, firstErr)
			}
			took[i] += time.Since(start)
			ops[i] += per
		}
	}
	res := &CoordThroughput{Op: op}
	for i, t := range targets {
		r := CoordThroughputTarget{Target: t.name, PerSec: float64(ops[i]) / took[i].Seconds()}
		if i > 0 {
			r.Ratio = ratio(r.PerSec, res.Targets[0].PerSec)
		}
		res.Targets = append(res.Targets, r)
	}
	return res, nil
}

// WriteMarkdown renders the report.
func (r *CoordReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench coord\n\n")
	fmt.Fprintf(&b, "- machine: %s; started %s; took %.0f s\n", r.Machine, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(&b, "- targets: %s, all on 127.0.0.1, each through the ZooKeeper wire protocol with github.com/go-zookeeper/zk; "+
		"per operation and target %d measured after %d unmeasured, the targets taking turns in blocks of %d; %d-byte data; "+
		"the service's tick %s (its idle cost, 1 log read and 1 session scan per tick, is left out of the counts)\n",
		strings.Join(r.Targets, ", "), r.Config.Ops, r.Config.Warmup, r.Config.Block, r.Config.DataBytes, time.Duration(r.Config.TickSeconds*float64(time.Second)))
	fmt.Fprintf(&b, "- watch: client B sets a data watch (getData), client A sets the node; the time from the start of A's set to the event at B\n\n")
	b.WriteString("Latency of one operation, one client (µs), ratio to ZooKeeper measured side by side, and store requests per operation:\n\n")
	b.WriteString("| op | target | median µs | p99 µs | / ZK median | / ZK p99 | store requests per op |\n|---|---|--:|--:|--:|--:|---|\n")
	for _, o := range r.Ops {
		for _, t := range o.Targets {
			rm, rp, st := "", "", "(in memory)"
			if t.Target != ZooKeeperTarget {
				rm, rp = fmt.Sprintf("%.2fx", t.RatioMedian), fmt.Sprintf("%.2fx", t.RatioP99)
			}
			if t.Store != nil {
				st = fmt.Sprintf("%s = %s", num(t.StoreRequests), t.Store)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %s | %s |\n", o.Op, t.Target, t.Latency.MedianUS, t.Latency.P99US, rm, rp, st)
		}
	}
	fmt.Fprintf(&b, "\nThroughput with %d concurrent clients (one session each), operations per second (%d operations per target in 3 rounds taking turns; sets on one node per client, gets of one node):\n\n", r.Config.Clients, r.Config.ThroughputOps)
	b.WriteString("| op | target | ops/s | / ZK |\n|---|---|--:|--:|\n")
	for _, x := range r.Throughput {
		for _, t := range x.Targets {
			rt := ""
			if t.Target != ZooKeeperTarget {
				rt = fmt.Sprintf("%.2fx", t.Ratio)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s |\n", x.Op, t.Target, t.PerSec, rt)
		}
	}
	b.WriteString("\nThe write path per stage over the measured sets (µs; FaaSKeeper's Table 3), timed inside the server by coord.Config.OnWrite; " +
		"\"rest\" is the client's set latency minus the server's write path: the ZooKeeper protocol both ways, the reply and the client:\n\n")
	b.WriteString("| target | stage | n | min | p50 | p90 | p99 |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, s := range r.Stages {
		for _, st := range s.Stages {
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.0f | %.0f | %.0f |\n", s.Target, st.Stage, st.N, st.MinUS, st.P50US, st.P90US, st.P99US)
		}
		for _, o := range r.Ops {
			for _, t := range o.Targets {
				if o.Op == "set" && t.Target == s.Target && len(s.Stages) == 5 {
					fmt.Fprintf(&b, "| %s | rest (median set − median write path) | | | %.0f | | |\n", s.Target, t.Latency.MedianUS-s.Stages[4].P50US)
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WritePlot writes grouped bars of the median latency per operation and target.
func (r *CoordReport) WritePlot(path string) error {
	if len(r.Ops) == 0 {
		return fmt.Errorf("plot %s: no results", path)
	}
	p := newBarPlot("ZooKeeper protocol, median latency per operation: Apache ZooKeeper vs ssfkit's endpoint per store", "median latency (ms)")
	width := vg.Points(60 / float64(len(r.Targets)))
	var names []string
	for _, o := range r.Ops {
		names = append(names, o.Op)
	}
	for i, target := range r.Targets {
		vals := make(plotter.Values, len(r.Ops))
		for j, o := range r.Ops {
			for _, t := range o.Targets {
				if t.Target == target {
					vals[j] = t.Latency.MedianUS / 1000
					p.Y.Max = max(p.Y.Max, 1.3*vals[j])
				}
			}
		}
		if err := addBars(p, i, len(r.Targets), width, target, vals); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	p.NominalX(names...)
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
