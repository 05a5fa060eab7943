// Package blobsink keeps provenance records as Parquet objects in a bucket, the per-cloud sink
// the environment modules provision: S3 (queried with Athena), Azure Blob Storage (Synapse
// serverless SQL) or Cloud Storage (BigQuery external tables), or a directory (DuckDB, locally).
//
// URLs are gocloud.dev/blob's: s3://BUCKET?region=R, azblob://CONTAINER, gs://BUCKET,
// file:///DIR, mem://; prefix=P puts the objects under P. Each batch the runtime exports becomes
// one object per table, in Hive-style partitions:
//
//	PREFIX/invocations/ssf=NAME/dt=YYYY-MM-DD/BATCH.parquet
//	PREFIX/data_events/ssf=NAME/dt=YYYY-MM-DD/BATCH.parquet
//	PREFIX/calls/ssf=NAME/dt=YYYY-MM-DD/BATCH.parquet
//
// with the columns of the SQLite sink's tables (docs/provenance.md). Exactly-once: a batch
// exported again carries the same records (the runtime's batch protocol) and overwrites the same
// objects; every instance is in one batch. Retention is the bucket's lifecycle rule, which the
// modules set.
//
// The bucket's own driver is linked in by the program, so that a function's binary carries its
// cloud's SDK only: _ "gocloud.dev/blob/s3blob" (s3://), azureblob, gcsblob, fileblob, memblob.
//
// Imports (docs/architecture.md): only adapters/provenance.
package blobsink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/ssfkit/ssfkit/adapters/provenance"
)

func init() {
	for _, scheme := range []string{"s3", "azblob", "gs", "file", "mem"} {
		provenance.Register(scheme, open)
	}
}

var gocloudDriver = map[string]string{"s3": "s3blob", "azblob": "azureblob", "gs": "gcsblob", "file": "fileblob", "mem": "memblob"}

// Sink writes batches as Parquet objects.
type Sink struct {
	bucket *blob.Bucket
	prefix string
}

