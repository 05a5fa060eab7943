package devserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ssfkit/ssfkit/internal/temporaltest"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal/devserver"
)

const taskQueue = "devserver-test"

func TestMain(m *testing.M) { temporaltest.Main(m) }

func TestWorkflowWithActivityCompletes(t *testing.T) {
	n := startNode(t, devserver.Options{})
	if got := runGreeting(t, n.client, "world"); got != "hello world" {
		t.Fatalf("workflow returned %q, want %q", got, "hello world")
	}
}

func TestFileBackedServerFinishesWorkflowAfterRestart(t *testing.T) {
	ctx := t.Context()
	dbFile := filepath.Join(t.TempDir(), "temporal.db")

	first := startNode(t, devserver.Options{DBFile: dbFile})
	run, err := first.client.ExecuteWorkflow(ctx,
		client.StartWorkflowOptions{ID: "resume-after-restart", TaskQueue: taskQueue},
		resumableWorkflow, "before")
	if err != nil {
		t.Fatal(err)
	}
	waitUntilWaitingForSignal(t, first.client, run)
	first.stop()

	second := startNode(t, devserver.Options{DBFile: dbFile})
	if err := second.client.SignalWorkflow(ctx, run.GetID(), "", resumeSignal, "after"); err != nil {
		t.Fatalf("signal after restart: %v", err)
	}
	var got string
	if err := second.client.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &got); err != nil {
		t.Fatalf("workflow after restart: %v", err)
	}
	if want := "hello before, hello after"; got != want {
		t.Fatalf("workflow returned %q, want %q", got, want)
	}
	second.stop()

	// The SQLite plugin keeps one connection per file for the life of the process, so the
	// restart above reused it; a copy of the file makes the server read it afresh, as a new
	// `ssfkit dev` process would.
	copied := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, dbFile, copied)
	third := startNode(t, devserver.Options{DBFile: copied})
	desc, err := third.client.DescribeWorkflowExecution(ctx, run.GetID(), "")
	if err != nil {
		t.Fatalf("describe in the copied file: %v", err)
	}
	if status := desc.GetWorkflowExecutionInfo().GetStatus(); status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("workflow in the copied file is %v, want completed", status)
	}
}

func TestStartFailsWhenDBFileDirectoryIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := devserver.Start(devserver.Options{DBFile: filepath.Join(missing, "temporal.db")})
	if err == nil || !strings.Contains(err.Error(), missing+" does not exist") {
		t.Fatalf("Start with a DBFile in a missing directory: got error %v, want one saying %s does not exist", err, missing)
	}
}

func TestStartFailsWhenPortIsInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	_, err = devserver.Start(devserver.Options{Port: port})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start on a port in use: got error %v, want address already in use", err)
	}
}

func TestListensOnLoopbackOnly(t *testing.T) {
	n := startNode(t, devserver.Options{})
	listeners := listeningAddrs(t)
	if !slices.Contains(listeners, n.server.Addr()) {
		t.Errorf("frontend %s not among the process's listeners %v", n.server.Addr(), listeners)
	}
	for _, addr := range listeners {
		if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
			t.Errorf("listening on %s, want 127.0.0.1 only (all listeners: %v)", addr, listeners)
		}
	}
}

