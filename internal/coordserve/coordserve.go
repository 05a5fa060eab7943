// Package coordserve runs the coordination service (orchestrator/coord) with its ZooKeeper
// endpoint (adapters/host/zkserver) on one store table, and optionally a bucket for large log
// entries: what `ssfkit coord serve` and `ssfkit dev` start.
//
// Imports: the store API, orchestrator/coord, adapters/host/zkserver and internal/coordblob (the
// bucket by URL: coord takes it as an interface and imports no cloud SDK); cmd/ssfkit imports it.
package coordserve

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/ssfkit/ssfkit/adapters/host/zkserver"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/coordblob"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// Server is a running coordination service and its ZooKeeper endpoint.
type Server struct {
	tbl    *store.Table
	bucket *coordblob.Bucket // nil: none, or the caller's
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

// Close stops serving (clients' sessions stay in the table until they expire) and closes the
// table.
func (s *Server) Close() error {
	s.zs.Close()
	s.svc.Close()
	err := s.tbl.Close()
	if s.bucket != nil {
		err = errors.Join(err, s.bucket.Close())
	}
	return err
}