func open(ctx context.Context, u *provenance.URL) (provenance.Sink, error) {
	prefix := strings.Trim(u.Param("prefix", ""), "/")
	raw := u.WithoutParams("prefix")
	b, err := blob.OpenBucket(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w (a program that writes to %s:// buckets links its driver: _ \"gocloud.dev/blob/%s\")", err, u.Scheme, gocloudDriver[u.Scheme])
	}
	if err := checkBucket(ctx, b); err != nil {
		b.Close()
		return nil, err
	}
	return &Sink{bucket: b, prefix: prefix}, nil
}

// checkBucket fails the start on a bucket that does not exist or does not answer. The modules'
// identities may only put objects in their own partitions (no listing, no reading), so a refusal
// to list is the answer of a bucket that exists: the first export proves the write.
func checkBucket(ctx context.Context, b *blob.Bucket) error {
	ok, err := b.IsAccessible(ctx)
	switch {
	case err == nil && !ok:
		return errors.New("no such bucket (the environment module creates it)")
	case gcerrors.Code(err) == gcerrors.PermissionDenied:
		return nil
	case err != nil:
		return fmt.Errorf("bucket does not answer: %w", err)
	}
	return nil
}

// InvocationRow is a row of the invocations table.
type InvocationRow struct {
	SSF          string  `parquet:"ssf"`
	InstanceID   string  `parquet:"instance_id"`
	Incarnation  string  `parquet:"incarnation"`
	CallerSSF    *string `parquet:"caller_ssf,optional"`
	CallerID     *string `parquet:"caller_id,optional"`
	CallerStep   *int64  `parquet:"caller_step,optional"`
	Async        bool    `parquet:"async"`
	Holder       *string `parquet:"holder,optional"`
	WorkflowID   *string `parquet:"workflow_id,optional"`
	RunID        *string `parquet:"run_id,optional"`
	TxID         *string `parquet:"tx_id,optional"`
	EndsTx       *string `parquet:"ends_tx,optional"`
	Builtin      *string `parquet:"builtin,optional"`
	TraceID      *string `parquet:"trace_id,optional"`
	StartedNS    int64   `parquet:"started_ns"`
	FinishedNS   int64   `parquet:"finished_ns"`
	Outcome      string  `parquet:"outcome"`
	Error        *string `parquet:"error,optional"`
	InputDigest  string  `parquet:"input_digest"`
	OutputDigest *string `parquet:"output_digest,optional"`
	Input        *string `parquet:"input,optional"`
	Output       *string `parquet:"output,optional"`
}

// DataEventRow is a row of the data_events table.
type DataEventRow struct {
	SSF         string  `parquet:"ssf"`
	InstanceID  string  `parquet:"instance_id"`
	Incarnation string  `parquet:"incarnation"`
	Step        int64   `parquet:"step"`
	Kind        string  `parquet:"kind"`
	ItemTable   string  `parquet:"item_table"`
	ItemKey     string  `parquet:"item_key"`
	Version     *int64  `parquet:"version,optional"`
	Applied     *bool   `parquet:"applied,optional"`
	Shadow      bool    `parquet:"shadow"`
	AtNS        int64   `parquet:"at_ns"`
	Digest      *string `parquet:"digest,optional"`
	Value       *string `parquet:"value,optional"`
}

// CallRow is a row of the calls table.
type CallRow struct {
	SSF         string `parquet:"ssf"`
	InstanceID  string `parquet:"instance_id"`
	Incarnation string `parquet:"incarnation"`
	Step        int64  `parquet:"step"`
	Callee      string `parquet:"callee"`
	CalleeID    string `parquet:"callee_id"`
	AtNS        int64  `parquet:"at_ns"`
}

// Export writes the batch's three objects (none for an empty batch). The partition is the
// first record's SSF and finish date, so the same batch always lands in the same place.
func (s *Sink) Export(ctx context.Context, batch string, recs []provenance.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if batch == "" || strings.ContainsAny(batch, "/\\") {
		return fmt.Errorf("provenance: batch name %q cannot name an object", batch)
	}
	first := recs[0].Invocation
	part := "ssf=" + url.PathEscape(first.SSF) + "/dt=" + time.Unix(0, first.Finished).UTC().Format("2006-01-02")
	var inv []InvocationRow
	var events []DataEventRow
	var calls []CallRow
	for _, r := range recs {
		v := r.Invocation
		row := InvocationRow{SSF: v.SSF, InstanceID: v.ID, Incarnation: v.Incarnation, CallerSSF: opt(v.CallerSSF), CallerID: opt(v.CallerID),
			Async: v.Async, Holder: opt(v.Holder), TxID: opt(v.TxID), EndsTx: opt(v.EndsTx), Builtin: opt(v.Builtin), TraceID: opt(v.TraceID),
			StartedNS: v.Started, FinishedNS: v.Finished, Outcome: v.Outcome, Error: opt(v.Error), InputDigest: v.InputDigest,
			OutputDigest: opt(v.OutputDigest), Input: opt(string(v.Input)), Output: opt(string(v.Output))}
		if v.CallerSSF != "" {
			step := int64(v.CallerStep)
			row.CallerStep = &step
		}
		row.WorkflowID, row.RunID = workflowOf(v.Holder)
		inv = append(inv, row)
		for _, e := range r.Events {
			ev := DataEventRow{SSF: v.SSF, InstanceID: v.ID, Incarnation: v.Incarnation, Step: int64(e.Step), Kind: e.Kind,
				ItemTable: e.Table, ItemKey: e.Key, Version: e.Version, Shadow: e.Shadow, AtNS: e.At, Digest: opt(e.Digest), Value: opt(string(e.Value))}
			if e.HasOutcome() {
				applied := e.Applied
				ev.Applied = &applied
			}
			events = append(events, ev)
		}
		for _, c := range r.Calls {
			calls = append(calls, CallRow{SSF: v.SSF, InstanceID: v.ID, Incarnation: v.Incarnation, Step: int64(c.Step), Callee: c.Callee, CalleeID: c.CalleeID, AtNS: c.At})
		}
	}
	if err := put(ctx, s, "invocations", part, batch, inv); err != nil {
		return err
	}
	if err := put(ctx, s, "data_events", part, batch, events); err != nil {
		return err
	}
	return put(ctx, s, "calls", part, batch, calls)
}

// put writes rows as one Parquet object (an empty one too: a batch's tables stay together).
func put[T any](ctx context.Context, s *Sink, table, part, batch string, rows []T) error {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		return fmt.Errorf("provenance: encoding %s: %w", table, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("provenance: encoding %s: %w", table, err)
	}
	key := path.Join(s.prefix, table, part, batch+".parquet")
	if err := s.bucket.WriteAll(ctx, key, buf.Bytes(), &blob.WriterOptions{ContentType: "application/vnd.apache.parquet"}); err != nil {
		return fmt.Errorf("provenance: writing %s: %w", key, err)
	}
	return nil
}

// workflowOf reads a Temporal holder's workflow and run ({"ns":..., "wf":..., "run":...}).
func workflowOf(holder string) (wf, run *string) {
	if !strings.HasPrefix(holder, "{") {
		return nil, nil
	}
	var h struct {
		WF  string `json:"wf"`
		Run string `json:"run"`
	}
	if json.Unmarshal([]byte(holder), &h) != nil {
		return nil, nil
	}
	return opt(h.WF), opt(h.Run)
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Close closes the bucket.
func (s *Sink) Close() error { return s.bucket.Close() }
