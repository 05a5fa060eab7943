package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// unreliable is a queue that misbehaves the way queues and consumers do: every message is sent
// twice (a duplicate delivery), and the first acknowledgement of each message is lost (the
// consumer crashed after handling it), so it comes back when its lease runs out.
type unreliable struct {
	queue.Driver
	mu         sync.Mutex
	lostAck    map[string]bool
	deliveries int
	acked      chan struct{}
}

func (u *unreliable) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	if _, err := u.Driver.Send(ctx, body, attrs); err != nil {
		return "", err
	}
	return u.Driver.Send(ctx, body, attrs)
}

func (u *unreliable) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	ms, err := u.Driver.Receive(ctx, n, wait, lease)
	u.mu.Lock()
	u.deliveries += len(ms)
	u.mu.Unlock()
	return ms, err
}

func (u *unreliable) Ack(ctx context.Context, m *queue.Message) error {
	u.mu.Lock()
	lose := !u.lostAck[m.ID]
	u.lostAck[m.ID] = true
	u.mu.Unlock()
	if lose {
		return errors.New("the consumer crashed before acknowledging")
	}
	err := u.Driver.Ack(ctx, m)
	if err == nil {
		select {
		case u.acked <- struct{}{}:
		default: // more acknowledgements than the test waits for (SQS accepts stale receipts)
		}
	}
	return err
}

func memTable() *store.Table {
	return store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://")
}

// incrementer increments c/n by one per instance, with a conditional write so that concurrent
// instances do not lose increments; its input "init" sets it to 0.
func incrementer(env *ssf.Env, in json.RawMessage) (any, error) {
	if string(in) == `"init"` {
		return nil, env.Write("c", "n", 0)
	}
	for {
		var n int
		if _, err := env.ReadInto("c", "n", &n); err != nil {
			return nil, err
		}
		ok, err := env.CondWrite("c", "n", n+1, store.MustParseCond(fmt.Sprintf("$ == %d", n)))
		if err != nil || ok {
			return n + 1, err
		}
	}
}

// Asynchronous starts travel through each queue backend of the matrix (queuetest.Backends);
// duplicated deliveries and consumers that crash before acknowledging still apply every
// increment exactly once, and a poison message ends up in the dead-letter queue.
func TestQueuedSpawnExactlyOnce(t *testing.T) {
	for _, b := range queuetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			testQueuedSpawn(t, b.URL)
		})
	}
}

