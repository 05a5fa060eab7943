package schedules

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// A real process paused past every bound. A first execution of an incrementing SSF's instance
// dies in its handler; the child (this test binary, re-executed) delivers the instance again on
// the same SQLite file and announces a chosen boundary of its execution; the test SIGSTOPs it
// there, runs the instance in its own runtime (a duplicate delivery), lets other clients write
// the item after it, lets the garbage collector collect the instance T later, and SIGCONTs the
// child. The item must hold the other clients' last write, and any answer the child gives must
// be the instance's one result.

const (
	stragglerEnv  = "SSFKIT_STRAGGLER_DB"   // the child's SQLite file; set: run as the child
	stragglerStop = "SSFKIT_STRAGGLER_STOP" // the boundary the child stops at: "OP:PARTITION-PREFIX:before|after"

	stragglerLifetime = time.Second
	stragglerGCBound  = 2 * time.Second
)

func TestMain(m *testing.M) {
	if db := os.Getenv(stragglerEnv); db != "" {
		os.Exit(straggler(db, os.Getenv(stragglerStop)))
	}
	testtables.Main(m)
}

// incrementN increments n, or sets it to its input when that is a number (another client).
func incrementN(env *ssf.Env, in json.RawMessage) (any, error) {
	var v *int
	if err := json.Unmarshal(in, &v); err == nil && v != nil {
		return nil, env.Write("t", "n", *v)
	}
	return increment(env, "t", "n")
}

// setN writes n as another client would, as instance id.
func setN(t *testing.T, rt *ssf.Runtime, id string, v int) {
	t.Helper()
	if _, err := rt.Handle(context.Background(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Input: json.RawMessage(strconv.Itoa(v))}); err != nil {
		t.Fatal(err)
	}
}

func stragglerRuntime(db string, faults ssf.FaultInjector) (*local.Host, *ssf.Runtime, error) {
	tbl, err := store.Open(context.Background(), "sqlite://"+db+"?table=app")
	if err != nil {
		return nil, nil, err
	}
	h := local.NewHost()
	rt, err := h.Add(ssf.Config{Name: App, Store: tbl, Handler: incrementN, RowCapacity: 2, Lifetime: stragglerLifetime,
		GCBound: stragglerGCBound, RelaunchDelay: time.Hour, Faults: faults, Logger: quiet()})
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, rt, nil
}

// crashInHandler crashes an execution at its handler's first read.
type crashInHandler struct{}

func (crashInHandler) Inject(_ context.Context, p ssf.FaultPoint) error {
	if p.Instance == InstanceID && p.Op == "scan" && strings.HasPrefix(p.Key.Partition, "d|") {
		return ssf.ErrCrashed
	}
	return nil
}

// announcer prints "STOP" at the chosen boundary of the instance's execution and waits there a
// moment, so that the parent's SIGSTOP lands at that boundary.
type announcer struct {
	op, prefix string
	after      bool
	once       sync.Once
}

func (a *announcer) Inject(_ context.Context, p ssf.FaultPoint) error {
	if p.Instance == InstanceID && p.Op == a.op && p.After == a.after && strings.HasPrefix(p.Key.Partition, a.prefix) {
		a.once.Do(func() {
			fmt.Println("STOP")
			time.Sleep(time.Second)
		})
	}
	return nil
}

func straggler(db, stop string) int {
	parts := strings.Split(stop, ":")
	if len(parts) != 3 {
		fmt.Println("bad", stragglerStop, stop)
		return 2
	}
	h, rt, err := stragglerRuntime(db, &announcer{op: parts[0], prefix: parts[1], after: parts[2] == "after"})
	if err != nil {
		fmt.Println("ERROR", err)
		return 2
	}
	defer h.Close()
	res, err := rt.Handle(context.Background(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: InstanceID})
	if err != nil {
		fmt.Println("ABANDONED", strconv.Quote(err.Error()))
		return 0
	}
	fmt.Println("ANSWER", show(res))
	return 0
}

func TestStragglerProcessPausedPastT(t *testing.T) {
	for _, stop := range []string{
		"get:i|:after",   // read the intent as unfinished, then paused (schedule 6)
		"scan:d|:before", // inside the handler, its read's request past its fence check
	} {
		t.Run(stop, func(t *testing.T) {
			db := t.TempDir() + "/straggler.db"
			// Two writes fill n's head row, so the instance's write lands in a row the collector
			// can unlink. A first execution registers the instance and dies in its handler, so
			// the child's delivery finds it unfinished.
			first, rt, err := stragglerRuntime(db, crashInHandler{})
			if err != nil {
				t.Fatal(err)
			}
			setN(t, rt, "fill-1", 0)
			setN(t, rt, "fill-2", 0)
			if _, err := rt.Handle(context.Background(), ssf.Request{Kind: ssf.KindInvoke, InstanceID: InstanceID}); err == nil {
				t.Fatal("the first execution did not crash")
			}
			first.Close()

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), stragglerEnv+"="+db, stragglerStop+"="+stop)
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			if !lines.Scan() || lines.Text() != "STOP" {
				_ = child.Process.Kill()
				t.Fatalf("the child did not reach %s: %q", stop, lines.Text())
			}
			if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			continued := false
			defer func() {
				if !continued {
					_ = child.Process.Signal(syscall.SIGCONT)
					_ = child.Process.Kill()
				}
			}()

			// A duplicate delivery runs the instance while the child is stopped, then the
			// collectors run past T: stamp, and T later collect.
			h, rt, err := stragglerRuntime(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ctx := context.Background()
			res, err := rt.Handle(ctx, ssf.Request{Kind: ssf.KindInvoke, InstanceID: InstanceID})
			if err != nil {
				t.Fatalf("the duplicate delivery: %v", err)
			}
			// Other clients write after it finished; its row fills and gets a successor.
			for i, v := range []int{10, 11, 12} {
				setN(t, rt, fmt.Sprintf("later-%d", i), v)
			}
			for range 2 {
				time.Sleep(stragglerGCBound + stragglerLifetime)
				if _, err := rt.CollectGarbage(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if st, err := rt.Intent(ctx, InstanceID); err != nil || !st.Collected {
				t.Fatalf("the instance was not collected while the child was stopped: %+v %v", st, err)
			}

			if err := child.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			continued = true
			rest, _ := io.ReadAll(out)
			if err := child.Wait(); err != nil {
				t.Fatalf("child: %v\n%s", err, rest)
			}
			said := strings.TrimSpace(string(rest))
			t.Logf("the duplicate answered %s; the child, continued after T: %s", show(res), said)
			if answer, ok := strings.CutPrefix(said, "ANSWER "); ok && answer != show(res) {
				t.Fatalf("the child answered %s, the instance's result is %s", answer, show(res))
			}
			items, err := rt.Items(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(items["t/n"]) != "12" || show(res) != `{"output":1}` {
				t.Fatalf("n = %s after the later writes ended with 12 (the instance answered %s): the straggler acted after it was collected", items["t/n"], show(res))
			}
		})
	}
}
