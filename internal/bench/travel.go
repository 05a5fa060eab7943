package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/examples/travel"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Defaults of TravelConfig.
const (
	DefaultTravelRequests    = 1000
	DefaultTravelWarmup      = 100
	DefaultTravelConcurrency = 8
	DefaultTravelBlock       = 100
	// DefaultTravelCapacity lets the most demanded hotels and flights fill up near the end of
	// a default run (the middle one gets ~2.7% of the reservations), so that overbooking can
	// show, while most reservations find room.
	DefaultTravelCapacity = 30
	DefaultTravelSeed     = 20201104
)

// TravelConfig configures RunTravel.
type TravelConfig struct {
	// StoreURL is the store; every variant gets its own tables in it, one per SSF. Empty means
	// a fresh SQLite file in a temporary directory.
	StoreURL string
	// Requests is the number of measured requests per variant, after Warmup unmeasured ones.
	Requests, Warmup int
	// Browse is the fraction of requests that are searches, recommendations and logins (the
	// rest are reservations); 0 measures reservations alone.
	Browse float64
	// Concurrency is the number of clients, each sending its next request when the last
	// returns.
	Concurrency int
	// Block is how many requests one variant runs before the next variant's turn; the order
	// rotates every block, so that drift affects every variant alike.
	Block int
	// Capacity is the most rooms a hotel and seats a flight have (each has between half of it
	// and it).
	Capacity int64
	// Seed draws the data and the requests; every variant gets the same ones.
	Seed uint64
}

func (c *TravelConfig) validate() error {
	switch {
	case c.Requests < 1 || c.Warmup < 0:
		return fmt.Errorf("bench travel: --requests must be at least 1 and --warmup not negative, got %d and %d", c.Requests, c.Warmup)
	case !(c.Browse >= 0 && c.Browse < 1):
		return fmt.Errorf("bench travel: --browse is a fraction of the requests, from 0 to below 1, got %v", c.Browse)
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return fmt.Errorf("bench travel: --concurrency must be 1 to 1000, got %d", c.Concurrency)
	case c.Block < 1:
		return fmt.Errorf("bench travel: --block must be at least 1, got %d", c.Block)
	case c.Capacity < 1:
		return fmt.Errorf("bench travel: --capacity must be at least 1, got %d", c.Capacity)
	}
	return nil
}

// TravelVariant is one way to run the travel app.
type TravelVariant struct {
	Name string      `json:"name"`
	Mode travel.Mode `json:"mode"`
	// Raw runs the app without ssfkit (travel.Raw); only travel.ModeUnsafe runs there.
	Raw bool   `json:"raw"`
	key string // names its tables
}

// TravelVariants are the variants RunTravel compares: Beldi's transactions, exactly-once
// without transactions, and neither (the app without ssfkit, Beldi's baseline).
var TravelVariants = []TravelVariant{
	{Name: "transactions", Mode: travel.ModeTransaction, key: "tx"},
	{Name: "exactly-once", Mode: travel.ModeExactlyOnce, key: "eo"},
	{Name: "neither", Mode: travel.ModeUnsafe, Raw: true, key: "raw"},
}

// TravelReport is the outcome of RunTravel.
type TravelReport struct {
	Machine     Machine        `json:"machine"`
	Store       string         `json:"store"`
	Requests    int            `json:"requests"`
	Warmup      int            `json:"warmup"`
	Browse      float64        `json:"browse"`
	Concurrency int            `json:"concurrency"`
	Block       int            `json:"block"`
	Capacity    int64          `json:"capacity"`
	Seed        uint64         `json:"seed"`
	Started     time.Time      `json:"started"`
	Seconds     float64        `json:"seconds"`
	Results     []TravelResult `json:"results"`
}

