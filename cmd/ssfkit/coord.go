package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/internal/coordserve"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

const coordSynopsis = `Serves the coordination service, ZooKeeper's data model and guarantees on one
store table, to unmodified ZooKeeper clients (zkCli.sh, kazoo, go-zookeeper) over
the ZooKeeper protocol. Its state is the table's transaction log, so servers on the
same table share it. Stop it with Ctrl-C; sessions outlive it until they expire.
docs/coordination.md says what it does and what it does not yet do.

A log entry too large for one row (a znode's data is up to 1 MB) is split across
rows of the table, or, with --blobs, kept as one object in a bucket (S3, Azure
Blob Storage, Google Cloud Storage), where FaaSKeeper keeps node data.

Examples:
  ssfkit coord serve --store 'sqlite:///tmp/zk.db?table=zookeeper' --addr 127.0.0.1:2181
  ssfkit coord serve --store 'dynamodb://zookeeper?region=us-east-1' --blobs 's3://my-zk-bucket?region=us-east-1'`

// coordDefaultAddr is ZooKeeper's client port, on loopback.
const coordDefaultAddr = "127.0.0.1:2181"

func runCoord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintf(stderr, "Usage: ssfkit coord serve [flags]\n\n%s\n\nRun 'ssfkit coord serve -h' for its flags.\n", coordSynopsis)
		return nil
	}
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintf(stderr, "Usage: ssfkit coord serve [flags]\n")
		return &cliUsageError{err: errors.New("coord: give the action: serve"), printed: true}
	}
	fs := newFlagSetUsage("coord serve", "ssfkit coord serve [flags]", coordSynopsis, stderr)
	storeURL := fs.String("store", "", "store `URL` of the service's table (required), e.g. sqlite:///abs/path.db?table=zookeeper or mem:// for a throwaway run")
	addr := fs.String("addr", coordDefaultAddr, "ZooKeeper client `address` to listen on")
	blobs := fs.String("blobs", "", "bucket `URL` for log entries too large for a row (default: split across rows): s3://BUCKET?region=R, azblob://CONTAINER, gs://BUCKET, file:///abs/dir, mem://; every server of the table needs the same one")
	public := fs.Bool("public", false, "allow a non-loopback --addr; reachable from other machines, with ACLs the only protection")
	minTimeout := fs.Duration("min-session-timeout", 4*time.Second, "the shortest session timeout granted")
	maxTimeout := fs.Duration("max-session-timeout", 40*time.Second, "the longest session timeout granted")
	snapshotEvery := fs.Int64("snapshot-every", 10000, "transactions between snapshots, each followed by a compaction of the log behind it (-1: never)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *storeURL == "" {
		return &cliUsageError{err: errors.New("coord serve: --store is required")}
	}
	if err := checkListenAddr("coord serve", "--addr", *addr, *public); err != nil {
		return &cliUsageError{err: err}
	}
	if *minTimeout <= 0 || *maxTimeout < *minTimeout {
		return &cliUsageError{err: errors.New("coord serve: want 0 < --min-session-timeout <= --max-session-timeout")}
	}
	if *snapshotEvery == 0 || *snapshotEvery < -1 {
		return &cliUsageError{err: fmt.Errorf("coord serve: --snapshot-every %d: want a positive number of transactions, or -1 for never", *snapshotEvery)}
	}
	ln, err := listenZooKeeper("coord serve", "--addr", *addr, "")
	if err != nil {
		return err
	}
	srv, err := coordserve.Start(ctx, *storeURL, *blobs, ln, coord.Config{MinSessionTimeout: *minTimeout, MaxSessionTimeout: *maxTimeout, SnapshotEvery: *snapshotEvery},
		func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) })
	if err != nil {
		ln.Close()
		return fmt.Errorf("coord serve: %w", err)
	}
	defer srv.Close()
	large := "split across rows"
	if *blobs != "" {
		large = "in bucket " + coordblob.Redacted(*blobs)
	}
	fmt.Fprintf(stdout, "ssfkit coord: ZooKeeper protocol on %s, store %s, large entries %s, session timeouts %v to %v\n"+
		"  try: zkCli.sh -server %[1]s\nPress Ctrl-C to stop.\n", ln.Addr(), redacted(*storeURL), large, *minTimeout, *maxTimeout)
	select {
	case err := <-srv.Failed():
		return fmt.Errorf("coord serve: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// listenZooKeeper listens for ZooKeeper clients, naming the flag that moves it when the port
// is taken (and how to turn it off, when offHint says).
func listenZooKeeper(cmd, flagName, addr, offHint string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s: %s is already in use (another ssfkit, or a ZooKeeper server?); pass %s 127.0.0.1:PORT to listen on another port%s", cmd, addr, flagName, offHint)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return ln, nil
}

// redacted is a store URL without its password, for banners.
func redacted(raw string) string {
	u, err := store.ParseURL(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
