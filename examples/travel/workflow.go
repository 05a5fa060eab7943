package travel

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

// ReserveWorkflowName is the Temporal workflow type of ReserveWorkflow.
const ReserveWorkflowName = "travel.Reserve"

// reserveActivityOptions bound each SSF call at a few seconds, far above what one takes: Temporal
// notices a dead worker's activity only when this timeout passes, and then retries it.
var reserveActivityOptions = func() workflow.ActivityOptions {
	o := ssftemporal.DefaultActivityOptions
	o.StartToCloseTimeout = 3 * time.Second
	return o
}()

// ReserveWorkflow is a reservation as a Temporal workflow: it checks the login with the user
// SSF, then books the room and the seat in one cross-SSF transaction that the workflow itself
// coordinates (ssftemporal.RunTx: the workflow is the two-phase-commit coordinator, and wait-die
// conflicts are retried with durable timers). Every SSF call is an activity with exactly-once
// effects, so a worker killed in the middle of any of them is harmless: Temporal retries the
// activity elsewhere and the retry replays what the dead attempt logged. req.Op must be reserve;
// the reservation's id is the workflow id.
func ReserveWorkflow(ctx workflow.Context, req Request) (Confirmation, error) {
	ctx = workflow.WithActivityOptions(ctx, reserveActivityOptions)
	r := Reservation{ID: workflow.GetInfo(ctx).WorkflowExecution.ID, User: req.User, Hotel: req.Hotel, Flight: req.Flight, Mode: ModeTransaction}
	if req.Op != OpReserve {
		return Confirmation{}, fmt.Errorf("the reserve workflow takes a %s request, not %q", OpReserve, req.Op)
	}
	if err := r.validate(); err != nil {
		return Confirmation{}, err
	}
	var ok bool
	if err := ssftemporal.Call(ctx, User, userOp{Op: "login", User: req.User, Password: req.Password}, &ok); err != nil {
		return Confirmation{}, err
	}
	if !ok {
		return r.refused(RefusedLogin, 0), nil
	}
	attempts := 0
	var full string
	committed, err := ssftemporal.RunTx(ctx, ssftemporal.TxOptions{Attempts: maxTxAttempts, Backoff: txBackoff}, func(tx *ssftemporal.Tx) error {
		attempts++
		full = ""
		for _, side := range []struct{ ssf, item, full string }{
			{Hotel, r.Hotel, RefusedHotelFull}, {Flight, r.Flight, RefusedFlightFull},
		} {
			var took bool
			if err := tx.Call(ctx, side.ssf, inventoryOp{Op: "reserve", Item: side.item, Reservation: r.ID, User: r.User, Mode: r.Mode}, &took); err != nil {
				return err
			}
			if !took {
				full = side.full
				tx.Abort(side.full)
				return nil
			}
		}
		return nil
	})
	var c Confirmation
	switch {
	case errors.Is(err, ssftemporal.ErrConflicts):
		c = r.refused(RefusedContention, attempts)
	case err != nil:
		return Confirmation{}, err
	case committed:
		c = r.confirmation(true, "", attempts)
	default:
		c = r.refused(full, attempts)
	}
	// The order SSF keeps the record of every reservation, as when it coordinates them itself.
	return c, ssftemporal.Call(ctx, Order, orderInput{Record: &c}, nil)
}
