package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

const coordSynopsis = `The coordination service: ZooKeeper's data model and guarantees on one store
table, for unmodified ZooKeeper clients (zkCli.sh, kazoo, go-zookeeper) over the
ZooKeeper protocol. Its state is the table's transaction log, so every process on
the same table shares it. docs/coordination.md says what it does and does not do.

  serve   a server: reads from its replica of the log, appends writes itself.
  proxy   the serverless path's client side, a sidecar beside the application:
          the same endpoint and replica, but each write is stored as a request
          of its session and decided by writer functions it wakes through a
          queue (--queue), so it needs no right to append to the log.
  writer  the serverless path's writer and heartbeat functions in one process
          (modules/<cloud>/coordination runs them as cloud functions): decides
          the requests proxies store, expires sessions, writes snapshots.

A log entry too large for one row (a znode's data is up to 1 MB) is split across
rows of the table, or, with --blobs, kept as one object in a bucket (S3, Azure
Blob Storage, Google Cloud Storage), where FaaSKeeper keeps node data. Stop any of
them with Ctrl-C; sessions outlive them until they expire.

Examples:
  ssfkit coord serve --store 'sqlite:///tmp/zk.db?table=zookeeper' --addr 127.0.0.1:2181
  ssfkit coord serve --store 'dynamodb://zookeeper?region=us-east-1' --blobs 's3://my-zk-bucket?region=us-east-1'
  ssfkit coord writer --store 'sqlite:///tmp/zk.db?table=zookeeper' --queue 'log:///tmp/zk.db?table=zkqueue' \
      --dead-letter-queue 'log:///tmp/zk.db?table=zkdead'
  ssfkit coord proxy --store 'sqlite:///tmp/zk.db?table=zookeeper' --queue 'log:///tmp/zk.db?table=zkqueue'`

// coordDefaultAddr is ZooKeeper's client port, on loopback.
const coordDefaultAddr = "127.0.0.1:2181"

const coordUsage = "ssfkit coord serve|proxy|writer [flags]"

