package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// The workflow every variant of `ssfkit bench peers` runs: Steps steps, each incrementing its
// own row. Every client has rows of its own, so clients never wait for each other's locks and
// the benchmark measures the exactly-once machinery, not contention.
const (
	PeerPlain         = "pgx"             // plain pgx: one autocommit UPDATE per step, no exactly-once (the floor)
	PeerDBOS          = "dbos"            // DBOS Transact: a workflow of RunAsTransaction steps, on its own pool (its fastest path)
	PeerDBOSChild     = "dbos-child"      // DBOS: a workflow running each step as a child workflow of one RunAsTransaction
	PeerSSF           = "ssfkit"          // one SSF instance, pgstore with store transactions (ssfkit's fastest path)
	PeerSSFPortable   = "ssfkit-portable" // the same without store transactions: the portable path every store takes
	PeerSSFPerStepSSF = "ssfkit-per-step" // a caller instance SyncInvokes a step SSF per step
	PeerSSFSQL        = "ssfkit-sql"      // one SSF instance whose steps are SQL steps (ssf.RunSQL) on the user's table, as DBOS's are
)

// PeerVariants are the variants in the order they are reported.
var PeerVariants = []string{PeerPlain, PeerDBOS, PeerDBOSChild, PeerSSF, PeerSSFPortable, PeerSSFPerStepSSF, PeerSSFSQL}

// PeersConfig configures RunPeers.
type PeersConfig struct {
	// DatabaseURL is a PostgreSQL database the benchmark owns (a durable cluster: fsync on),
	// with pg_stat_statements loaded for the statement counts.
	DatabaseURL string
	Workflows   int   // measured workflows per variant and client count
	Warmup      int   // unmeasured workflows per variant and client count, first
	Block       int   // workflows each client runs back to back before the next variant's turn
	Clients     []int // concurrent clients, e.g. 1 and 8
	Steps       int
	Variants    []string // empty: all
}

func (c *PeersConfig) validate() error {
	if len(c.Variants) == 0 {
		c.Variants = PeerVariants
	}
	for _, v := range c.Variants {
		if !slices.Contains(PeerVariants, v) {
			return fmt.Errorf("bench peers: unknown variant %q (known: %s)", v, strings.Join(PeerVariants, ", "))
		}
	}
	if err := checkBlocks("peers", c.Workflows, c.Warmup, c.Block); err != nil {
		return err
	}
	if c.Steps < 1 || c.Steps > 100 {
		return fmt.Errorf("bench peers: --steps must be from 1 to 100, got %d", c.Steps)
	}
	if len(c.Clients) == 0 {
		return errors.New("bench peers: --clients names no client count")
	}
	for _, n := range c.Clients {
		if n < 1 || n > 64 {
			return fmt.Errorf("bench peers: a client count must be from 1 to 64, got %d", n)
		}
	}
	if c.DatabaseURL == "" {
		return errors.New("bench peers: no database URL")
	}
	return nil
}

// PeerResult is one variant at one client count.
type PeerResult struct {
	Variant   string  `json:"variant"`
	Clients   int     `json:"clients"`
	Latency   Summary `json:"latency"`    // one workflow, start to result
	PerSecond float64 `json:"per_second"` // workflows per second over the measured blocks
	// Per workflow, from the server's counters over the measured blocks, less what it did in
	// the background meanwhile: statements (pg_stat_statements, BEGIN and COMMIT included) and
	// write transactions (transaction IDs assigned: every commit that must reach the disk;
	// read-only transactions get none).
	Statements float64 `json:"statements"`
	Commits    float64 `json:"commits"`
}

// PeersReport is the outcome of RunPeers.
type PeersReport struct {
	Machine   Machine      `json:"machine"`
	Server    string       `json:"server"`
	Steps     int          `json:"steps"`
	Workflows int          `json:"workflows"`
	Warmup    int          `json:"warmup"`
	Block     int          `json:"block"`
	Started   time.Time    `json:"started"`
	Seconds   float64      `json:"seconds"`
	Results   []PeerResult `json:"results"`
	// Background is what the server did per second while nothing ran (DBOS's pollers, the
	// statistics collector): it is in every variant's counts alike.
	Background struct {
		Statements float64 `json:"statements_per_second"`
		Commits    float64 `json:"write_transactions_per_second"`
	} `json:"background"`
}

