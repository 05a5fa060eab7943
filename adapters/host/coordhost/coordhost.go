// Package coordhost holds what the coordination service's functions share on every cloud (the
// serverless path, docs/coordination.md): their settings as modules/<cloud>/coordination sets
// them, the writer (a queue consumer that decides a session's stored requests, coord.Service's
// Decide), the heartbeat (a scheduled pass that expires sessions, writes snapshots and sweeps the
// bucket, coord.Service's Tend), and the queue a proxy wakes writers through (QueueWaker). The
// platform glue is in ./lambda (AWS Lambda) and httphost (Azure Functions, Cloud Run).
//
// Imports (docs/architecture.md): the store and queue APIs, orchestrator/coord and
// internal/coordblob (the bucket by URL).
package coordhost

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// The functions' roles (SSFKIT_COORD_ROLE).
const (
	RoleWriter    = "writer"
	RoleHeartbeat = "heartbeat"
)

// Config is a coordination function's configuration, from its environment (ConfigFromEnv).
type Config struct {
	// Role (SSFKIT_COORD_ROLE) is writer or heartbeat for a function that is one of them (AWS
	// Lambda), empty for one that serves both (an Azure function app, a Cloud Run service).
	Role        string
	Environment string // SSFKIT_ENVIRONMENT
	Store       string // SSFKIT_COORD_STORE: the service's table
	Queue       string // SSFKIT_COORD_QUEUE: the requests' queue, which proxies wake writers through
	Blobs       string // SSFKIT_COORD_BLOBS (optional): the bucket for large log entries
	// SnapshotEvery (SSFKIT_COORD_SNAPSHOT_EVERY, optional): coord.Config.SnapshotEvery.
	SnapshotEvery int64
}

// ConfigFromEnv reads a function's configuration; getenv is os.Getenv outside tests. The errors
// name the setting, for the function's init failure report.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Role: getenv("SSFKIT_COORD_ROLE"), Environment: getenv("SSFKIT_ENVIRONMENT"),
		Store: getenv("SSFKIT_COORD_STORE"), Queue: getenv("SSFKIT_COORD_QUEUE"), Blobs: getenv("SSFKIT_COORD_BLOBS")}
	if c.Role != "" && c.Role != RoleWriter && c.Role != RoleHeartbeat {
		return c, fmt.Errorf("coordhost: SSFKIT_COORD_ROLE is %q; want %s, %s, or unset for both (the coordination module sets it)", c.Role, RoleWriter, RoleHeartbeat)
	}
	for _, s := range []struct{ name, value string }{{"SSFKIT_ENVIRONMENT", c.Environment}, {"SSFKIT_COORD_STORE", c.Store}, {"SSFKIT_COORD_QUEUE", c.Queue}} {
		if s.value == "" {
			return c, fmt.Errorf("coordhost: %s is not set (the coordination module sets it)", s.name)
		}
	}
	if raw := getenv("SSFKIT_COORD_SNAPSHOT_EVERY"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n == 0 {
			return c, fmt.Errorf("coordhost: SSFKIT_COORD_SNAPSHOT_EVERY=%q must be a whole number of transactions, not 0 (negative: never)", raw)
		}
		c.SnapshotEvery = n
	}
	return c, nil
}

// Function is an open writer or heartbeat: the service's table, bucket and a Service on them
// without a tick (the platform invokes it).
type Function struct {
	Config  Config
	Service *coord.Service
	tbl     *store.Table
	bucket  *coordblob.Bucket
}

// Open opens the function's table and bucket and replays the log into its Service's replica.
// A warm function keeps it, so later invocations read only the log's new entries.
func Open(ctx context.Context, cfg Config) (*Function, error) {
	f := &Function{Config: cfg}
	// Each heartbeat pass looks for emptied containers and expired TTL nodes: the schedule is
	// the check's period.
	ccfg := coord.Config{Tick: -1, SnapshotEvery: cfg.SnapshotEvery, ContainerCheck: time.Nanosecond}
	if cfg.Blobs != "" {
		b, err := coordblob.Open(ctx, cfg.Blobs)
		if err != nil {
			return nil, fmt.Errorf("coordhost: SSFKIT_COORD_BLOBS: %w", err)
		}
		f.bucket, ccfg.Blobs = b, b
	}
	tbl, err := store.Open(ctx, cfg.Store)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("coordhost: SSFKIT_COORD_STORE: %w", err)
	}
	f.tbl = tbl
	if f.Service, err = coord.New(ctx, tbl, ccfg); err != nil {
		f.Close()
		return nil, fmt.Errorf("coordhost: %w", err)
	}
	return f, nil
}

// Close releases the table and the bucket.
func (f *Function) Close() {
	if f.Service != nil {
		f.Service.Close()
	}
	if f.tbl != nil {
		f.tbl.Close()
	}
	if f.bucket != nil {
		f.bucket.Close()
	}
}

// wake is a queue message: the session whose stored requests a writer is to decide.
type wake struct {
	Session string `json:"session"` // hex, as ZooKeeper prints session ids
}

// HandleMessage is the writer: it decides the stored requests of the session the message names.
// A message that names no session is poison; a failure is retried by the queue (Decide is safe
// to run again, and concurrently).
func (f *Function) HandleMessage(ctx context.Context, m *queue.Message) error {
	return Writer(f.Service)(ctx, m)
}

// Writer is the writer's queue handler for a Service: it decides the stored requests of the
// session each message names.
func Writer(svc *coord.Service) queue.Handler {
	return func(ctx context.Context, m *queue.Message) error {
		var w wake
		id, err := uint64(0), json.Unmarshal(m.Body, &w)
		if err == nil {
			id, err = strconv.ParseUint(w.Session, 16, 63)
		}
		if err != nil || id == 0 {
			return queue.Poison(fmt.Errorf("coordhost: the message %q does not name a session (want {\"session\":\"<hex id>\"}): %v", m.Body, err))
		}
		return svc.Decide(ctx, int64(id))
	}
}

// HeartbeatReport is what one heartbeat pass did, the function's result.
type HeartbeatReport struct {
	Zxid     int64  `json:"zxid"` // the log's last transaction after the pass
	Duration string `json:"duration"`
}

// Heartbeat is one pass of the scheduled heartbeat: read the log's tail, expire sessions whose
// clients stopped heartbeating, close orphans, write a snapshot when one is due, sweep the bucket.
func (f *Function) Heartbeat(ctx context.Context) (HeartbeatReport, error) {
	start := time.Now()
	if err := f.Service.Tend(ctx); err != nil {
		return HeartbeatReport{}, err
	}
	return HeartbeatReport{Zxid: f.Service.LastZxid(), Duration: time.Since(start).Round(time.Millisecond).String()}, nil
}

// QueueWaker wakes writers through the requests' queue: what a proxy (coord.Config.Waker) uses.
type QueueWaker struct{ Queue *queue.Queue }

// Wake sends one message naming the session.
func (q QueueWaker) Wake(ctx context.Context, session int64) error {
	body, _ := json.Marshal(wake{Session: strconv.FormatUint(uint64(session), 16)})
	_, err := q.Queue.Send(ctx, body)
	return err
}

var _ coord.Waker = QueueWaker{}
