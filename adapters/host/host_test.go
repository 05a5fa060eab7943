package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// dropTransport loses every call and start, as an unreachable peer and a lost queue would.
type dropTransport struct{}

func (dropTransport) Call(context.Context, string, ssf.Request) (ssf.Result, error) {
	return ssf.Result{}, errors.New("peer unreachable")
}
func (dropTransport) Spawn(context.Context, string, ssf.Request) error { return nil }

// An instance the intent collector gives up on is recorded in the SSF's dead-letter queue
// (SSFKIT_DEAD_LETTER_QUEUE) with the reason, for the operator.
func TestGivenUpInstanceIsDeadLettered(t *testing.T) {
	cfg := host.Config{SSF: "poison", Environment: "test", Store: "mem://host-test-poison", Queue: "mem://host-test-poison",
		DeadLetterQueue: "mem://host-test-poison-dlq", Lifetime: 300 * time.Millisecond, GCBound: 600 * time.Millisecond,
		RelaunchDelay: time.Millisecond, MaxAttempts: 1}
	handlers := map[string]ssf.Handler{"poison": func(env *ssf.Env, in json.RawMessage) (any, error) {
		_, err := env.SyncInvoke("peer", nil)
		return nil, err
	}}
	ctx := context.Background()
	f, err := host.Open(ctx, cfg, handlers, func(*queue.Queue) ssf.Transport { return dropTransport{} })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Runtime.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: "p-1", Input: json.RawMessage(`1`)}); err == nil {
		t.Fatal("the poison instance finished")
	}
	time.Sleep(5 * time.Millisecond)
	if r, err := f.Runtime.CollectIntents(ctx); err != nil || r.Relaunched != 1 {
		t.Fatalf("first pass: %+v %v, want one relaunch", r, err)
	}
	time.Sleep(cfg.GCBound + 100*time.Millisecond) // no execution can run any more
	if r, err := f.Runtime.CollectIntents(ctx); err != nil || r.GaveUp != 1 {
		t.Fatalf("second pass: %+v %v, want the instance given up", r, err)
	}
	dlq, err := queue.Open(ctx, cfg.DeadLetterQueue)
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	msgs, err := dlq.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: time.Second})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("dead letters: %d, %v", len(msgs), err)
	}
	rec, err := queue.ParseDeadLetter(msgs[0].Body)
	if err != nil || rec.Source != "ssf://poison" || rec.MessageID != "p-1" || rec.Attempts != 1 ||
		!strings.Contains(rec.Error, ssf.ErrGaveUp.Error()) || !strings.Contains(rec.Error, "peer unreachable") {
		t.Fatalf("dead letter %+v %v: want the given-up instance and its last error", rec, err)
	}
}
