package bench

import (
	"math"
	"strings"
	"testing"
)

// The cost model adds up what an operation does at each price: checked by hand for AWS on a
// server's write of 1 read and 1 write, the serverless path's write of 3 reads, 1 scan, 2 writes
// and a delete, reads and notifications served from a replica, and the fixed monthly cost.
func TestRunCostArithmetic(t *testing.T) {
	op := func(name string, server, serverless *StoreOps) CoordOpResult {
		r := CoordOpResult{Op: name, Targets: []CoordOpTarget{{Target: ZooKeeperTarget}}}
		for target, store := range map[string]*StoreOps{"ssfkit-x": server, "ssfkit-x-serverless": serverless} {
			r.Targets = append(r.Targets, CoordOpTarget{Target: target, Store: store, StoreRequests: store.RoundTrips()})
		}
		return r
	}
	write := &StoreOps{Gets: 3, Scans: 1, Updates: 2, Deletes: 1}
	rep := &CoordReport{Targets: []string{ZooKeeperTarget, "ssfkit-x", "ssfkit-x-serverless"}, Ops: []CoordOpResult{
		op("get", &StoreOps{}, &StoreOps{}), op("set", &StoreOps{Gets: 1, Updates: 1}, write), op("watch", &StoreOps{Gets: 1, Updates: 1}, write),
	}}
	cfg := CostConfig{StoreRequestSeconds: 0.008, ComputeSeconds: 0.002, ReadFraction: 0.9, Ensemble: 3, Proxies: 2, ProxyTickSeconds: 0.5, HeartbeatEveryMinutes: 1}
	cr, err := RunCost(rep, "ssfkit-x", "ssfkit-x-serverless", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunCost(rep, ZooKeeperTarget, "ssfkit-x-serverless", cfg); err == nil {
		t.Error("ZooKeeper has no store requests: RunCost must refuse it")
	}
	if _, err := RunCost(rep, "ssfkit-x", "ssfkit-y-serverless", cfg); err == nil || !strings.Contains(err.Error(), "--serverless") {
		t.Errorf("a report without the serverless target: %v, want an error saying how to measure it", err)
	}
	aws := cr.Clouds[0]
	if aws.Prices.Cloud != "AWS" {
		t.Fatalf("first cloud %s", aws.Prices.Cloud)
	}
	p := aws.Prices
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	writer := p.Invocation + (7*0.008+0.002)*p.MemoryGB*p.GBSecond
	serverlessWrite := 4*p.Read + 3*p.Write + p.Message + writer
	near("reads, server", aws.ReadsServer, 0)
	near("reads, serverless", aws.Reads, 0)
	near("writes, server", aws.WritesServer, 1e6*(p.Read+p.Write))
	near("writes, serverless", aws.Writes, 1e6*serverlessWrite)
	near("watch notifications", aws.Watches, 0)
	heartbeat := 43800 * (2*p.Read + p.Invocation + (2*0.008+0.002)*p.MemoryGB*p.GBSecond)
	proxies := 2 * (730 * 3600 / 0.5) * 2 * p.Read
	near("fixed", aws.FixedMonthly, heartbeat+proxies)
	near("ensemble", aws.EnsembleMonthly, 3*(p.VMHourly*730+p.DiskMonthly))
	near("break-even", aws.BreakEvenPerDay, (aws.EnsembleMonthly-aws.FixedMonthly)/(30*0.1*serverlessWrite))
	// Azure and GCP bill at least 100 ms per function run.
	for _, c := range cr.Clouds[1:] {
		if c.Prices.MinSeconds < 0.1 || c.Writes <= c.WritesServer+1e6*c.Prices.Message {
			t.Errorf("%s: %+v", c.Prices.Cloud, c)
		}
	}
}
