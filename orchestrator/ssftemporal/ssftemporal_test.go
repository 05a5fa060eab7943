package ssftemporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	"github.com/ssfkit/ssfkit/internal/faults"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// counter adds its input to key "n" and returns the new total.
func counter(env *ssf.Env, in json.RawMessage) (any, error) {
	var by int
	if err := json.Unmarshal(in, &by); err != nil {
		return nil, err
	}
	if by < 0 {
		return nil, errors.New("negative increment")
	}
	var n int
	if _, err := env.ReadInto("c", "n", &n); err != nil {
		return nil, err
	}
	return n + by, env.Write("c", "n", n+by)
}

type booking struct {
	Op   string `json:"op"` // book, cancel
	Item string `json:"item"`
}

// inventory books (or cancels) one unit of an item: its capacity goes down (up) by one, and a
// booking of an item with nothing left aborts the transaction it runs in, or fails outside one.
func inventory(env *ssf.Env, in json.RawMessage) (any, error) {
	var b booking
	if err := json.Unmarshal(in, &b); err != nil {
		return nil, err
	}
	var left int
	if _, err := env.ReadInto("cap", b.Item, &left); err != nil {
		return nil, err
	}
	switch {
	case b.Op == "cancel":
		left++
	case left == 0 && env.InTx():
		return nil, env.AbortTx()
	case left == 0:
		return nil, fmt.Errorf("%s is sold out", b.Item)
	default:
		left--
	}
	return left, env.Write("cap", b.Item, left)
}

type fixture struct {
	host      *local.Host
	rts       map[string]*ssf.Runtime
	workflows int
}

func newFixture(t *testing.T, faults ssf.FaultInjector) *fixture {
	f := &fixture{host: local.NewHost(), rts: map[string]*ssf.Runtime{}}
	f.host.Logger = quiet
	for name, h := range map[string]ssf.Handler{"counter": counter, "hotel": inventory, "flight": inventory} {
		// Hold as a worker sets it: activity instances skip the pending index (Temporal retries
		// them), so the crash tests below cover that path.
		cfg := ssf.Config{Name: name, Store: testtables.Mem(t, name), Handler: h, RowCapacity: 4, Logger: quiet,
			Hold: func(context.Context, string) (bool, error) { return true, nil }}
		if faults != nil {
			cfg.Faults = faults
		}
		rt, err := f.host.Add(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.rts[name] = rt
	}
	t.Cleanup(f.host.Close)
	return f
}

func (f *fixture) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet))
	env := s.NewTestWorkflowEnvironment()
	Register(env, f.host.Runtimes()...)
	env.SetTestTimeout(30 * time.Second)
	// The test environment's run id is a constant, unlike a server's: without a workflow id of
	// its own, a second workflow's activities would be the first one's SSF instances.
	f.workflows++
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d", t.Name(), f.workflows)})
	return env
}