// TestTemporaltestSharesOneServer checks internal/temporaltest here rather than in a test binary
// of its own: every binary that links the Temporal server adds about half a minute to CI.
func TestTemporaltestSharesOneServer(t *testing.T) {
	w := worker.New(temporaltest.Client(t), taskQueue, worker.Options{})
	w.RegisterWorkflow(greetingWorkflow)
	w.RegisterActivity(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	// A second client reaches the worker through the same server.
	if got := runGreeting(t, temporaltest.Client(t), "shared"); got != "hello shared" {
		t.Fatalf("workflow returned %q, want %q", got, "hello shared")
	}
}

// BenchmarkThreeActivityWorkflow runs a workflow of three trivial activities end to end (start,
// then wait for the result), one at a time, under Temporal's default dynamic config and under
// devserver.TunedConfig. Percentiles need samples: run it with -benchtime 300x or more.
func BenchmarkThreeActivityWorkflow(b *testing.B) { benchmarkWorkflow(b, threeActivityWorkflow) }

// BenchmarkThreeTimerWorkflow is the same with a workflow that sleeps 10 ms three times; under
// the default config it takes seconds per workflow, so -benchtime 20x is plenty.
func BenchmarkThreeTimerWorkflow(b *testing.B) { benchmarkWorkflow(b, threeTimerWorkflow) }

func benchmarkWorkflow(b *testing.B, workflowFunc func(workflow.Context, int) (int, error)) {
	temporalDefaults := map[string]any{}
	for key := range devserver.TunedConfig() {
		temporalDefaults[key] = nil
	}
	for _, variant := range []struct {
		name   string
		config map[string]any
	}{{"default", temporalDefaults}, {"tuned", nil}} {
		b.Run(variant.name, func(b *testing.B) {
			n := startNode(b, devserver.Options{DynamicConfig: variant.config})
			ctx := b.Context()
			runOnce := func(id string) time.Duration {
				start := time.Now()
				run, err := n.client.ExecuteWorkflow(ctx,
					client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, workflowFunc, 0)
				if err != nil {
					b.Fatal(err)
				}
				var steps int
				if err := run.Get(ctx, &steps); err != nil || steps != 3 {
					b.Fatalf("workflow returned %d, %v; want 3 steps", steps, err)
				}
				return time.Since(start)
			}
			// The first workflows on a task queue pay for loading it; leave them out.
			for i := range 3 {
				runOnce("warmup-" + strconv.Itoa(i))
			}
			var latencies []time.Duration
			for b.Loop() {
				latencies = append(latencies, runOnce("bench-"+strconv.Itoa(len(latencies))))
			}
			slices.Sort(latencies)
			b.ReportMetric(millis(percentile(latencies, 50)), "median-ms")
			b.ReportMetric(millis(percentile(latencies, 99)), "p99-ms")
		})
	}
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// node is a server with a client and a worker on it, stopped in that order's reverse.
type node struct {
	server   *devserver.Server
	client   client.Client
	worker   worker.Worker
	stopOnce sync.Once
}

func startNode(t testing.TB, opts devserver.Options) *node {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server, err := devserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{
		HostPort:  server.Addr(),
		Namespace: server.Namespace(),
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		server.Stop()
		t.Fatal(err)
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(greetingWorkflow)
	w.RegisterWorkflow(resumableWorkflow)
	w.RegisterWorkflow(threeActivityWorkflow)
	w.RegisterWorkflow(threeTimerWorkflow)
	w.RegisterActivity(greet)
	w.RegisterActivity(increment)
	if err := w.Start(); err != nil {
		c.Close()
		server.Stop()
		t.Fatal(err)
	}
	n := &node{server: server, client: c, worker: w}
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.stopOnce.Do(func() {
		n.worker.Stop()
		n.client.Close()
		n.server.Stop()
	})
}

var activityOptions = workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second}

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

func increment(_ context.Context, n int) (int, error) { return n + 1, nil }

func greetingWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	var greeting string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &greeting)
	return greeting, err
}

func threeActivityWorkflow(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	for range 3 {
		if err := workflow.ExecuteActivity(ctx, increment, n).Get(ctx, &n); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func threeTimerWorkflow(ctx workflow.Context, n int) (int, error) {
	for range 3 {
		if err := workflow.Sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

const resumeSignal = "resume"

// resumableWorkflow greets first, then waits for a name on resumeSignal and greets it.
func resumableWorkflow(ctx workflow.Context, first string) (string, error) {
	firstGreeting, err := greetingWorkflow(ctx, first)
	if err != nil {
		return "", err
	}
	var second string
	workflow.GetSignalChannel(ctx, resumeSignal).Receive(ctx, &second)
	secondGreeting, err := greetingWorkflow(ctx, second)
	return firstGreeting + ", " + secondGreeting, err
}

func runGreeting(t *testing.T, c client.Client, name string) string {
	t.Helper()
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: taskQueue}, greetingWorkflow, name)
	if err != nil {
		t.Fatal(err)
	}
	var greeting string
	if err := run.Get(t.Context(), &greeting); err != nil {
		t.Fatal(err)
	}
	return greeting
}

// waitUntilWaitingForSignal waits until run's first activity has completed and the workflow
// task after it has been recorded, so that the workflow is blocked on the signal.
func waitUntilWaitingForSignal(t *testing.T, c client.Client, run client.WorkflowRun) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		events := historyEventTypes(t, c, run)
		if slices.Contains(events, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) &&
			events[len(events)-1] == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow not waiting for its signal after 30 s; history: %v", events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func historyEventTypes(t *testing.T, c client.Client, run client.WorkflowRun) []enumspb.EventType {
	t.Helper()
	var types []enumspb.EventType
	it := c.GetWorkflowHistory(t.Context(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		event, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, event.GetEventType())
	}
	return types
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// listeningAddrs returns the TCP addresses this process listens on, from /proc: the sockets
// among its open files that are in the LISTEN state.
func listeningAddrs(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("listing the process's sockets needs Linux /proc: %v", err)
	}
	ownSockets := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			ownSockets[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var addrs []string
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(line)
			const listen = "0A"
			if len(fields) < 10 || fields[3] != listen || !ownSockets[fields[9]] {
				continue
			}
			addr, err := parseProcAddr(fields[1])
			if err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			addrs = append(addrs, addr)
		}
	}
	return addrs
}

// parseProcAddr decodes /proc/net/tcp's "HEXIP:HEXPORT", where the IP is stored as 32-bit
// words in host (little-endian) byte order.
func parseProcAddr(s string) (string, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if !ok || err != nil || len(hexIP)%8 != 0 {
		return "", fmt.Errorf("malformed address %q", s)
	}
	ip := make(net.IP, 0, len(hexIP)/2)
	for word := 0; word < len(hexIP); word += 8 {
		v, err := strconv.ParseUint(hexIP[word:word+8], 16, 32)
		if err != nil {
			return "", errors.Join(fmt.Errorf("malformed address %q", s), err)
		}
		ip = append(ip, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port))), nil
}
