package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host"
	_ "github.com/ssfkit/ssfkit/adapters/provenance/blobsink"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
	_ "gocloud.dev/blob/fileblob"
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
	began := time.Now()
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
	// Its failures span its first execution (the request above) to its last (the same: the
	// relaunch was lost).
	if !rec.FirstFailure.Equal(rec.LastFailure) || !rec.FirstFailure.After(began) || rec.LastFailure.After(rec.Time) {
		t.Errorf("dead letter failed from %v to %v, recorded at %v", rec.FirstFailure, rec.LastFailure, rec.Time)
	}
	checkAttributes(t, msgs[0], rec)
}

// checkAttributes fails unless a dead-letter record's message attributes give its reason.
func checkAttributes(t *testing.T, m *queue.Message, rec queue.DeadLetter) {
	t.Helper()
	a := m.Attributes
	if a[queue.AttrSource] != rec.Source || a[queue.AttrMessageID] != rec.MessageID || a[queue.AttrAttempts] != strconv.Itoa(rec.Attempts) ||
		a[queue.AttrError] != queue.AttributeValue(rec.Error) || a[queue.AttrFirstFailure] != rec.FirstFailure.Format(time.RFC3339Nano) ||
		a[queue.AttrLastFailure] != rec.LastFailure.Format(time.RFC3339Nano) {
		t.Errorf("dead letter %+v has attributes %q", rec, a)
	}
}

