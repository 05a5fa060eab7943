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

// Step runs the SSF named ssfName with input, decodes its result into out (nil: discard) and,
// if it succeeded, registers a call of compSSF with compInput as its compensation. A step that
// fails must leave no effect of its own: only succeeded steps are compensated.
func (s *Saga) Step(ctx workflow.Context, ssfName string, input, out any, compSSF string, compInput any) error {
	comp, err := json.Marshal(compInput)
	if err != nil {
		return fmt.Errorf("ssftemporal: compensation input for %s is not JSON-encodable: %w", compSSF, err)
	}
	if err := Call(ctx, ssfName, input, out); err != nil {
		return err
	}
	s.compensations = append(s.compensations, compensation{ssf: compSSF, input: comp})
	return nil
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
