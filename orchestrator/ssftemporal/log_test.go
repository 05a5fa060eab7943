package ssftemporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/temporaltest"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// lostReply applies the first write of a log record and then fails it, as a worker that dies
// right after the write would leave things.
type lostReply struct {
	store.Driver
	lost atomic.Bool
}

func (d *lostReply) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	res, err := d.Driver.Update(ctx, key, cond, upd)
	if err == nil && strings.HasPrefix(key.Partition, "r|") && d.lost.CompareAndSwap(false, true) {
		return res, errors.New("injected: the reply to a record write was lost")
	}
	return res, err
}

// logWorkflow appends to the log, reads it back, meets a refusal and passes a barrier.
func logWorkflow(ctx workflow.Context) (string, error) {
	l := LogNamed("events")
	if err := l.AddColor(ctx, "orders", ""); err != nil {
		return "", err
	}
	if sn, err := l.Append(ctx, "orders", []byte("a"), []byte("b")); err != nil || sn != 2 {
		return "", fmt.Errorf("the first append: SN %d, %v; want 2", sn, err)
	}
	if sn, err := l.Append(ctx, "orders", []byte("c")); err != nil || sn != 3 {
		return "", fmt.Errorf("the second append: SN %d, %v; want 3", sn, err)
	}
	var got []string
	for from := uint64(1); ; {
		rec, found, err := l.ReadNext(ctx, "orders", from)
		if err != nil {
			return "", err
		}
		if !found {
			break
		}
		got = append(got, string(rec.Data))
		from = rec.SN + 1
	}
	if rec, err := l.Read(ctx, "orders", 2); err != nil || string(rec.Data) != "b" {
		return "", fmt.Errorf("Read(2): %q, %v", rec.Data, err)
	}
	if _, err := l.CheckTail(ctx, "no-such-color"); !IsLogError(err, sharedlog.ErrNoColor) {
		return "", fmt.Errorf("CheckTail of a missing color: %v, want the log's ErrNoColor", err)
	}
	if err := l.Arrive(ctx, "stage", "workflow", []byte("done")); err != nil {
		return "", err
	}
	notes, err := l.Await(ctx, "stage", "workflow")
	if err != nil || string(notes["workflow"]) != "done" {
		return "", fmt.Errorf("Await: %q, %v", notes, err)
	}
	return strings.Join(got, ""), nil
}

// On the embedded server: a workflow uses the shared log through activities, and an append
// whose first attempt wrote a record and then failed is retried without appending twice.
func TestWorkflowUsesTheLogExactlyOnce(t *testing.T) {
	c := temporaltest.Client(t)
	drv := &lostReply{Driver: memstore.New(memstore.DefaultMaxRowBytes)}
	l, err := sharedlog.New(store.NewTable(drv, "mem://"), "wf", sharedlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	queue := "log-" + t.Name()
	w := worker.New(c, queue, worker.Options{})
	RegisterLog(w, "events", l)
	w.RegisterWorkflow(logWorkflow)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, logWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if !drv.lost.Load() {
		t.Fatal("no record write lost its reply: the test exercised no retry")
	}
	if got != "abc" {
		t.Fatalf("the workflow read %q, want abc: each record once, in order", got)
	}
	if tail, err := l.CheckTail(ctx, "orders"); err != nil || tail != 3 {
		t.Fatalf("tail %d (%v), want 3", tail, err)
	}
}
