package bench

import (
	"fmt"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// CloudPrices are one cloud's list prices for the serverless path of the coordination service
// (FaaSKeeper's Table 4 with today's prices) and for the ZooKeeper ensemble it replaces. Prices
// are in USD; Sources and Assumptions say where each came from (docs/coordination.md).
type CloudPrices struct {
	Cloud, Function, Store, Queue, VM string
	// Functions: per invocation, per GB-second (Cloud Run: per vCPU-second plus per GiB-second
	// folded into GBSecond at MemoryGB and one vCPU), the memory configured, and the shortest
	// billed duration.
	Invocation, GBSecond, MemoryGB, MinSeconds float64
	// Store: a strongly consistent read of a row up to 4 KB, a write of a row up to 1 KB (the
	// log rows of small znodes stay under 1 KB).
	Read, Write float64
	// Queue: one wake-up message sent, received and deleted (all requests it takes).
	Message float64
	// VMHourly and DiskMonthly price one ensemble member: a small VM and its disk.
	VMHourly, DiskMonthly float64
}

// CostPrices are the prices docs/coordination.md's cost model uses, checked 2026-11-26 (see
// its sources and which are assumptions).
var CostPrices = []CloudPrices{
	{Cloud: "AWS", Function: "Lambda (512 MB)", Store: "DynamoDB on-demand", Queue: "SQS standard", VM: "t3.small + 20 GB gp3",
		Invocation: 0.20e-6, GBSecond: 0.0000166667, MemoryGB: 0.5, MinSeconds: 0.001,
		Read: 0.125e-6, Write: 0.625e-6, Message: 3 * 0.40e-6,
		VMHourly: 0.0208, DiskMonthly: 20 * 0.08},
	{Cloud: "Azure", Function: "Functions consumption (512 MB)", Store: "Table Storage (LRS)", Queue: "Storage Queues (LRS)", VM: "B1ms + 32 GiB Standard SSD",
		Invocation: 0.20e-6, GBSecond: 0.000016, MemoryGB: 0.5, MinSeconds: 0.1,
		Read: 0.00036 / 1e4, Write: 0.00036 / 1e4, Message: 3 * 0.0004 / 1e4,
		VMHourly: 0.0207, DiskMonthly: 2.40},
	{Cloud: "GCP", Function: "Cloud Run (1 vCPU, 512 MiB)", Store: "Firestore (regional)", Queue: "Pub/Sub", VM: "e2-small + 20 GB pd-balanced",
		Invocation: 0.40e-6, GBSecond: 0.000024 + 0.5*0.0000025, MemoryGB: 1, MinSeconds: 0.1,
		Read: 0.03 / 1e5, Write: 0.09 / 1e5, Message: 40 * 2000 / math.Pow(2, 40),
		VMHourly: 0.0168, DiskMonthly: 20 * 0.10},
}

// CostConfig are the model's inputs beyond the prices.
type CostConfig struct {
	// StoreRequestSeconds is one cloud table request's latency, which a function waits out
	// (FaaSKeeper Table 3: ~8 ms for DynamoDB's lock and commit, p50).
	StoreRequestSeconds float64
	// ComputeSeconds is a function's own work besides store requests and queue pushes.
	ComputeSeconds float64
	// ReadFraction is the share of reads in the workload of the chart and the break-even.
	ReadFraction float64
	// Ensemble is the number of ZooKeeper servers (3: the smallest that tolerates a failure).
	Ensemble int
	// Proxies is the number of `ssfkit coord proxy` sidecars (one per application instance),
	// and ProxyTickSeconds their tick: each reads the log's tail and scans the session rows
	// once per tick while idle, a fixed cost per proxy.
	Proxies          int
	ProxyTickSeconds float64
	// HeartbeatEveryMinutes is the heartbeat function's schedule (the modules' default: 1).
	HeartbeatEveryMinutes float64
}

// DefaultCostConfig is what docs/coordination.md uses.
var DefaultCostConfig = CostConfig{StoreRequestSeconds: 0.008, ComputeSeconds: 0.002, ReadFraction: 0.9, Ensemble: 3,
	Proxies: 3, ProxyTickSeconds: 0.2, HeartbeatEveryMinutes: 1}

// monthSeconds is 730 hours.
const monthSeconds = 730 * 3600

// CostReport is the cost model evaluated on one bench coord report's request counts.
type CostReport struct {
	Target           string      `json:"target"`            // the server target whose counts it uses
	ServerlessTarget string      `json:"serverless_target"` // the serverless target whose counts it uses
	Config           CostConfig  `json:"config"`
	Counts           CostCounts  `json:"measured"`
	Serverless       CostCounts  `json:"measured_serverless"`
	Clouds           []CloudCost `json:"clouds"`
}

// CostCounts are the store requests per operation measured by bench coord.
type CostCounts struct {
	ReadRequests  float64 `json:"read_requests"`  // get
	WriteReads    float64 `json:"write_reads"`    // set: gets and scans
	WriteWrites   float64 `json:"write_writes"`   // set: updates and deletes
	WatchExtra    float64 `json:"watch_extra"`    // watch op minus set: what delivering the event adds
	SetMedianUS   float64 `json:"set_median_us"`  // for reference
	WritePathUS   float64 `json:"write_path_us"`  // server write path p50
	ReadMedianUSs float64 `json:"get_median_us"`  // for reference
	Source        string  `json:"source_started"` // the report's start time
}

// CloudCost is one cloud's cost per million operations and its break-even with the ensemble.
type CloudCost struct {
	Prices CloudPrices `json:"prices"`
	// Per million operations, USD.
	ReadsServer  float64 `json:"reads_server_per_m"`  // servers: served from the replica
	Reads        float64 `json:"reads_per_m"`         // serverless: served from the proxy's replica
	WritesServer float64 `json:"writes_server_per_m"` // servers: the measured store requests only
	Writes       float64 `json:"writes_per_m"`        // serverless: its measured requests + a wake-up message + a writer invocation
	Watches      float64 `json:"watch_notifications_per_m"`
	// FixedMonthly is what the serverless path costs with no traffic: the heartbeat function
	// on its schedule and the proxies' idle ticks.
	FixedMonthly float64 `json:"fixed_monthly"`
	// EnsembleMonthly is Ensemble VMs with disks for 730 hours.
	EnsembleMonthly float64 `json:"ensemble_monthly"`
	// BreakEvenPerDay is the requests per day (at ReadFraction reads) at which the serverless
	// path costs as much per month as the ensemble (0: it never does, its fixed cost is higher).
	BreakEvenPerDay float64 `json:"break_even_requests_per_day"`
}

// invocation is one function run lasting seconds, billed at least MinSeconds.
func (p CloudPrices) invocation(seconds float64) float64 {
	return p.Invocation + max(seconds, p.MinSeconds)*p.MemoryGB*p.GBSecond
}

// perRequest is the serverless cost of one request of the ReadFraction mix.
func (c CloudCost) perRequest(readFraction float64) float64 {
	return (readFraction*c.Reads + (1-readFraction)*c.Writes) / 1e6
}

// counts reads target's store requests per get, set and watch from rep.
func counts(rep *CoordReport, target string) (CostCounts, error) {
	find := func(op string) (*CoordOpTarget, error) {
		for _, o := range rep.Ops {
			if o.Op != op {
				continue
			}
			for i := range o.Targets {
				if o.Targets[i].Target == target && o.Targets[i].Store != nil {
					return &o.Targets[i], nil
				}
			}
		}
		return nil, fmt.Errorf("bench coord-cost: the report has no %s measurement with store requests for %q (targets: %s)", op, target, strings.Join(rep.Targets, ", "))
	}
	get, err := find("get")
	if err != nil {
		return CostCounts{}, err
	}
	set, err := find("set")
	if err != nil {
		return CostCounts{}, err
	}
	watch, err := find("watch")
	if err != nil {
		return CostCounts{}, err
	}
	k := CostCounts{
		ReadRequests: get.StoreRequests,
		WriteReads:   set.Store.Gets + set.Store.Scans,
		WriteWrites:  set.Store.Updates + set.Store.Deletes,
		WatchExtra:   max(watch.StoreRequests-set.StoreRequests, 0),
		SetMedianUS:  set.Latency.MedianUS, ReadMedianUSs: get.Latency.MedianUS,
		Source: rep.Started.UTC().Format("2006-01-02T15:04:05Z"),
	}
	for _, s := range rep.Stages {
		if s.Target == target && len(s.Stages) > 0 {
			k.WritePathUS = s.Stages[len(s.Stages)-1].P50US
		}
	}
	return k, nil
}

// RunCost evaluates the model on rep's counts: target's (a server) and serverless's (the
// serverless path, `bench coord --serverless`).
func RunCost(rep *CoordReport, target, serverless string, cfg CostConfig) (*CostReport, error) {
	k, err := counts(rep, target)
	if err != nil {
		return nil, err
	}
	sk, err := counts(rep, serverless)
	if err != nil {
		return nil, fmt.Errorf("%w (measure it with `ssfkit bench coord --serverless STORE`)", err)
	}
	cr := &CostReport{Target: target, ServerlessTarget: serverless, Config: cfg, Counts: k, Serverless: sk}
	for _, p := range CostPrices {
		c := CloudCost{Prices: p,
			ReadsServer:  1e6 * k.ReadRequests * p.Read,
			Reads:        1e6 * sk.ReadRequests * p.Read,
			WritesServer: 1e6 * (k.WriteReads*p.Read + k.WriteWrites*p.Write),
			Watches:      1e6 * sk.WatchExtra * p.Read,
		}
		// A write: the whole path's store requests (proxy and writer), the wake-up message,
		// and a writer invocation that waits out the store requests it makes (all but the
		// proxy's conditional create and its tail reads, counted here as the writer's too: an
		// upper bound).
		writerSeconds := (sk.WriteReads+sk.WriteWrites)*cfg.StoreRequestSeconds + cfg.ComputeSeconds
		c.Writes = 1e6 * (sk.WriteReads*p.Read + sk.WriteWrites*p.Write + p.Message + p.invocation(writerSeconds))
		// The heartbeat: one run per period, reading the log's tail and scanning the sessions.
		if cfg.HeartbeatEveryMinutes > 0 {
			runs := monthSeconds / (60 * cfg.HeartbeatEveryMinutes)
			c.FixedMonthly += runs * (2*p.Read + p.invocation(2*cfg.StoreRequestSeconds+cfg.ComputeSeconds))
		}
		// Each proxy's idle tick: a read of the log's tail and a scan of the session rows.
		if cfg.ProxyTickSeconds > 0 {
			c.FixedMonthly += float64(cfg.Proxies) * monthSeconds / cfg.ProxyTickSeconds * 2 * p.Read
		}
		c.EnsembleMonthly = float64(cfg.Ensemble) * (p.VMHourly*730 + p.DiskMonthly)
		if per := c.perRequest(cfg.ReadFraction); per > 0 && c.EnsembleMonthly > c.FixedMonthly {
			c.BreakEvenPerDay = (c.EnsembleMonthly - c.FixedMonthly) / (30 * per)
		}
		cr.Clouds = append(cr.Clouds, c)
	}
	return cr, nil
}

// WriteMarkdown renders the model's numbers.
func (r *CostReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	k := r.Counts
	fmt.Fprintf(&b, "# ssfkit bench coord-cost\n\n")
	sk := r.Serverless
	fmt.Fprintf(&b, "- store requests per operation measured (bench coord started %s) on %s: read %s, write %s reads + %s writes, a watch notification %s more; "+
		"on %s: read %s, write %s reads + %s writes, a watch notification %s more\n",
		k.Source, r.Target, num(k.ReadRequests), num(k.WriteReads), num(k.WriteWrites), num(k.WatchExtra),
		r.ServerlessTarget, num(sk.ReadRequests), num(sk.WriteReads), num(sk.WriteWrites), num(sk.WatchExtra))
	fmt.Fprintf(&b, "- functions wait %.0f ms per cloud store request and compute %.0f ms; the ensemble is %d VMs; the mix %.0f%% reads; "+
		"%d proxies ticking every %.1f s; the heartbeat every %.0f min\n\n",
		r.Config.StoreRequestSeconds*1000, r.Config.ComputeSeconds*1000, r.Config.Ensemble, r.Config.ReadFraction*100,
		r.Config.Proxies, r.Config.ProxyTickSeconds, r.Config.HeartbeatEveryMinutes)
	b.WriteString("USD per million operations; \"server\" counts a server's store requests only (its VM is extra), \"serverless\" the serverless path's: " +
		"the measured requests of proxy and writer, a wake-up message and a writer invocation per write; reads and notifications come from the proxy's replica. " +
		"The serverless path's fixed cost per month is its heartbeat and its proxies' idle ticks:\n\n")
	b.WriteString("| cloud | reads, server | reads, serverless | writes, server | writes, serverless | watch notifications | serverless fixed $/month | ensemble $/month | break-even requests/day |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range r.Clouds {
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %s |\n", c.Prices.Cloud, c.ReadsServer, c.Reads, c.WritesServer, c.Writes, c.Watches,
			c.FixedMonthly, c.EnsembleMonthly, millions(c.BreakEvenPerDay))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func millions(n float64) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.1fM", n/1e6)
	}
	return fmt.Sprintf("%.0fk", n/1e3)
}