// A peer runs one workflow for a client, with its own rows.
type peer interface {
	run(ctx context.Context, client int, id string) error
	// check verifies, after the run, that every row of every client counts the workflows it ran.
	check(ctx context.Context, ran map[int]int) error
}

// RunPeers runs every variant side by side on one PostgreSQL, in alternating blocks, at each
// client count, and checks every workflow's outcome.
func RunPeers(ctx context.Context, cfg PeersConfig, progress io.Writer) (*PeersReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &PeersReport{Machine: thisMachine(), Steps: cfg.Steps, Workflows: cfg.Workflows, Warmup: cfg.Warmup, Block: cfg.Block, Started: time.Now()}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("bench peers: %w", err)
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&rep.Server); err != nil {
		return nil, fmt.Errorf("bench peers: the database does not answer: %w", err)
	}
	var fsync string
	if err := pool.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil || fsync != "on" {
		return nil, fmt.Errorf("bench peers: the server runs with fsync=%s: commits would cost nothing (%v)", fsync, err)
	}
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("bench peers: pg_stat_statements (the server needs shared_preload_libraries=pg_stat_statements): %w", err)
	}
	maxClients := slices.Max(cfg.Clients)
	peers := map[string]peer{}
	var closers []func()
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	for _, v := range cfg.Variants {
		fmt.Fprintf(progress, "bench peers: setting up %s\n", v)
		p, closeFn, err := newPeer(ctx, v, cfg, pool, maxClients)
		if err != nil {
			return nil, fmt.Errorf("bench peers: %s: %w", v, err)
		}
		peers[v], closers = p, append(closers, closeFn)
	}
	idle, err := serverCounts(ctx, pool)
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second)
	after, err := serverCounts(ctx, pool)
	if err != nil {
		return nil, err
	}
	// Each snapshot is a statement of its own.
	rep.Background.Statements = float64(after.statements-idle.statements-1) / 2
	rep.Background.Commits = float64(after.commits-idle.commits) / 2

	ran := map[string]map[int]int{}
	for _, v := range cfg.Variants {
		ran[v] = map[int]int{}
	}
	seq := 0
	for _, clients := range cfg.Clients {
		type acc struct {
			lat     []time.Duration
			elapsed time.Duration
			n       int
			counts  serverCount
		}
		accs := map[string]*acc{}
		for _, v := range cfg.Variants {
			accs[v] = &acc{}
		}
		// block runs one block of variant v: every client Block workflows back to back.
		block := func(v string, measured bool) error {
			before, err := serverCounts(ctx, pool)
			if err != nil {
				return err
			}
			lats := make([][]time.Duration, clients)
			errs := make([]error, clients)
			ids := make([][]string, clients)
			for c := range clients {
				for range cfg.Block {
					seq++
					ids[c] = append(ids[c], fmt.Sprintf("%s-%d-%d", v, clients, seq))
				}
			}
			var wg sync.WaitGroup
			start := time.Now()
			for c := range clients {
				wg.Go(func() {
					for _, id := range ids[c] {
						t := time.Now()
						if err := peers[v].run(ctx, c, id); err != nil {
							errs[c] = fmt.Errorf("%s, workflow %s: %w", v, id, err)
							return
						}
						lats[c] = append(lats[c], time.Since(t))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			if err := errors.Join(errs...); err != nil {
				return err
			}
			for c := range clients {
				ran[v][c] += cfg.Block
			}
			if !measured {
				return nil
			}
			end, err := serverCounts(ctx, pool)
			if err != nil {
				return err
			}
			a := accs[v]
			for _, l := range lats {
				a.lat = append(a.lat, l...)
			}
			a.elapsed += elapsed
			a.n += clients * cfg.Block
			a.counts = a.counts.add(end.sub(before))
			return nil
		}
		rounds := func(workflows int, measured bool) error {
			for r := 0; r*cfg.Block < workflows; r++ {
				order := slices.Clone(cfg.Variants)
				if r%2 == 1 {
					slices.Reverse(order)
				}
				for _, v := range order {
					if err := block(v, measured); err != nil {
						return err
					}
				}
			}
			return nil
		}
		fmt.Fprintf(progress, "bench peers: %d client(s): %d warm-up and %d measured workflows per variant and client, blocks of %d\n", clients, cfg.Warmup, cfg.Workflows, cfg.Block)
		if err := rounds(cfg.Warmup, false); err != nil {
			return nil, fmt.Errorf("bench peers: %w", err)
		}
		if err := rounds(cfg.Workflows, true); err != nil {
			return nil, fmt.Errorf("bench peers: %w", err)
		}
		for _, v := range cfg.Variants {
			a := accs[v]
			n := float64(a.n)
			blocks, secs := float64(a.n/(clients*cfg.Block)), a.elapsed.Seconds()
			rep.Results = append(rep.Results, PeerResult{
				Variant: v, Clients: clients, Latency: Summarize(a.lat),
				PerSecond:  n / secs,
				Statements: (float64(a.counts.statements) - blocks - rep.Background.Statements*secs) / n,
				Commits:    (float64(a.counts.commits) - rep.Background.Commits*secs) / n,
			})
		}
	}
	for _, v := range cfg.Variants {
		if err := peers[v].check(ctx, ran[v]); err != nil {
			return nil, fmt.Errorf("bench peers: %s: %w", v, err)
		}
	}
	fmt.Fprintf(progress, "bench peers: every workflow's rows checked\n")
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// serverCount is what the server counted since it started: statements, and transaction IDs
// assigned (the next one to assign, read without taking one). pg_stat_statements does not see a
// BEGIN sent in the extended protocol (pgstore pipelines it with the transaction's first
// statement), so every COMMIT or ROLLBACK without a counted BEGIN adds one: a BEGIN is a
// statement the server ran, whichever way it came.
type serverCount struct{ statements, commits int64 }

func (c serverCount) sub(o serverCount) serverCount {
	return serverCount{c.statements - o.statements, c.commits - o.commits}
}

func (c serverCount) add(o serverCount) serverCount {
	return serverCount{c.statements + o.statements, c.commits + o.commits}
}

func serverCounts(ctx context.Context, pool *pgxpool.Pool) (serverCount, error) {
	var c serverCount
	err := pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements)
		+ greatest(0, (SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query ~* '^(commit|rollback)\y')
			- (SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query ~* '^(begin|start transaction)\y')),
		txid_snapshot_xmax(txid_current_snapshot())`).Scan(&c.statements, &c.commits)
	if err != nil {
		return c, fmt.Errorf("bench peers: the server's counters: %w", err)
	}
	return c, nil
}

func newPeer(ctx context.Context, variant string, cfg PeersConfig, pool *pgxpool.Pool, clients int) (peer, func(), error) {
	switch variant {
	case PeerPlain:
		p := &plainPeer{pool: pool, steps: cfg.Steps, table: "peers_plain"}
		return p, func() {}, p.setup(ctx, clients)
	case PeerDBOS, PeerDBOSChild:
		return newDBOSPeer(ctx, cfg, variant == PeerDBOSChild, clients)
	default:
		return newSSFPeer(ctx, cfg, variant, pool, clients)
	}
}

// counterRows creates table (id text primary key, v bigint) with a zero row per client and step.
func counterRows(ctx context.Context, pool *pgxpool.Pool, table string, clients, steps int) error {
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS `+table+`; CREATE TABLE `+table+` (id text PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `INSERT INTO `+table+` SELECT c::text || '-' || s::text, 0 FROM generate_series(0, $1 - 1) c, generate_series(0, $2 - 1) s`, clients, steps)
	return err
}

func checkCounterRows(ctx context.Context, pool *pgxpool.Pool, table string, steps int, ran map[int]int) error {
	for c, n := range ran {
		for s := range steps {
			var v int64
			if err := pool.QueryRow(ctx, `SELECT v FROM `+table+` WHERE id = $1`, rowID(c, s)).Scan(&v); err != nil {
				return fmt.Errorf("row %s: %w", rowID(c, s), err)
			}
			if v != int64(n) {
				return fmt.Errorf("row %s counts %d after %d workflows", rowID(c, s), v, n)
			}
		}
	}
	return nil
}

func rowID(client, step int) string { return strconv.Itoa(client) + "-" + strconv.Itoa(step) }

type plainPeer struct {
	pool  *pgxpool.Pool
	steps int
	table string
}

func (p *plainPeer) setup(ctx context.Context, clients int) error {
	return counterRows(ctx, p.pool, p.table, clients, p.steps)
}

func (p *plainPeer) run(ctx context.Context, client int, _ string) error {
	for s := range p.steps {
		if _, err := p.pool.Exec(ctx, `UPDATE `+p.table+` SET v = v + 1 WHERE id = $1`, rowID(client, s)); err != nil {
			return err
		}
	}
	return nil
}

func (p *plainPeer) check(ctx context.Context, ran map[int]int) error {
	return checkCounterRows(ctx, p.pool, p.table, p.steps, ran)
}

// dbosPeer runs DBOS Transact on its own pool, which is also its data source: RunAsTransaction
// then writes the user's row and DBOS's step record in one transaction (DBOS's fastest path).
type dbosPeer struct {
	dctx  dbos.Context
	pool  *pgxpool.Pool
	ds    *dbos.DataSource
	steps int
	child bool
	table string
}

type dbosInput struct {
	Client int `json:"client"`
	Step   int `json:"step"`
}

func newDBOSPeer(ctx context.Context, cfg PeersConfig, child bool, clients int) (peer, func(), error) {
	table := "peers_dbos"
	if child {
		table = "peers_dbos_child"
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	p := &dbosPeer{pool: pool, steps: cfg.Steps, child: child, table: table}
	if err := counterRows(ctx, pool, table, clients, cfg.Steps); err != nil {
		pool.Close()
		return nil, nil, err
	}
	name := "ssfkit-bench-" + strings.ReplaceAll(table, "_", "-")
	p.dctx, err = dbos.NewContext(ctx, dbos.Config{AppName: name, SystemDBPool: pool, DatabaseSchema: strings.ReplaceAll(table, "peers_", "dbos_"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	if p.ds, err = dbos.NewDataSource(p.dctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	dbos.RegisterWorkflow(p.dctx, p.stepWorkflow, dbos.WithWorkflowName("step"))
	dbos.RegisterWorkflow(p.dctx, p.workflow, dbos.WithWorkflowName("workflow"))
	if err := p.dctx.Launch(); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return p, func() {
		p.dctx.Shutdown(p.dctx, 10*time.Second)
		pool.Close()
	}, nil
}

func (p *dbosPeer) increment(ctx dbos.Context, in dbosInput) error {
	_, err := dbos.RunAsTransaction(ctx, p.ds, func(ctx context.Context, tx dbos.Tx) (int64, error) {
		res, err := tx.Exec(ctx, `UPDATE `+p.table+` SET v = v + 1 WHERE id = $1`, rowID(in.Client, in.Step))
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
	return err
}

// stepWorkflow is one step as a workflow of its own (the child-workflow variant).
func (p *dbosPeer) stepWorkflow(ctx dbos.Context, in dbosInput) (int, error) {
	return in.Step, p.increment(ctx, in)
}

func (p *dbosPeer) workflow(ctx dbos.Context, client int) (int, error) {
	for s := range p.steps {
		in := dbosInput{Client: client, Step: s}
		if !p.child {
			if err := p.increment(ctx, in); err != nil {
				return 0, err
			}
			continue
		}
		h, err := dbos.RunWorkflow(ctx, p.stepWorkflow, in)
		if err != nil {
			return 0, err
		}
		if _, err := h.GetResult(); err != nil {
			return 0, err
		}
	}
	return p.steps, nil
}

func (p *dbosPeer) run(_ context.Context, client int, id string) error {
	h, err := dbos.RunWorkflow(p.dctx, p.workflow, client, dbos.WithWorkflowID(id))
	if err != nil {
		return err
	}
	n, err := h.GetResult()
	if err == nil && n != p.steps {
		err = fmt.Errorf("the workflow ran %d steps, want %d", n, p.steps)
	}
	return err
}

func (p *dbosPeer) check(ctx context.Context, ran map[int]int) error {
	return checkCounterRows(ctx, p.pool, p.table, p.steps, ran)
}

// ssfPeer runs the workflow as an SSF instance on pgstore (one table per SSF).
type ssfPeer struct {
	host     *local.Host
	caller   *ssf.Runtime
	stepper  *ssf.Runtime // the per-step variant's step SSF
	tables   []*store.Table
	steps    int
	perStep  bool
	callerID string
	// The SQL-step variant's steps update this table of the user's through pool.
	sqlTable string
	pool     *pgxpool.Pool
}

type ssfInput struct {
	Client int `json:"client"`
	Step   int `json:"step"`
}

func newSSFPeer(ctx context.Context, cfg PeersConfig, variant string, pool *pgxpool.Pool, clients int) (peer, func(), error) {
	p := &ssfPeer{host: local.NewHost(), steps: cfg.Steps, perStep: variant == PeerSSFPerStepSSF, pool: pool}
	if variant == PeerSSFSQL {
		p.sqlTable = "peers_ssfkit_sql_counters"
		if err := counterRows(ctx, pool, p.sqlTable, clients, cfg.Steps); err != nil {
			return nil, nil, err
		}
	}
	closeFn := func() {
		p.host.Close()
		for _, t := range p.tables {
			if d, ok := t.Driver().(store.Dropper); ok {
				_ = d.Drop(context.Background())
			}
			t.Close()
		}
	}
	open := func(name string, h ssf.Handler) (*ssf.Runtime, error) {
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil {
			return nil, err
		}
		q := u.Query()
		q.Set("table", "peers_"+strings.ReplaceAll(variant, "-", "_")+"_"+name)
		if variant == PeerSSFPortable {
			q.Set("transactions", "off")
		}
		u.RawQuery = q.Encode()
		t, err := store.Open(ctx, u.String())
		if err != nil {
			return nil, err
		}
		p.tables = append(p.tables, t)
		return p.host.Add(ssf.Config{Name: name, Store: t, Handler: h})
	}
	var err error
	if p.perStep {
		if p.stepper, err = open("step", p.stepHandler); err != nil {
			closeFn()
			return nil, nil, err
		}
	}
	if p.caller, err = open("workflow", p.workflowHandler); err != nil {
		closeFn()
		return nil, nil, err
	}
	return p, closeFn, nil
}

func increment(env *ssf.Env, client, step int) error {
	key := rowID(client, step)
	var v int64
	if _, err := env.ReadInto("counters", key, &v); err != nil {
		return err
	}
	return env.Write("counters", key, v+1)
}

func (p *ssfPeer) stepHandler(env *ssf.Env, input json.RawMessage) (any, error) {
	var in ssfInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	return nil, increment(env, in.Client, in.Step)
}

func (p *ssfPeer) workflowHandler(env *ssf.Env, input json.RawMessage) (any, error) {
	var in ssfInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	for s := range p.steps {
		if p.perStep {
			if _, err := env.SyncInvoke("step", ssfInput{Client: in.Client, Step: s}); err != nil {
				return nil, err
			}
			continue
		}
		if p.sqlTable != "" {
			if _, err := ssf.RunSQL(env, func(ctx context.Context, tx *store.SQLTx) (int64, error) {
				return tx.Exec(ctx, `UPDATE `+p.sqlTable+` SET v = v + 1 WHERE id = $1`, rowID(in.Client, s))
			}); err != nil {
				return nil, err
			}
			continue
		}
		if err := increment(env, in.Client, s); err != nil {
			return nil, err
		}
	}
	return p.steps, nil
}

func (p *ssfPeer) run(ctx context.Context, client int, id string) error {
	res, err := p.host.Invoke(ctx, "workflow", id, ssfInput{Client: client})
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		return err
	}
	if string(res.Output) != strconv.Itoa(p.steps) {
		return fmt.Errorf("the instance answered %s, want %d steps", res.Output, p.steps)
	}
	return nil
}

func (p *ssfPeer) check(ctx context.Context, ran map[int]int) error {
	if p.sqlTable != "" {
		return checkCounterRows(ctx, p.pool, p.sqlTable, p.steps, ran)
	}
	rt := p.caller
	if p.perStep {
		rt = p.stepper
	}
	items, err := rt.Items(ctx)
	if err != nil {
		return err
	}
	for c, n := range ran {
		for s := range p.steps {
			key := "counters/" + rowID(c, s)
			if got := string(items[key]); got != strconv.Itoa(n) {
				return fmt.Errorf("item %s is %q after %d workflows", key, got, n)
			}
		}
	}
	return nil
}

// WriteMarkdown writes the report as the table in BENCHMARKS.md.
func (r *PeersReport) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "bench peers: %d-step workflows (each step increments its own row), PostgreSQL %s (fsync on), %s\n", r.Steps, r.Server, r.Machine)
	fmt.Fprintf(w, "%d measured workflows per variant and client, blocks of %d alternating, %.0f s; counts per workflow, less the background (%.1f statements/s, %.1f write transactions/s)\n\n",
		r.Workflows, r.Block, r.Seconds, r.Background.Statements, r.Background.Commits)
	fmt.Fprintln(w, "| variant | clients | median µs | p99 µs | workflows/s | statements | write commits | median / dbos | per-second / dbos |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, res := range r.Results {
		base, _ := r.result(PeerDBOS, res.Clients)
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f | %.1f | %.1f | %s | %s |\n", res.Variant, res.Clients, res.Latency.MedianUS, res.Latency.P99US,
			res.PerSecond, res.Statements, res.Commits, ratioText(res.Latency.MedianUS, base.Latency.MedianUS), ratioText(res.PerSecond, base.PerSecond))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func ratioText(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

func (r *PeersReport) result(variant string, clients int) (PeerResult, bool) {
	for _, res := range r.Results {
		if res.Variant == variant && res.Clients == clients {
			return res, true
		}
	}
	return PeerResult{}, false
}

// WritePlot draws the median latency of every variant at every client count into path (PNG or
// SVG by its extension).
func (r *PeersReport) WritePlot(path string) error {
	p := newBarPlot(fmt.Sprintf("%d-step exactly-once workflow on PostgreSQL: median latency", r.Steps), "µs")
	var clients []int
	for _, res := range r.Results {
		if !slices.Contains(clients, res.Clients) {
			clients = append(clients, res.Clients)
		}
	}
	var variants []string
	for _, res := range r.Results {
		if !slices.Contains(variants, res.Variant) {
			variants = append(variants, res.Variant)
		}
	}
	names := make([]string, len(clients))
	for i, c := range clients {
		names[i] = plural(c, "client")
	}
	p.NominalX(names...)
	for i, v := range variants {
		vals := make(plotter.Values, len(clients))
		for j, c := range clients {
			res, _ := r.result(v, c)
			vals[j] = res.Latency.MedianUS
		}
		if err := addBars(p, i, len(variants), vg.Points(36), v, vals); err != nil {
			return err
		}
	}
	p.X.Min, p.X.Max = -0.7, float64(len(clients))-0.3
	if err := p.Save(9*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
