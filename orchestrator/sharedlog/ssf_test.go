package sharedlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// crashAt crashes the nth store operation (before or after it takes effect) of an execution.
type crashAt struct {
	n    int64
	seen atomic.Int64
}

func (c *crashAt) Inject(context.Context, ssf.FaultPoint) error {
	if c.seen.Add(1) == c.n {
		return ssf.ErrCrashed
	}
	return nil
}

// An SSF appends to the log and records the SN in its own state; the execution is killed at
// every store operation in turn and run again: the log holds the record once, at the SN the
// SSF recorded.
func TestAppendStepExactlyOnce(t *testing.T) {
	ctx := context.Background()
	for n := int64(1); ; n++ {
		logTable, err := store.Open(ctx, fmt.Sprintf("mem://appendstep-log-%d", n))
		if err != nil {
			t.Fatal(err)
		}
		l, err := sharedlog.New(logTable, "acme", sharedlog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AddColor(ctx, "events", ""); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, fmt.Sprintf("mem://appendstep-ssf-%d", n))
		if err != nil {
			t.Fatal(err)
		}
		faults := &crashAt{n: n}
		host := local.NewHost()
		defer host.Close()
		rt, err := host.Add(ssf.Config{Name: "producer", Store: st, Faults: faults, Handler: func(env *ssf.Env, input json.RawMessage) (any, error) {
			sn, err := l.AppendStep(env, "events", input)
			if err != nil {
				return nil, err
			}
			return sn, env.Write("state", "last", sn)
		}})
		if err != nil {
			t.Fatal(err)
		}
		req := ssf.Request{InstanceID: "order-1", Input: json.RawMessage(`"placed"`)}
		_, err = rt.Handle(ctx, req)
		crashed := errors.Is(err, ssf.ErrCrashed)
		if err != nil && !crashed {
			t.Fatalf("crash at operation %d: %v", n, err)
		}
		faults.n = 0 // the re-execution runs to the end
		res, err := rt.Handle(ctx, req)
		if err != nil || res.Err() != nil {
			t.Fatalf("re-execution after a crash at operation %d: %v %v", n, err, res.Err())
		}
		var sn uint64
		if err := json.Unmarshal(res.Output, &sn); err != nil {
			t.Fatal(err)
		}
		tail, err := l.CheckTail(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Read(ctx, "events", sn)
		if err != nil || string(r.Data) != `"placed"` || tail != sn {
			t.Fatalf("crash at operation %d: the SSF recorded SN %d (%q, %v), the tail is %d: want one record", n, sn, r.Data, err, tail)
		}
		if !crashed {
			t.Logf("killed at each of the %d store operations of an execution", n-1)
			return
		}
	}
}
