package ssftemporal

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// Saga runs SSF steps whose compensations are registered as they succeed; on failure the
// workflow calls Compensate, which runs them in reverse order, each exactly once (every step and
// every compensation is an SSF instance), and survives crashes because the workflow does. Choose
// a saga over Tx when holding locks across the steps would cost too much (long steps, external
// systems, high contention) and other workflows may see the intermediate states.
type Saga struct {
	compensations []compensation
}

type compensation struct {
	ssf   string
	input json.RawMessage
}

// Step runs the SSF named ssfName with input, decodes its result into out (nil: discard) and
// registers a call of compSSF with compInput as its compensation if the step succeeded, or if
// its outcome is unknown: the activity gave up (timeouts, retries exhausted) while the step may
// have taken part of its effects. Such a step never takes effect afterwards (its attempt is
// fenced at its deadline, and its instance is recorded as abandoned once the workflow closes),
// so its compensation cannot be overtaken; it must undo what the step may have done, and
// nothing if it did nothing. A step that fails with an application error must leave no effect
// of its own: it is not compensated.
func (s *Saga) Step(ctx workflow.Context, ssfName string, input, out any, compSSF string, compInput any) error {
	comp, err := json.Marshal(compInput)
	if err != nil {
		return fmt.Errorf("ssftemporal: compensation input for %s is not JSON-encodable: %w", compSSF, err)
	}
	err = Call(ctx, ssfName, input, out)
	if err == nil || !IsApplicationError(err) && !hasType(err, "ssfkit.BadInput") {
		s.compensations = append(s.compensations, compensation{ssf: compSSF, input: comp})
	}
	return err
}

// Compensate runs the compensations of the steps that succeeded, last first, and forgets them.
// A compensation that fails for good (an application error) does not stop the others; the
// errors are returned together.
func (s *Saga) Compensate(ctx workflow.Context) error {
	var errs []error
	for i := len(s.compensations) - 1; i >= 0; i-- {
		c := s.compensations[i]
		if err := Call(ctx, c.ssf, c.input, nil); err != nil {
			errs = append(errs, fmt.Errorf("ssftemporal: compensation %s: %w", c.ssf, err))
		}
	}
	s.compensations = nil
	return errors.Join(errs...)
}