// TravelResult is what one variant did.
type TravelResult struct {
	Variant TravelVariant `json:"variant"`
	// Seconds is the wall time of the measured blocks; Throughput the measured requests per
	// second over it, all clients together.
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"`
	// Reserve and Browse are the latencies of the measured reservations and other requests.
	Reserve Summary `json:"reserve"`
	Browse  Summary `json:"browse"`
	// Store is the store requests per measured request.
	Store StoreOps `json:"store"`
	// Outcomes of every reservation, warm-up included: booked, refused (full, or given up after
	// repeated wait-die aborts), and the transactions wait-die aborted and retried.
	Booked     int `json:"booked"`
	Refused    int `json:"refused"`
	Contention int `json:"contention"`
	Retries    int `json:"retries"`
	// Requests that failed (none should), with the first error.
	Failed     int    `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
	// Violations of the app's invariants in the final state (travel.Check): bookings beyond
	// capacity, bookings an item's count misses (two reservations that took the same room or
	// seat), and reservations booked on one side only; Violations counts every problem found.
	Overbooked   int `json:"overbooked"`
	DoubleBooked int `json:"double_booked"`
	Unmatched    int `json:"unmatched"`
	Violations   int `json:"violations"`
}

// travelWorld is one variant's instance of the app.
type travelWorld interface {
	invoke(ctx context.Context, ssfName, id string, input any) (json.RawMessage, error)
	snapshot(ctx context.Context) (travel.Items, error)
	close()
}

// RunTravel runs the travel app's requests in every variant and reports their throughput,
// latency and invariant violations (Beldi §7.4, Fig. 15).
func RunTravel(ctx context.Context, cfg TravelConfig, progress io.Writer) (*TravelReport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &TravelReport{Machine: thisMachine(), Requests: cfg.Requests, Warmup: cfg.Warmup, Browse: cfg.Browse,
		Concurrency: cfg.Concurrency, Block: cfg.Block, Capacity: cfg.Capacity, Seed: cfg.Seed, Started: time.Now()}
	url := cfg.StoreURL
	if url == "" {
		dir, err := os.MkdirTemp("", "ssfkit-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench travel: temporary store: %w", err)
		}
		defer os.RemoveAll(dir)
		url = "sqlite://" + filepath.Join(dir, "travel.db")
	}
	u, err := store.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("bench travel: %w", err)
	}
	rep.Store = u.Redacted()
	// Tables named in the URL by the placeholder get this run's own names: a server's tables
	// outlive the run, and a second run must not find the first's data.
	url = strings.ReplaceAll(url, store.TablePlaceholder, store.TablePlaceholder+fmt.Sprintf("travel%d", time.Now().UnixNano()%1e9))

	data := travel.Generate(cfg.Seed, cfg.Capacity)
	total := cfg.Warmup + cfg.Requests
	browse := int(math.Round(cfg.Browse * float64(total)))
	reqs := travel.NewWorkload(data, cfg.Seed).Mix(total-browse, browse, "")
	runs := make([]*travelRun, len(TravelVariants))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.world.close()
			}
		}
	}()
	for i, v := range TravelVariants {
		r, err := newTravelRun(ctx, v, url, data)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	for _, r := range runs {
		fmt.Fprintf(progress, "bench travel: %s: %d warm-up requests\n", r.res.Variant.Name, cfg.Warmup)
		r.block(ctx, reqs, 0, cfg.Warmup, cfg.Concurrency, false)
	}
	for b, start := 0, cfg.Warmup; start < total; b, start = b+1, start+cfg.Block {
		end := min(start+cfg.Block, total)
		for k := range runs {
			runs[(b+k)%len(runs)].block(ctx, reqs, start, end, cfg.Concurrency, true)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(progress, "bench travel: %d of %d measured requests per variant\n", end-cfg.Warmup, cfg.Requests)
	}
	for _, r := range runs {
		if err := r.finish(ctx, cfg.Requests); err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, r.res)
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

// travelRun is one variant's run.
type travelRun struct {
	world   travelWorld
	counter Counter
	res     TravelResult

	mu            sync.Mutex
	reserve       []time.Duration
	browse        []time.Duration
	store         Counts
	elapsed       time.Duration
	confirmations map[string]travel.Confirmation
}

func newTravelRun(ctx context.Context, v TravelVariant, url string, data travel.Data) (*travelRun, error) {
	r := &travelRun{res: TravelResult{Variant: v}, confirmations: map[string]travel.Confirmation{}}
	tables := map[string]*store.Table{}
	closeTables := func() {
		for _, t := range tables {
			t.Close()
		}
	}
	for name := range travel.Handlers() {
		u, err := siblingURL(url, v.key+"_"+name)
		if err != nil {
			closeTables()
			return nil, err
		}
		u = strings.ReplaceAll(u, store.TablePlaceholder, "")
		t, err := openCounted(ctx, u, &r.counter)
		if err != nil {
			closeTables()
			return nil, fmt.Errorf("bench travel: %w", err)
		}
		tables[name] = t
	}
	var err error
	if v.Raw {
		r.world, err = newRawTravel(tables)
	} else {
		r.world, err = newSSFTravel(tables)
	}
	if err != nil {
		closeTables()
		return nil, err
	}
	for _, s := range data.Seed() {
		if _, err := r.world.invoke(ctx, s.SSF, s.ID, s.Input); err != nil {
			return nil, fmt.Errorf("bench travel: %s: loading the data into %s: %w", v.Name, s.SSF, err)
		}
	}
	return r, nil
}

// block runs requests [start, end) in the variant's mode from concurrency clients, measuring
// them if measured.
func (r *travelRun) block(ctx context.Context, reqs []travel.Request, start, end, concurrency int, measured bool) {
	c0, t0 := r.counter.Snapshot(), time.Now()
	next := make(chan int)
	var clients sync.WaitGroup
	for range concurrency {
		clients.Go(func() {
			for i := range next {
				r.request(ctx, i, reqs[i], measured)
			}
		})
	}
	for i := start; i < end && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	clients.Wait()
	if measured {
		r.mu.Lock()
		r.elapsed += time.Since(t0)
		r.store = r.store.add(r.counter.Snapshot().Sub(c0))
		r.mu.Unlock()
	}
}

func (r *travelRun) request(ctx context.Context, i int, req travel.Request, measured bool) {
	reserve := req.Op == travel.OpReserve
	if reserve {
		req.Mode = r.res.Variant.Mode
	}
	t0 := time.Now()
	out, err := r.world.invoke(ctx, travel.Frontend, fmt.Sprintf("req-%06d", i), req)
	d := time.Since(t0)
	var c travel.Confirmation
	if err == nil && reserve {
		err = json.Unmarshal(out, &c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.res.Failed++; r.res.FirstError == "" {
			r.res.FirstError = err.Error()
		}
		return
	}
	if reserve {
		r.confirmations[c.Reservation] = c
	}
	if measured && reserve {
		r.reserve = append(r.reserve, d)
	} else if measured {
		r.browse = append(r.browse, d)
	}
}

// finish summarises the run and checks the app's invariants in its final state.
func (r *travelRun) finish(ctx context.Context, requests int) error {
	res := &r.res
	res.Seconds = r.elapsed.Seconds()
	if res.Seconds > 0 {
		res.Throughput = float64(requests) / res.Seconds
	}
	res.Reserve, res.Browse = Summarize(r.reserve), Summarize(r.browse)
	res.Store = r.store.PerOp(requests)
	for _, c := range r.confirmations {
		switch {
		case c.Booked:
			res.Booked++
		case c.Refused == travel.RefusedContention:
			res.Contention++
			res.Refused++
		default:
			res.Refused++
		}
		res.Retries += max(c.Attempts-1, 0)
	}
	items, err := r.world.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("bench travel: %s: %w", res.Variant.Name, err)
	}
	check := travel.Check(items, r.confirmations)
	res.Overbooked, res.DoubleBooked, res.Unmatched = check.Overbooked, check.DoubleBooked, check.Unmatched
	res.Violations = len(check.Capacity) + len(check.Pairing) + len(check.Outcomes)
	return nil
}

// ssfTravel is the app on ssfkit, hosted in-process.
type ssfTravel struct {
	host     *local.Host
	runtimes map[string]*ssf.Runtime
	tables   map[string]*store.Table
}

func newSSFTravel(tables map[string]*store.Table) (*ssfTravel, error) {
	w := &ssfTravel{host: local.NewHost(), runtimes: map[string]*ssf.Runtime{}, tables: tables}
	for name, h := range travel.Handlers() {
		rt, err := w.host.Add(ssf.Config{Name: name, Store: tables[name], Handler: h})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("bench travel: %w", err)
		}
		w.runtimes[name] = rt
	}
	return w, nil
}

func (w *ssfTravel) invoke(ctx context.Context, ssfName, id string, input any) (json.RawMessage, error) {
	res, err := w.host.Invoke(ctx, ssfName, id, input)
	if err != nil {
		return nil, err
	}
	return res.Output, res.Err()
}

func (w *ssfTravel) snapshot(ctx context.Context) (travel.Items, error) {
	return travel.Snapshot(ctx, w.runtimes)
}

func (w *ssfTravel) close() {
	w.host.Close()
	for _, t := range w.tables {
		t.Close()
	}
}

// rawTravel is the app without ssfkit.
type rawTravel struct {
	raw    *travel.Raw
	tables map[string]*store.Table
}

func newRawTravel(tables map[string]*store.Table) (*rawTravel, error) {
	raw, err := travel.NewRaw(tables)
	if err != nil {
		return nil, fmt.Errorf("bench travel: %w", err)
	}
	return &rawTravel{raw: raw, tables: tables}, nil
}

func (w *rawTravel) invoke(ctx context.Context, ssfName, id string, input any) (json.RawMessage, error) {
	return w.raw.Invoke(ctx, ssfName, id, input)
}

func (w *rawTravel) snapshot(ctx context.Context) (travel.Items, error) { return w.raw.Snapshot(ctx) }

func (w *rawTravel) close() {
	for _, t := range w.tables {
		t.Close()
	}
}

// Result returns the named variant's result, if the report has it.
func (r *TravelReport) Result(name string) (TravelResult, bool) {
	i := slices.IndexFunc(r.Results, func(x TravelResult) bool { return x.Variant.Name == name })
	if i < 0 {
		return TravelResult{}, false
	}
	return r.Results[i], true
}

// WriteMarkdown writes the report as Markdown.
func (r *TravelReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ssfkit bench travel\n\n")
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- store: `%s`; each variant on its own tables, one per SSF\n", r.Store)
	fmt.Fprintf(&b, "- per variant: %d requests measured after %d unmeasured, %.0f%% of them searches, recommendations and logins, the rest reservations; the same requests for every variant (seed %d)\n",
		r.Requests, r.Warmup, 100*r.Browse, r.Seed)
	fmt.Fprintf(&b, "- reservations pick a hotel and a flight by a normal distribution over 100 each (mean 50, sd 15); %d to %d rooms or seats each\n",
		(r.Capacity+1)/2, r.Capacity)
	fmt.Fprintf(&b, "- %d clients, each sending its next request when the last returns; the variants take turns in blocks of %d requests (the order rotates every block); throughput = measured requests / time in measured blocks\n",
		r.Concurrency, r.Block)
	fmt.Fprintf(&b, "- started %s; took %.1f s; p99 is nearest-rank\n\n", r.Started.UTC().Format(time.RFC3339), r.Seconds)
	b.WriteString("| variant | requests/s | reserve median ms | reserve p99 ms | reserve mean ms |")
	if r.Browse > 0 {
		b.WriteString(" browse median ms | browse p99 ms |")
	}
	b.WriteString(" store requests per request | booked | refused | wait-die retries | overbooked | double-booked | unmatched | failed |\n|---|--:|--:|--:|--:|")
	if r.Browse > 0 {
		b.WriteString("--:|--:|")
	}
	b.WriteString("--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.2f |", x.Variant.Name, x.Throughput, x.Reserve.MedianUS/1000, x.Reserve.P99US/1000, x.Reserve.MeanUS/1000)
		if r.Browse > 0 {
			fmt.Fprintf(&b, " %.2f | %.2f |", x.Browse.MedianUS/1000, x.Browse.P99US/1000)
		}
		fmt.Fprintf(&b, " %.1f | %d | %d | %d | %d | %d | %d | %d |\n", x.Store.RoundTrips(), x.Booked, x.Refused, x.Retries,
			x.Overbooked, x.DoubleBooked, x.Unmatched, x.Failed)
	}
	tx, okTx := r.Result("transactions")
	eo, okEO := r.Result("exactly-once")
	raw, okRaw := r.Result("neither")
	if okTx && okEO && okRaw {
		fmt.Fprintf(&b, "\nTransactions vs exactly-once alone: reservation median %.2fx, p99 %.2fx, throughput %.2fx. Exactly-once vs neither: median %.2fx, p99 %.2fx, throughput %.2fx.\n",
			ratio(tx.Reserve.MedianUS, eo.Reserve.MedianUS), ratio(tx.Reserve.P99US, eo.Reserve.P99US), ratio(tx.Throughput, eo.Throughput),
			ratio(eo.Reserve.MedianUS, raw.Reserve.MedianUS), ratio(eo.Reserve.P99US, raw.Reserve.P99US), ratio(eo.Throughput, raw.Throughput))
	}
	b.WriteString(`
- transactions: the order SSF begins a transaction, calls hotel then flight (each reads its count under the item's lock, checks it, writes it back with a booking), and ends it; a transaction that wait-die aborts is retried after a pause
- exactly-once: the same calls without the transaction; each count is a compare-and-swap (CondWrite), so nothing is overbooked, but a full flight leaves its hotel booking unmatched
- neither: the same code as the unsafe mode (plain read-check-write, no transaction) on travel.Raw, without ssfkit: a read is one store Get, a write one Update, a call a Go function call, nothing logged (Beldi's baseline)
- overbooked: bookings beyond capacity; double-booked: bookings an item's count misses (two reservations took the same room or seat); unmatched: reservations booked at a hotel without a flight or the reverse
`)
	if failed := slices.IndexFunc(r.Results, func(x TravelResult) bool { return x.Failed > 0 }); failed >= 0 {
		fmt.Fprintf(&b, "\n%s: %d requests failed; the first: %s\n", r.Results[failed].Variant.Name, r.Results[failed].Failed, r.Results[failed].FirstError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
