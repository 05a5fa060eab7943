package apps

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/examples/travel"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// TravelDevData is the data `ssfkit dev --app travel` loads: fixed, so that restarting dev on
// the same store finds it already loaded.
func TravelDevData() travel.Data { return travel.Generate(20201104, 10) }

var travelApp = App{
	Name:     "travel",
	Title:    "the travel reservation example",
	Handlers: travel.Handlers,
	Entry:    travel.Frontend,
	demo:     func() workload { return &travelDemo{} },
	Load: func(ctx context.Context, h *local.Host) error {
		return loadTravel(ctx, h, TravelDevData())
	},
	Workflows: func(r worker.WorkflowRegistry) {
		r.RegisterWorkflowWithOptions(travel.ReserveWorkflow, workflow.RegisterOptions{Name: travel.ReserveWorkflowName})
	},
	Try: func(base string) string {
		u := TravelDevData().Users[7]
		return fmt.Sprintf(`  curl -s %[1]s/v1/ssf/frontend \
    -H 'Idempotency-Key: search-1' \
    -d '{"op":"search","lat":37.7749,"lon":-122.4194,"max_price":200}'
  curl -s %[1]s/v1/ssf/frontend \
    -H 'Idempotency-Key: recommend-1' \
    -d '{"op":"recommend","by":"rate","limit":3}'
  curl -s %[1]s/v1/ssf/frontend \
    -H 'Idempotency-Key: reserve-1' \
    -d '{"op":"reserve","user":"%[2]s","password":"%[3]s",
         "hotel":"h50","flight":"f50"}'
  curl -s %[1]s/v1/ssf/hotel/items
`, base, u.Name, u.Password)
	},
}

// loadTravel loads data into the travel SSFs. A loading instance that outlives its lifetime on
// a slow machine is abandoned after some of its writes; sending its request again replays
// those and goes on from there, so a few attempts finish it.
func loadTravel(ctx context.Context, h *local.Host, data travel.Data) error {
	for _, s := range data.Seed() {
		res, err := h.Invoke(ctx, s.SSF, s.ID, s.Input)
		var abandoned *ssf.ExecutionError
		for attempt := 1; errors.As(err, &abandoned) && attempt < maxLoadAttempts; attempt++ {
			res, err = h.Invoke(ctx, s.SSF, s.ID, s.Input)
		}
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			return fmt.Errorf("loading the travel data into %s: %w", s.SSF, err)
		}
	}
	return nil
}

// maxLoadAttempts bounds the executions of one loading request.
const maxLoadAttempts = 10

// travelDemo is the travel reservation app in the demo: reservations, each a transaction over
// hotel and flight, mixed with searches, recommendations and logins.
type travelDemo struct {
	reservations, browse int
	capacity             int64
	data                 travel.Data
	requests             map[string]travel.Request
}

func (t *travelDemo) flags(fs *flag.FlagSet) {
	fs.IntVar(&t.reservations, "reservations", 200, "number of reservations (a hotel room and a flight seat each)")
	fs.IntVar(&t.browse, "browse", 100, "number of searches, recommendations and logins mixed in")
	fs.Int64Var(&t.capacity, "capacity", 4, "rooms per hotel and seats per flight, at most (each has between half this and this)")
}

func (t *travelDemo) validate() error {
	switch {
	case t.reservations < 1 || t.reservations > 100_000:
		return fmt.Errorf("demo: --reservations %d: want 1 to 100000", t.reservations)
	case t.browse < 0 || t.browse > 100_000:
		return fmt.Errorf("demo: --browse %d: want 0 to 100000", t.browse)
	case t.capacity < 1 || t.capacity > 1000:
		return fmt.Errorf("demo: --capacity %d: want 1 to 1000", t.capacity)
	}
	return nil
}

func (t *travelDemo) info() demoInfo {
	return demoInfo{
		synopsis: `Runs the travel reservation example (Beldi's: ten SSFs, a reservation books a
hotel room and a flight seat in one transaction) on the embedded SQLite store
while killing executions at random points, with the intent and garbage
collectors running on timers, then checks that no hotel or flight was
overbooked, that every reservation is booked at its hotel if and only if it is
booked on its flight, and that no lock is left held. Exits with status 1 if an
invariant fails.`,
		title: "ssfkit demo travel: a hotel and a flight in one transaction, crashes injected",
		intro: `Ten stateful serverless functions (Beldi's travel reservation app): frontend
routes searches (search -> geo, rate; profile), recommendations and logins;
a reservation goes to order, which begins a transaction and calls hotel, then
flight. Their reads lock the room and seat counts (two-phase locking, wait-die)
and EndTx commits both bookings or neither. Hotels and flights are picked by a
normal distribution, so the middle ones fill up and reservations contend for
their locks; a transaction that dies in a conflict is retried. Executions are
killed at random steps; the intent collector re-runs them.`,
		workload: fmt.Sprintf("%d reservations, %d searches, recommendations and logins;\n"+
			"              %d hotels and %d flights of %d to %d rooms or seats",
			t.reservations, t.browse, travel.NumHotels, travel.NumFlights, (t.capacity+1)/2, t.capacity),
		section:  "Reservations",
		requests: "requests",
		finished: "every request finished, and every transaction it began",
	}
}