// WritePlot draws monthly cost against requests per day: the serverless path per cloud (at
// ReadFraction reads) and the ensemble per cloud, log-log.
func (r *CostReport) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Monthly cost: serverless coordination (%.0f%% reads) vs a %d-node ZooKeeper ensemble", r.Config.ReadFraction*100, r.Config.Ensemble)
	p.X.Label.Text = "requests per day"
	p.Y.Label.Text = "USD per month"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false // bottom right: below the rising lines
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)
	for i, c := range r.Clouds {
		var serverless, ensemble plotter.XYs
		for e := 3.0; e <= 9.0001; e += 0.125 {
			perDay := math.Pow(10, e)
			serverless = append(serverless, plotter.XY{X: perDay, Y: c.FixedMonthly + 30*perDay*c.perRequest(r.Config.ReadFraction)})
			ensemble = append(ensemble, plotter.XY{X: perDay, Y: c.EnsembleMonthly})
		}
		for _, l := range []struct {
			name   string
			xy     plotter.XYs
			dashed bool
		}{{c.Prices.Cloud + " serverless", serverless, false}, {c.Prices.Cloud + " ZooKeeper ensemble", ensemble, true}} {
			lp, err := plotter.NewLine(l.xy)
			if err != nil {
				return fmt.Errorf("plot %s: %w", path, err)
			}
			lp.Color, lp.Width = barColors[i], vg.Points(1.5)
			if l.dashed {
				lp.Dashes = dashes
			}
			p.Add(lp)
			p.Legend.Add(l.name, lp)
		}
	}
	if err := p.Save(9*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