// receiveRecord receives one dead-letter record from dlq, or none within a short wait.
func receiveRecord(t *testing.T, dlq *queue.Queue) (*queue.Message, queue.DeadLetter, bool) {
	t.Helper()
	ms, err := dlq.Receive(t.Context(), queue.ReceiveOptions{Max: 1, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return nil, queue.DeadLetter{}, false
	}
	rec, err := queue.ParseDeadLetter(ms[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := dlq.Ack(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}
	return ms[0], rec, true
}

// A queued start the platform delivers: the host dead-letters a poison one at once, and a
// failing one on the platform's last delivery, with the reason, and reports both done; other
// failures go back to the platform, which delivers them again.
func TestHandleQueuedDeadLetters(t *testing.T) {
	cfg := host.Config{SSF: "fails", Environment: "test", Store: "mem://host-test-queued", Queue: "mem://host-test-queued",
		DeadLetterQueue: "mem://host-test-queued-dlq", MaxReceiveCount: 3}
	handlers := map[string]ssf.Handler{"fails": func(env *ssf.Env, in json.RawMessage) (any, error) {
		_, err := env.SyncInvoke("peer", nil)
		return nil, err
	}}
	ctx := t.Context()
	f, err := host.Open(ctx, cfg, handlers, func(*queue.Queue) ssf.Transport { return dropTransport{} })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start, _ := json.Marshal(ssf.Request{Kind: ssf.KindInvoke, InstanceID: "q-1", Input: json.RawMessage(`1`), Async: true})
	sent := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	firstReceived := sent.Add(time.Second)
	attrs := map[string]string{"trace": "t-1"}

	// A body that is not a request: dead-lettered on its first delivery.
	poison := &queue.Message{ID: "m-poison", Body: []byte("not a request"), Attempts: 1, Sent: sent, Attributes: attrs}
	if err := f.HandleQueued(ctx, poison); err != nil {
		t.Fatalf("a poison start: %v, want it dead-lettered and done", err)
	}
	m, rec, ok := receiveRecord(t, f.DeadLetter)
	if !ok || rec.Source != f.Queue.Name() || rec.MessageID != "m-poison" || rec.Attempts != 1 || !strings.Contains(rec.Error, "not a JSON request") ||
		string(rec.Body) != "not a request" || rec.Attributes["trace"] != "t-1" || !rec.FirstFailure.Equal(rec.LastFailure) {
		t.Fatalf("poison record %+v (found %v)", rec, ok)
	}
	checkAttributes(t, m, rec)

	// A start that fails: back to the platform until its last delivery.
	for attempt := 1; attempt < cfg.MaxReceiveCount; attempt++ {
		err := f.HandleQueued(ctx, &queue.Message{ID: "m-1", Body: start, Attempts: attempt, Sent: sent, FirstReceived: firstReceived})
		if err == nil || !strings.Contains(err.Error(), "peer unreachable") {
			t.Fatalf("delivery %d of a failing start: %v, want its error", attempt, err)
		}
		if _, rec, ok := receiveRecord(t, f.DeadLetter); ok {
			t.Fatalf("delivery %d of %d dead-lettered it: %+v", attempt, cfg.MaxReceiveCount, rec)
		}
	}
	if err := f.HandleQueued(ctx, &queue.Message{ID: "m-1", Body: start, Attempts: cfg.MaxReceiveCount, Sent: sent, FirstReceived: firstReceived}); err != nil {
		t.Fatalf("the last delivery: %v, want it dead-lettered and done", err)
	}
	m, rec, ok = receiveRecord(t, f.DeadLetter)
	if !ok || rec.MessageID != "m-1" || rec.Attempts != cfg.MaxReceiveCount || !strings.Contains(rec.Error, "peer unreachable") ||
		!rec.FirstFailure.Equal(firstReceived) || !rec.LastFailure.After(firstReceived) || string(rec.Body) != string(start) {
		t.Fatalf("record of the last delivery %+v (found %v): want first failure %v", rec, ok, firstReceived)
	}
	checkAttributes(t, m, rec)

	// Without a dead-letter queue, or when it cannot be written, the platform keeps the start.
	f.DeadLetter.Close()
	if err := f.HandleQueued(ctx, &queue.Message{ID: "m-2", Body: []byte("not a request"), Attempts: 1}); err == nil {
		t.Error("a poison start whose record could not be written was reported done")
	}
	f.DeadLetter = nil
	if err := f.HandleQueued(ctx, &queue.Message{ID: "m-3", Body: start, Attempts: cfg.MaxReceiveCount}); err == nil {
		t.Error("without a dead-letter queue, a failed start was reported done")
	}
}

func TestConfigFromEnvMaxReceiveCount(t *testing.T) {
	vars := map[string]string{"SSFKIT_SSF": "s", "SSFKIT_ENVIRONMENT": "e", "SSFKIT_STORE": "mem://s", "SSFKIT_QUEUE": "mem://q"}
	getenv := func(k string) string { return vars[k] }
	if c, err := host.ConfigFromEnv(getenv); err != nil || c.MaxReceiveCount != 0 {
		t.Fatalf("unset: %+v %v", c, err)
	}
	vars["SSFKIT_MAX_RECEIVE_COUNT"] = "5"
	if c, err := host.ConfigFromEnv(getenv); err != nil || c.MaxReceiveCount != 5 {
		t.Fatalf("5: %+v %v", c, err)
	}
	for _, bad := range []string{"0", "-1", "five"} {
		vars["SSFKIT_MAX_RECEIVE_COUNT"] = bad
		if _, err := host.ConfigFromEnv(getenv); err == nil || !strings.Contains(err.Error(), "SSFKIT_MAX_RECEIVE_COUNT") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A function configured to capture provenance opens its sink by URL, and its garbage collector
// exports each finished instance there; bad settings are named.
func TestProvenanceFromTheEnvironment(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	vars := map[string]string{"SSFKIT_SSF": "notes", "SSFKIT_ENVIRONMENT": "e", "SSFKIT_STORE": "mem://host-test-notes", "SSFKIT_QUEUE": "mem://host-test-notes",
		"SSFKIT_PROVENANCE": "full", "SSFKIT_PROVENANCE_SINK": "file://" + filepath.ToSlash(dir) + "?prefix=p",
		"SSFKIT_LIFETIME_SECONDS": "1", "SSFKIT_GC_BOUND_SECONDS": "2"}
	getenv := func(k string) string { return vars[k] }
	cfg, err := host.ConfigFromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]ssf.Handler{"notes": func(env *ssf.Env, in json.RawMessage) (any, error) { return nil, env.Write("notes", "n", in) }}
	f, err := host.Open(ctx, cfg, handlers, func(*queue.Queue) ssf.Transport { return dropTransport{} })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Runtime.Handle(ctx, ssf.Request{InstanceID: "n-1", Input: json.RawMessage(`"hello"`)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for exported := 0; exported == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the instance was not exported within 10 s (T is 2 s)")
		}
		time.Sleep(500 * time.Millisecond)
		rep, err := f.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exported = rep.Exported
	}
	objects, _ := filepath.Glob(filepath.Join(dir, "p", "data_events", "ssf=notes", "dt=*", "*.parquet"))
	if len(objects) != 1 {
		t.Fatalf("data_events objects: %v", objects)
	}

	for k, want := range map[string]string{"SSFKIT_PROVENANCE": "not one of off, metadata, full", "SSFKIT_PROVENANCE_SINK": "needs SSFKIT_PROVENANCE_SINK"} {
		bad := maps.Clone(vars)
		if k == "SSFKIT_PROVENANCE" {
			bad[k] = "all"
		} else {
			delete(bad, k)
		}
		if _, err := host.ConfigFromEnv(func(k string) string { return bad[k] }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", k, err, want)
		}
	}
	cfg.ProvenanceSink = "s3x://nowhere"
	if _, err := host.Open(ctx, cfg, handlers, func(*queue.Queue) ssf.Transport { return dropTransport{} }); err == nil || !strings.Contains(err.Error(), "SSFKIT_PROVENANCE_SINK") {
		t.Errorf("an unknown sink scheme: %v", err)
	}
}
