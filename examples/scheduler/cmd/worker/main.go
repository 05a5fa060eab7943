// Command worker runs one worker of the scheduler example (examples/scheduler): it holds a
// ZooKeeper session with the coordination service, campaigns in the election, ticks the
// schedule through the jobs SSF while it is leader, and takes the maintenance lock now and
// then. Start several, against `ssfkit dev` (which serves the coordination service on
// 127.0.0.1:2181), and stop or kill the leader to watch another take over:
//
//	go run ./examples/scheduler/cmd/worker --id w1
//	go run ./examples/scheduler/cmd/worker --id w2
//
// Every worker hosts the jobs SSF in-process on the same table (--store; a SQLite file by
// default, which several processes share), as every instance of a cloud function shares the
// SSF's table: whichever worker's host runs an instance, ssfkit runs it exactly once, and the
// intent collector each worker runs finishes instances a killed worker left cut short.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	_ "github.com/ssfkit/ssfkit/adapters/store/sqlitestore"
	"github.com/ssfkit/ssfkit/examples/scheduler"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func main() {
	host, _ := os.Hostname()
	var (
		servers  = flag.String("zk", "127.0.0.1:2181", "ZooKeeper servers, comma-separated (ssfkit dev's endpoint by default)")
		id       = flag.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this worker's name in the election")
		storeURL = flag.String("store", "sqlite://"+filepath.Join(os.TempDir(), "ssfkit-scheduler.db")+"?table=jobs", "the jobs SSF's table, shared by all workers")
		job      = flag.String("job", "report", "the scheduled job's name")
		period   = flag.Duration("period", time.Second, "the length of a schedule slot")
		maintain = flag.Duration("maintain-every", 5*time.Second, "how often to try the maintenance lock (0: never)")
		timeout  = flag.Duration("session-timeout", 4*time.Second, "the ZooKeeper session timeout (ssfkit's endpoint allows 4s to 40s by default)")
	)
	flag.Parse()
	if err := run(*servers, *id, *storeURL, *job, *period, *maintain, *timeout); err != nil {
		log.Fatal(err)
	}
}

func run(servers, id, storeURL, job string, period, maintain, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	tbl, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer tbl.Close()
	h := local.NewHost()
	defer h.Close()
	if _, err := h.Add(ssf.Config{Name: scheduler.SSF, Store: tbl, Handler: scheduler.Handlers()[scheduler.SSF],
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		return err
	}
	collectors := make(chan struct{})
	go func() {
		defer close(collectors)
		h.RunCollectors(ctx, 2*time.Second, time.Minute, nil)
	}()
	defer func() { stop(); <-collectors }()

	s, err := scheduler.Dial(strings.Split(servers, ","), timeout, 10*time.Second, nil)
	if err != nil {
		return fmt.Errorf("%w (is `ssfkit dev` or `ssfkit coord serve` running?)", err)
	}
	defer s.Close() // deletes this worker's candidacy at once: the next worker leads without waiting
	leader, err := scheduler.Leader(s, scheduler.DefaultElection)
	if err != nil {
		return err
	}
	logf("%s: session 0x%x with %s; leader now: %q", id, s.Conn.SessionID(), servers, leader)
	w := &scheduler.Worker{ID: id, Session: s, Invoke: h.Invoke, Job: job, Period: period,
		MaintainEvery: maintain, Logf: logf}
	w.Run(ctx)
	return nil
}