// item reads an item of an SSF's table, as JSON text ("" when absent).
func (f *fixture) item(t *testing.T, ssfName, table, key string) string {
	items, err := f.rts[ssfName].Items(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(items[table+"/"+key])
}

func (f *fixture) setCapacity(t *testing.T, ssfName, item string, n int) {
	t.Helper()
	res, err := f.host.Invoke(context.Background(), ssfName, "init-"+item, booking{Op: "cancel", Item: item})
	if err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	for i := 1; i < n; i++ {
		if _, err := f.host.Invoke(context.Background(), ssfName, fmt.Sprintf("init-%s-%d", item, i), booking{Op: "cancel", Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

// addThree adds 1, 2 and 3 with three SSF calls and returns the last total.
func addThree(ctx workflow.Context) (int, error) {
	var total int
	for by := 1; by <= 3; by++ {
		if err := Call(ctx, "counter", by, &total); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// A worker that dies in the middle of an activity, at any point, makes Temporal retry the
// activity; the retry is the same SSF instance and replays what the dead attempt logged, so the
// effects happen once: the counter ends at 6, as in a clean run.
func TestActivityRetriesAreExactlyOnce(t *testing.T) {
	count := faults.At(0)
	clean := newFixture(t, count)
	count.Enable(true)
	env := clean.env(t)
	env.ExecuteWorkflow(addThree)
	var total int
	if err := env.GetWorkflowResult(&total); err != nil || total != 6 {
		t.Fatalf("clean run: %d, %v", total, err)
	}
	points := count.Points()
	if points < 10 {
		t.Fatalf("the clean run passed only %d injection points", points)
	}
	for k := 1; k <= points; k++ {
		inj := faults.At(k)
		f := newFixture(t, inj)
		inj.Enable(true)
		env := f.env(t)
		env.ExecuteWorkflow(addThree)
		var total int
		if err := env.GetWorkflowResult(&total); err != nil {
			t.Fatalf("crash at point %d (%v): %v", k, inj.Crashes(), err)
		}
		if got := f.item(t, "counter", "c", "n"); total != 6 || got != "6" || len(inj.Crashes()) != 1 {
			t.Fatalf("crash at point %d (%v): workflow returned %d, counter holds %s", k, inj.Crashes(), total, got)
		}
	}
	t.Logf("crashed once at each of %d points: every run equals the clean one", points)
}

// An SSF's application error reaches the workflow unretried, as an ApplicationError.
func TestApplicationErrorIsNotRetried(t *testing.T) {
	f := newFixture(t, nil)
	env := f.env(t)
	attempts := 0
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { attempts++ })
	env.ExecuteWorkflow(func(ctx workflow.Context) error { return Call(ctx, "counter", -1, nil) })
	err := env.GetWorkflowError()
	if !IsApplicationError(err) || !strings.Contains(err.Error(), "negative increment") {
		t.Fatalf("workflow error %v, want the SSF's application error", err)
	}
	if attempts != 1 {
		t.Fatalf("%d attempts of an activity that failed in application code", attempts)
	}
}

// Spawn registers the SSF's instance through the host's queue and returns; the queue's
// consumer runs it, once, even though the workflow's activity retries after a crash.
func TestSpawnThroughQueue(t *testing.T) {
	inj := faults.At(3) // the first attempt of the spawning activity dies after registering
	f := newFixture(t, inj)
	q, err := queue.Open(context.Background(), "mem://spawn-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if err := f.host.UseQueue("counter", q); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.host.ServeQueues(ctx, queue.ServeOptions{Logger: quiet}) }()
	defer func() { stop(); <-served }()

	inj.Enable(true)
	env := f.env(t)
	env.ExecuteWorkflow(func(ctx workflow.Context) error { return Spawn(ctx, "counter", 7) })
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); f.item(t, "counter", "c", "n") != "7"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spawned instance did not run: counter %q", f.item(t, "counter", "c", "n"))
		}
	}
	time.Sleep(100 * time.Millisecond) // a second run, if any, would add 7 more
	if got := f.item(t, "counter", "c", "n"); got != "7" || len(inj.Crashes()) != 1 {
		t.Fatalf("counter %s after one spawn (crashes %v)", got, inj.Crashes())
	}
}

// changeOnCrash is an injector that, when its crash fires, lets another client add 100 to the
// counter before the activity's retry: the retry must replay the value the crashed attempt read
// (if it logged it) rather than read the new one, and must finish.
type changeOnCrash struct {
	*faults.Injector
	change func()
	once   sync.Once
}

func (c *changeOnCrash) Inject(ctx context.Context, p ssf.FaultPoint) error {
	err := c.Injector.Inject(ctx, p)
	if err != nil {
		c.once.Do(func() {
			c.Injector.Enable(false)
			c.change()
			c.Injector.Enable(true)
		})
	}
	return err
}

// A workflow's Spawn (an asynchronous instance its activity holds, and Temporal retries)
// crashed once at every point, with the counter it reads changed before the retry: every run
// finishes, with the spawned increment applied once.
func TestSpawnCrashAtEveryPoint(t *testing.T) {
	spawn := func(ctx workflow.Context) error { return Spawn(ctx, "counter", 7) }
	count := faults.At(0)
	clean := newFixture(t, count)
	count.Enable(true)
	env := clean.env(t)
	env.ExecuteWorkflow(spawn)
	if err := env.GetWorkflowError(); err != nil || clean.item(t, "counter", "c", "n") != "7" {
		t.Fatalf("clean run: counter %s, %v", clean.item(t, "counter", "c", "n"), err)
	}
	points := count.Points()
	for k := 1; k <= points; k++ {
		inj := &changeOnCrash{Injector: faults.At(k)}
		f := newFixture(t, inj)
		inj.change = func() {
			if _, err := f.host.Invoke(context.Background(), "counter", "other-client", 100); err != nil {
				t.Errorf("the other client's change: %v", err)
			}
		}
		inj.Enable(true)
		env := f.env(t)
		env.ExecuteWorkflow(spawn)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("crash at point %d (%v): %v", k, inj.Crashes(), err)
		}
		// 107: the spawned instance read after the change; 7: it had logged its read (0) before
		// the crash, and its write, replayed from that read, came after the change. Anything
		// else is an effect lost or applied twice.
		if got := f.item(t, "counter", "c", "n"); (got != "107" && got != "7") || len(inj.Crashes()) != 1 {
			t.Fatalf("crash at point %d (%v): counter %s, want 107 or 7", k, inj.Crashes(), got)
		}
	}
	t.Logf("crashed once at each of %d points, the value read changed before each retry: every run finished, the spawned increment applied once", points)
}