func runCoord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintf(stderr, "Usage: %s\n\n%s\n\nRun 'ssfkit coord ACTION -h' for its flags.\n", coordUsage, coordSynopsis)
		return nil
	}
	if len(args) == 0 || (args[0] != "serve" && args[0] != "proxy" && args[0] != "writer") {
		fmt.Fprintf(stderr, "Usage: %s\n", coordUsage)
		return &cliUsageError{err: errors.New("coord: give the action: serve, proxy or writer"), printed: true}
	}
	action := args[0]
	cmd := "coord " + action
	fs := newFlagSetUsage(cmd, "ssfkit "+cmd+" [flags]", coordSynopsis, stderr)
	storeURL := fs.String("store", "", "store `URL` of the service's table (required), e.g. sqlite:///abs/path.db?table=zookeeper or mem:// for a throwaway run")
	blobs := fs.String("blobs", "", "bucket `URL` for log entries too large for a row (default: split across rows): s3://BUCKET?region=R, azblob://CONTAINER, gs://BUCKET, file:///abs/dir, mem://; every process on the table needs the same one")
	snapshotEvery := fs.Int64("snapshot-every", 10000, "transactions between snapshots, each followed by a compaction of the log behind it (-1: never; serve and writer)")
	var queueURL, deadLetter *string
	if action != "serve" {
		queueURL = fs.String("queue", "", "queue `URL` proxies wake writers through (required): the coordination module's queue_url, or any ssfkit queue (log://, sqs://, azqueue://, pubsub://)")
	}
	var addr *string
	var public *bool
	var minTimeout, maxTimeout, heartbeatEvery, tick *time.Duration
	containerCheck := new(time.Duration)
	if action == "writer" {
		deadLetter = fs.String("dead-letter-queue", "", "queue `URL` for wake-ups that name no session (required)")
		heartbeatEvery = fs.Duration("heartbeat-every", time.Second, "how often the heartbeat pass expires sessions, deletes emptied containers and expired TTL nodes, and writes snapshots")
	} else {
		if action == "serve" {
			containerCheck = fs.Duration("container-check", time.Minute, "how often it deletes emptied containers and expired TTL nodes (ZooKeeper's znode.container.checkIntervalMs)")
		}
		addr = fs.String("addr", coordDefaultAddr, "ZooKeeper client `address` to listen on")
		public = fs.Bool("public", false, "allow a non-loopback --addr; reachable from other machines, with ACLs the only protection")
		minTimeout = fs.Duration("min-session-timeout", 4*time.Second, "the shortest session timeout granted")
		maxTimeout = fs.Duration("max-session-timeout", 40*time.Second, "the longest session timeout granted")
		tick = fs.Duration("tick", 200*time.Millisecond, "how often it reads the log's tail (other processes' writes, hence watches they trigger) and looks for expired sessions: each tick is a store read and a scan (docs/coordination.md, cost model)")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *storeURL == "" {
		return &cliUsageError{err: fmt.Errorf("%s: --store is required", cmd)}
	}
	if queueURL != nil && *queueURL == "" {
		return &cliUsageError{err: fmt.Errorf("%s: --queue is required", cmd)}
	}
	if *snapshotEvery == 0 || *snapshotEvery < -1 {
		return &cliUsageError{err: fmt.Errorf("%s: --snapshot-every %d: want a positive number of transactions, or -1 for never", cmd, *snapshotEvery)}
	}
	if action == "writer" {
		if *deadLetter == "" {
			return &cliUsageError{err: fmt.Errorf("%s: --dead-letter-queue is required", cmd)}
		}
		if *heartbeatEvery <= 0 {
			return &cliUsageError{err: fmt.Errorf("%s: --heartbeat-every must be positive", cmd)}
		}
		fmt.Fprintf(stdout, "ssfkit coord writer: deciding the requests woken on %s, store %s; heartbeat every %v\nPress Ctrl-C to stop.\n",
			redactedQueue(*queueURL), redacted(*storeURL), *heartbeatEvery)
		err := coordserve.RunWriter(ctx, coordserve.WriterOptions{Store: *storeURL, Queue: *queueURL, Blobs: *blobs, DeadLetterQueue: *deadLetter,
			HeartbeatEvery: *heartbeatEvery, SnapshotEvery: *snapshotEvery})
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		return nil
	}
	if err := checkListenAddr(cmd, "--addr", *addr, *public); err != nil {
		return &cliUsageError{err: err}
	}
	if *minTimeout <= 0 || *maxTimeout < *minTimeout {
		return &cliUsageError{err: fmt.Errorf("%s: want 0 < --min-session-timeout <= --max-session-timeout", cmd)}
	}
	if *tick <= 0 || *tick > *minTimeout {
		return &cliUsageError{err: fmt.Errorf("%s: --tick %v: want a positive period no longer than --min-session-timeout (%v), or sessions outlive their timeout", cmd, *tick, *minTimeout)}
	}
	ln, err := listenZooKeeper(cmd, "--addr", *addr, "")
	if err != nil {
		return err
	}
	if action == "serve" && *containerCheck <= 0 {
		return &cliUsageError{err: fmt.Errorf("%s: --container-check %v: want a positive period", cmd, *containerCheck)}
	}
	cfg := coord.Config{MinSessionTimeout: *minTimeout, MaxSessionTimeout: *maxTimeout, SnapshotEvery: *snapshotEvery, Tick: *tick, ContainerCheck: *containerCheck}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	var srv *coordserve.Server
	if action == "proxy" {
		srv, err = coordserve.StartProxy(ctx, *storeURL, *queueURL, *blobs, ln, cfg, logf)
	} else {
		srv, err = coordserve.Start(ctx, *storeURL, *blobs, ln, cfg, logf)
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("%s: %w", cmd, err)
	}
	defer srv.Close()
	large := "split across rows"
	if *blobs != "" {
		large = "in bucket " + coordblob.Redacted(*blobs)
	}
	writes := "appended by this server"
	if action == "proxy" {
		writes = "decided by writers woken on " + redactedQueue(*queueURL)
	}
	fmt.Fprintf(stdout, "ssfkit %s: ZooKeeper protocol on %s, store %s, writes %s, large entries %s, session timeouts %v to %v\n"+
		"  try: zkCli.sh -server %[2]s\nPress Ctrl-C to stop.\n", cmd, ln.Addr(), redacted(*storeURL), writes, large, *minTimeout, *maxTimeout)
	select {
	case err := <-srv.Failed():
		return fmt.Errorf("%s: %w", cmd, err)
	case <-ctx.Done():
		return nil
	}
}

// listenZooKeeper listens for ZooKeeper clients, naming the flag that moves it when the port
// is taken (and how to turn it off, when offHint says).
func listenZooKeeper(cmd, flagName, addr, offHint string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %s is already in use (another ssfkit, or a ZooKeeper server?); pass %s 127.0.0.1:PORT to listen on another port%s: %w", cmd, addr, flagName, offHint, syscall.EADDRINUSE)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return ln, nil
}

// redactedQueue is a queue URL without its credentials, for banners.
func redactedQueue(raw string) string {
	u, err := queue.ParseURL(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// redacted is a store URL without its password, for banners.
func redacted(raw string) string {
	u, err := store.ParseURL(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
