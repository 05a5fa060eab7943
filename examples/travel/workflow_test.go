package travel

import (
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

// runReserve runs ReserveWorkflow in Temporal's test environment against the app's SSFs.
func runReserve(t *testing.T, a *app, id string, req Request) (Confirmation, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quietLogger))
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReserveWorkflow, workflow.RegisterOptions{Name: ReserveWorkflowName})
	ssftemporal.Register(env, a.host.Runtimes()...)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.SetTestTimeout(time.Minute)
	env.ExecuteWorkflow(ReserveWorkflowName, req)
	var c Confirmation
	err := env.GetWorkflowResult(&c)
	return c, err
}

func reserveRequest(a *app, user int) Request {
	u := a.data.Users[user]
	return Request{Op: OpReserve, User: u.Name, Password: u.Password, Hotel: "h00", Flight: "f00"}
}

// The workflow books both or neither, and refuses a wrong password before booking anything.
func TestReserveWorkflowAllOrNothing(t *testing.T) {
	a := newApp(t, fixture(2, 1), nil)
	confirmations := map[string]Confirmation{}
	for i, want := range []struct {
		booked  bool
		refused string
	}{{true, ""}, {false, RefusedFlightFull}} {
		c, err := runReserve(t, a, fmt.Sprint("wf-res-", i), reserveRequest(a, i))
		if err != nil || c.Booked != want.booked || c.Refused != want.refused {
			t.Fatalf("reservation %d: %+v, %v; want booked %v, refused %q", i, c, err, want.booked, want.refused)
		}
		confirmations[c.Reservation] = c
	}
	bad := reserveRequest(a, 0)
	bad.Password = "wrong"
	if c, err := runReserve(t, a, "wf-bad-login", bad); err != nil || c.Booked || c.Refused != RefusedLogin {
		t.Fatalf("wrong password: %+v, %v", c, err)
	}
	if r := a.check(t, confirmations); r.Err() != nil || r.Booked != 1 {
		t.Fatalf("booked %d: %v", r.Booked, r.Err())
	}
	a.noLocks(t)
	if _, err := runReserve(t, a, "wf-search", Request{Op: OpSearch}); err == nil {
		t.Fatal("the reserve workflow accepted a search request")
	}
}

// Workers crash at random points of the reservations' activities (login, bookings, commit and
// abort propagation): every reservation still completes, and the invariants hold.
func TestReserveWorkflowUnderCrashes(t *testing.T) {
	seed := crashkit.Seed(t)
	inj := faults.Random(seed, 0.02, 40)
	a := newApp(t, fixture(3, 3), inj)
	inj.Enable(true)
	confirmations := map[string]Confirmation{}
	for i := range 5 {
		c, err := runReserve(t, a, fmt.Sprint("wf-crash-", i), reserveRequest(a, i%len(a.data.Users)))
		if err != nil {
			t.Fatalf("seed %d: reservation %d: %v", seed, i, err)
		}
		confirmations[c.Reservation] = c
	}
	inj.Enable(false)
	r := a.check(t, confirmations)
	if err := r.Err(); err != nil || r.Booked != 3 {
		t.Fatalf("seed %d: booked %d of 5 with 3 rooms and 3 seats: %v", seed, r.Booked, err)
	}
	a.noLocks(t)
	if len(inj.Crashes()) == 0 {
		t.Fatalf("seed %d: no crash was injected", seed)
	}
	t.Logf("seed %d: %d crashes injected, 3 booked, 2 refused", seed, len(inj.Crashes()))
}
