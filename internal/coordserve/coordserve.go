// Package coordserve runs the coordination service (orchestrator/coord) with its ZooKeeper
// endpoint (adapters/host/zkserver) on one store table, and optionally a bucket for large log
// entries: what `ssfkit coord serve` and `ssfkit dev` start. On the serverless path it runs the
// proxy (`ssfkit coord proxy`: the same endpoint, its writes decided by writer functions) and,
// on a laptop or in a container, the writer and heartbeat functions (`ssfkit coord writer`).
//
// Imports: the store and queue APIs, orchestrator/coord, adapters/host/zkserver,
// adapters/host/coordhost and internal/coordblob (the bucket by URL: coord takes it as an
// interface and imports no cloud SDK); cmd/ssfkit imports it.
package coordserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	"github.com/ssfkit/ssfkit/adapters/host/zkserver"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// Server is a running coordination service and its ZooKeeper endpoint.
type Server struct {
	tbl    *store.Table
	bucket *coordblob.Bucket // nil: none, or the caller's
	queue  *queue.Queue      // a proxy's: where it wakes writers
	svc    *coord.Service
	zs     *zkserver.Server
	served chan error
}

// Start opens storeURL's table and, when blobsURL is not empty, the bucket that holds the log's
// large entries (internal/coordblob: s3://, azblob://, gs://, file:///, mem://; one that does not
// answer fails here, before serving), replays the log and serves ZooKeeper clients on ln (which it
// closes on Close). The caller listens, so a busy port is its error to explain.
func Start(ctx context.Context, storeURL, blobsURL string, ln net.Listener, cfg coord.Config, logf func(format string, args ...any)) (*Server, error) {
	var bucket *coordblob.Bucket
	if blobsURL != "" {
		var err error
		if bucket, err = coordblob.Open(ctx, blobsURL); err != nil {
			return nil, err
		}
		cfg.Blobs = bucket
	}
	tbl, err := store.Open(ctx, storeURL)
	if err != nil {
		if bucket != nil {
			bucket.Close()
		}
		return nil, err
	}
	s, err := StartTable(ctx, tbl, ln, cfg, logf)
	if err != nil {
		if bucket != nil {
			bucket.Close()
		}
		return nil, err
	}
	s.bucket = bucket
	return s, nil
}

// StartProxy is Start as a proxy of the serverless path: the same endpoint and replica, but its
// writes are stored as requests and decided by writers (`ssfkit coord writer`, or the
// coordination module's writer function) that it wakes through the queue at queueURL.
func StartProxy(ctx context.Context, storeURL, queueURL, blobsURL string, ln net.Listener, cfg coord.Config, logf func(format string, args ...any)) (*Server, error) {
	q, err := queue.Open(ctx, queueURL)
	if err != nil {
		return nil, err
	}
	cfg.Waker = coordhost.QueueWaker{Queue: q}
	s, err := Start(ctx, storeURL, blobsURL, ln, cfg, logf)
	if err != nil {
		q.Close()
		return nil, err
	}
	s.queue = q
	return s, nil
}

// StartTable is Start on a table already open (a benchmark's, wrapped to count requests), with
// cfg.Blobs the caller's; Close closes the table.
func StartTable(ctx context.Context, tbl *store.Table, ln net.Listener, cfg coord.Config, logf func(format string, args ...any)) (*Server, error) {
	svc, err := coord.New(ctx, tbl, cfg)
	if err != nil {
		tbl.Close()
		return nil, err
	}
	s := &Server{tbl: tbl, svc: svc, zs: zkserver.New(svc, logf), served: make(chan error, 1)}
	go func() {
		err := s.zs.Serve(ln)
		if err == nil {
			err = errors.New("stopped")
		}
		s.served <- fmt.Errorf("coordination service on %s: %w", ln.Addr(), err)
	}()
	return s, nil
}

// Failed delivers the error that stopped the endpoint (accepting failed) before Close.
func (s *Server) Failed() <-chan error { return s.served }

// Service is the coordination service the server serves (ssfkit dev's console reads its tree).
func (s *Server) Service() *coord.Service { return s.svc }

// Close stops serving (clients' sessions stay in the table until they expire) and closes the
// table.
func (s *Server) Close() error {
	s.zs.Close()
	s.svc.Close()
	err := s.tbl.Close()
	if s.bucket != nil {
		err = errors.Join(err, s.bucket.Close())
	}
	if s.queue != nil {
		err = errors.Join(err, s.queue.Close())
	}
	return err
}

// WriterOptions say where `ssfkit coord writer` finds the service's table, queue and bucket.
type WriterOptions struct {
	Store, Queue, Blobs string
	// DeadLetterQueue receives wake-ups that name no session.
	DeadLetterQueue string
	// HeartbeatEvery is how often the heartbeat pass runs (the module's schedule runs it every
	// minute; a laptop's writer can afford a second).
	HeartbeatEvery time.Duration
	// Concurrency bounds the sessions decided at once (queue.ServeOptions).
	Concurrency int
	// SnapshotEvery is coord.Config.SnapshotEvery.
	SnapshotEvery int64
	Logger        *slog.Logger
}

// RunWriter runs the writer (consuming the queue) and the heartbeat (on a timer) until ctx ends:
// the coordination module's two functions in one process.
func RunWriter(ctx context.Context, o WriterOptions) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	f, err := coordhost.Open(ctx, coordhost.Config{Role: coordhost.RoleWriter, Store: o.Store, Queue: o.Queue, Blobs: o.Blobs, SnapshotEvery: o.SnapshotEvery})
	if err != nil {
		return err
	}
	defer f.Close()
	q, err := queue.Open(ctx, o.Queue)
	if err != nil {
		return err
	}
	defer q.Close()
	dlq, err := queue.Open(ctx, o.DeadLetterQueue)
	if err != nil {
		return fmt.Errorf("the dead-letter queue: %w", err)
	}
	defer dlq.Close()
	go func() {
		tk := time.NewTicker(o.HeartbeatEvery)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			if _, err := f.Heartbeat(ctx); err != nil && ctx.Err() == nil {
				o.Logger.Warn("coordination heartbeat pass failed; retried on the next", "err", err)
			}
		}
	}()
	return queue.Serve(ctx, q, f.HandleMessage, queue.ServeOptions{DeadLetter: dlq, Concurrency: o.Concurrency, Logger: o.Logger})
}
