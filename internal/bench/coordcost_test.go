package bench

import (
	"math"
	"testing"
)

// The cost model adds up what an operation does at each price: checked by hand for AWS on a
// write of 2 reads and 1 write, a read served from the replica, and a notification.
func TestRunCostArithmetic(t *testing.T) {
	so := func(gets, updates float64) *StoreOps { return &StoreOps{Gets: gets, Updates: updates} }
	op := func(name string, store *StoreOps) CoordOpResult {
		r := CoordOpTarget{Target: "ssfkit-x", Store: store}
		if store != nil {
			r.StoreRequests = store.RoundTrips()
		}
		return CoordOpResult{Op: name, Targets: []CoordOpTarget{{Target: ZooKeeperTarget}, r}}
	}
	rep := &CoordReport{Targets: []string{ZooKeeperTarget, "ssfkit-x"}, Ops: []CoordOpResult{
		op("get", so(0, 0)), op("set", so(2, 1)), op("watch", so(2, 1)),
	}}
	cfg := CostConfig{StoreRequestSeconds: 0.008, ComputeSeconds: 0.002, ReadFraction: 0.9, Ensemble: 3}
	cr, err := RunCost(rep, "ssfkit-x", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunCost(rep, ZooKeeperTarget, cfg); err == nil {
		t.Error("ZooKeeper has no store requests: RunCost must refuse it")
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
	storeWrite := 2*p.Read + p.Write
	writer := p.Invocation + (3*0.008+0.002)*p.MemoryGB*p.GBSecond
	near("reads, server", aws.ReadsServer, 0)
	near("reads, serverless", aws.Reads, 1e6*p.Read)
	near("writes, server", aws.WritesServer, 1e6*storeWrite)
	near("writes, serverless", aws.Writes, 1e6*(storeWrite+p.Message+writer))
	near("watch notifications", aws.Watches, 1e6*(p.Message+p.Invocation+0.002*p.MemoryGB*p.GBSecond))
	near("ensemble", aws.EnsembleMonthly, 3*(p.VMHourly*730+p.DiskMonthly))
	perRequest := 0.9*p.Read + 0.1*(storeWrite+p.Message+writer)
	near("break-even", aws.BreakEvenPerDay, aws.EnsembleMonthly/(30*perRequest))
	// Azure and GCP bill at least 100 ms per function run.
	for _, c := range cr.Clouds[1:] {
		if c.Prices.MinSeconds < 0.1 || c.Writes <= c.WritesServer+1e6*c.Prices.Message {
			t.Errorf("%s: %+v", c.Prices.Cloud, c)
		}
	}
}