func openQueue(t *testing.T, url string) *queue.Queue {
	q, err := queue.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func testQueuedSpawn(t *testing.T, url func(testing.TB) string) {
	const n = 4
	ctx := t.Context()
	h := local.NewHost()
	defer h.Close()
	quiet := slog.New(slog.DiscardHandler)
	rt, err := h.Add(ssf.Config{Name: "counter", Store: memTable(), Handler: incrementer, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Add(ssf.Config{Name: "front", Store: memTable(), Handler: func(env *ssf.Env, _ json.RawMessage) (any, error) {
		return nil, env.AsyncInvoke("counter", nil)
	}}); err != nil {
		t.Fatal(err)
	}
	raw, dlq := openQueue(t, url(t)), openQueue(t, url(t))
	u := &unreliable{Driver: raw.Driver(), lostAck: map[string]bool{}, acked: make(chan struct{}, 4*n)}
	q := queue.New(u, raw.Name())
	if err := h.UseQueue("counter", q); err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error)
	go func() {
		served <- h.ServeQueues(serveCtx, queue.ServeOptions{DeadLetter: dlq, Concurrency: 4, Lease: time.Second, Wait: time.Second,
			Backoff: func(int) time.Duration { return 0 }, Logger: quiet})
	}()

	if _, err := h.Invoke(ctx, "counter", "init", "init"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := h.Invoke(ctx, "front", fmt.Sprintf("req-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	poison, err := raw.Send(ctx, []byte("not json"))
	if err != nil {
		t.Fatal(err)
	}
	// Each start is sent twice and each copy is acknowledged once it succeeds; the poison
	// message is acknowledged once dead-lettered.
	for range 2*n + 1 {
		<-u.acked
	}
	// Its first acknowledgement was lost too, so it was dead-lettered twice.
	var recs []queue.DeadLetter
	for len(recs) < 2 {
		ms, err := dlq.Receive(ctx, queue.ReceiveOptions{Max: 2, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			rec, err := queue.ParseDeadLetter(m.Body)
			if err != nil {
				t.Fatal(err)
			}
			// The reason is on the record's message too, on every backend.
			if a := m.Attributes; a[queue.AttrMessageID] != rec.MessageID || a[queue.AttrAttempts] != strconv.Itoa(rec.Attempts) ||
				!strings.Contains(a[queue.AttrError], "not a JSON request") || a[queue.AttrFirstFailure] == "" || a[queue.AttrLastFailure] == "" {
				t.Errorf("dead-letter record %+v has attributes %q, want its reason", rec, a)
			}
			recs = append(recs, rec)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatalf("ServeQueues: %v", err)
	}

	// Pub/Sub does not keep the order of messages published without an ordering key.
	slices.SortFunc(recs, func(a, b queue.DeadLetter) int { return a.Attempts - b.Attempts })
	for i, r := range recs {
		if r.Source != q.Name() || r.MessageID != poison || string(r.Body) != "not json" || !strings.Contains(r.Error, "not a JSON request") || r.Attempts != i+1 {
			t.Errorf("dead-letter record %+v, want message %s from %s, attempt %d", r, poison, q.Name(), i+1)
		}
	}
	items, err := rt.Items(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(items["c/n"]); got != fmt.Sprint(n) {
		t.Errorf("counter = %s after %d asynchronous increments", got, n)
	}
	if pending, err := rt.Pending(ctx); err != nil || pending != 0 {
		t.Errorf("%d counter instances still pending (%v)", pending, err)
	}
	// Every start was delivered at least four times: two copies, each delivered again after
	// its lost acknowledgement.
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.deliveries < 4*n {
		t.Errorf("only %d deliveries for %d starts: the faults were not exercised", u.deliveries, n)
	}
}

// failFirstSend loses the first message sent, as an unreachable queue would.
type failFirstSend struct {
	queue.Driver
	failed bool
	acked  chan struct{}
}

func (f *failFirstSend) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	if !f.failed { // Spawn runs on the invoking goroutine: no concurrent Sends here
		f.failed = true
		return "", fmt.Errorf("%w: injected", queue.ErrUnavailable)
	}
	return f.Driver.Send(ctx, body, attrs)
}

func (f *failFirstSend) Ack(ctx context.Context, m *queue.Message) error {
	err := f.Driver.Ack(ctx, m)
	select {
	case f.acked <- struct{}{}:
	default:
	}
	return err
}

// A start that cannot be sent is not lost: the intent collector relaunches it, through the queue.
func TestQueuedSpawnSendFailure(t *testing.T) {
	ctx := t.Context()
	h := local.NewHost()
	defer h.Close()
	quiet := slog.New(slog.DiscardHandler)
	rt, err := h.Add(ssf.Config{Name: "counter", Store: memTable(), Handler: incrementer, RelaunchDelay: time.Nanosecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Add(ssf.Config{Name: "front", Store: memTable(), Handler: func(env *ssf.Env, _ json.RawMessage) (any, error) {
		return nil, env.AsyncInvoke("counter", nil)
	}}); err != nil {
		t.Fatal(err)
	}
	f := &failFirstSend{Driver: openQueue(t, queuetest.MemURL(t)).Driver(), acked: make(chan struct{}, 1)}
	q := queue.New(f, "mem://flaky")
	if err := h.UseQueue("counter", q); err != nil {
		t.Fatal(err)
	}
	if err := h.UseQueue("counter", q); err == nil {
		t.Error("a second queue for one SSF was accepted")
	}
	if err := h.UseQueue("nobody", q); err == nil {
		t.Error("a queue for an unknown SSF was accepted")
	}
	if _, err := h.Invoke(ctx, "counter", "init", "init"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Invoke(ctx, "front", "r1", nil); err != nil {
		t.Fatalf("the caller failed because the start could not be queued: %v", err)
	}
	if pending, _ := rt.Pending(ctx); pending != 1 {
		t.Fatalf("%d pending instances, want the one whose start was lost", pending)
	}
	if rep, err := rt.CollectIntents(ctx); err != nil {
		t.Fatalf("intent collector: %+v, %v", rep, err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error)
	go func() {
		served <- h.ServeQueues(serveCtx, queue.ServeOptions{DeadLetter: openQueue(t, "mem://"), Wait: 100 * time.Millisecond, Logger: quiet})
	}()
	<-f.acked
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if items, _ := rt.Items(ctx); string(items["c/n"]) != "1" {
		t.Errorf("counter = %s, want 1", items["c/n"])
	}
	if err := h.ServeQueues(ctx, queue.ServeOptions{}); !errors.Is(err, queue.ErrInvalid) {
		t.Errorf("ServeQueues without a dead-letter queue: %v", err)
	}
	if err := local.NewHost().ServeQueues(ctx, queue.ServeOptions{}); err == nil {
		t.Error("ServeQueues without queues succeeded")
	}
}