// plan draws the data and the requests, the browsing spread evenly among the reservations.
func (t *travelDemo) plan(seed uint64) ([]string, map[string]any) {
	t.data = travel.Generate(seed, t.capacity)
	reqs := travel.NewWorkload(t.data, seed).Mix(t.reservations, t.browse, travel.ModeTransaction)
	t.requests = map[string]travel.Request{}
	var ids []string
	inputs := map[string]any{}
	width := max(len(fmt.Sprint(len(reqs))), 4)
	for i, req := range reqs {
		id := fmt.Sprintf("%s-%0*d", req.Op, width, i+1)
		ids = append(ids, id)
		t.requests[id], inputs[id] = req, req
	}
	return ids, inputs
}

func (t *travelDemo) setup(ctx context.Context, h *local.Host) error {
	return loadTravel(ctx, h, t.data)
}

func (t *travelDemo) snapshot(ctx context.Context, runtimes map[string]*ssf.Runtime) (appState, error) {
	return travel.Snapshot(ctx, runtimes)
}

// outcomes decodes the results: confirmations of reservations by reservation id, how many
// other requests were answered, and the requests that failed.
func (t *travelDemo) outcomes(d *Demo) (confirmations map[string]travel.Confirmation, answered int, failures []error) {
	results := d.finishedResults()
	confirmations = map[string]travel.Confirmation{}
	for _, id := range d.ids {
		res, ok := results[id]
		switch {
		case !ok:
			failures = append(failures, fmt.Errorf("%s: no result", id))
		case res.Error != "":
			failures = append(failures, fmt.Errorf("%s failed: %s", id, res.Error))
		case t.requests[id].Op != travel.OpReserve:
			answered++
		default:
			var c travel.Confirmation
			if err := json.Unmarshal(res.Output, &c); err != nil {
				failures = append(failures, fmt.Errorf("%s: unreadable confirmation %s: %v", id, res.Output, err))
				continue
			}
			confirmations[c.Reservation] = c
		}
	}
	return confirmations, answered, failures
}

func (t *travelDemo) summary(d *Demo) {
	confirmations, answered, _ := t.outcomes(d)
	booked, retries, maxRetries := 0, 0, 0
	refused := map[string]int{}
	for _, c := range confirmations {
		if c.Booked {
			booked++
		} else {
			refused[c.Refused]++
		}
		retries += max(c.Attempts-1, 0)
		maxRetries = max(maxRetries, c.Attempts-1)
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(refused)) {
		why = append(why, fmt.Sprintf("%d %s", refused[r], strings.ReplaceAll(r, "-", " ")))
	}
	d.printf("  %d reservations: %d booked, %d refused (%s)\n", t.reservations, booked, len(confirmations)-booked, strings.Join(why, ", "))
	d.printf("  %d wait-die aborts retried (at most %d for one reservation)\n", retries, maxRetries)
	d.printf("  %d searches, recommendations and logins answered\n", answered)
}

// report prints how full the hotels and flights are.
func (t *travelDemo) report(d *Demo, it appState) {
	d.printf("\nBookings\n")
	for _, side := range []struct{ ssf, table, units, plural string }{
		{travel.Hotel, "rooms", "rooms", "hotels"}, {travel.Flight, "seats", "seats", "flights"},
	} {
		var booked, capacity int64
		items, full := 0, 0
		for k, v := range it[side.ssf] {
			var s travel.Stock
			if !strings.HasPrefix(k, side.table+"/") || json.Unmarshal(v, &s) != nil {
				continue
			}
			items++
			booked += s.Booked
			capacity += s.Capacity
			if s.Booked >= s.Capacity {
				full++
			}
		}
		d.printf("  %-8s %4d of %4d %s booked; %3d of %d %s full\n", side.plural, booked, capacity, side.units, full, items, side.plural)
	}
}

func (t *travelDemo) invariants(ctx context.Context, d *Demo, after appState) {
	confirmations, _, failures := t.outcomes(d)
	r := travel.Check(after, confirmations)
	d.check("capacity never exceeded", r.Capacity, "no hotel or flight overbooked or double-booked")
	d.check("hotel booked iff flight booked", r.Pairing, fmt.Sprintf("%d reservations, each booked on both", r.Booked))
	d.check("outcomes agree with the bookings", append(failures, r.Outcomes...),
		fmt.Sprintf("%d confirmations, %d order records", len(confirmations), r.Orders))
	var held []error
	for _, name := range slices.Sorted(maps.Keys(d.hosted.Runtimes)) {
		locks, err := d.hosted.Runtimes[name].Locks(ctx)
		if err != nil {
			held = append(held, fmt.Errorf("%s: reading its locks: %v", name, err))
		}
		for _, item := range slices.Sorted(maps.Keys(locks)) {
			held = append(held, fmt.Errorf("%s: %s is locked by %s", name, item, locks[item]))
		}
	}
	d.check("no lock left held", held, fmt.Sprintf("no item of the %d SSFs is locked", len(d.hosted.Runtimes)))
}
