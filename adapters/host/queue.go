package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// QueueHandler runs a queued request. A body that is not a request, or a request the runtime
// refuses, is poison; an abandoned execution is retried (its intent stays pending, so the
// intent collector would also run it again), except one that stopped because a concurrent
// execution of the same instance (a duplicate delivery) got ahead of it: that one is running
// the instance, so the message is done, as it is for an instance collected and expired long ago.
func QueueHandler(rt *ssf.Runtime) queue.Handler {
	return func(ctx context.Context, m *queue.Message) error {
		var req ssf.Request
		if err := json.Unmarshal(m.Body, &req); err != nil {
			return queue.Poison(fmt.Errorf("SSF %s: the message is not a JSON request: %v", rt.Name(), err))
		}
		_, err := rt.Handle(ctx, req)
		switch {
		case errors.Is(err, ssf.ErrBadInput):
			return queue.Poison(err)
		case errors.Is(err, ssf.ErrDiverged), errors.Is(err, ssf.ErrInstanceCollected):
			return nil // another execution is running it, or it finished long ago
		}
		return err
	}
}
