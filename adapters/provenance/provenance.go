// Package provenance is the portable API of ssfkit's provenance (Apiary, §5): the records the
// runtime exports for every finished instance (one Invocation with its DataEvents and Calls)
// and the Sink interface that keeps them, chosen by URL like stores and queues
// (sqlite:///path/to/provenance.db). docs/provenance.md describes the model and its SQL schema.
//
// Imports (docs/architecture.md): nothing of the module but internal/driverurl. Sinks live in
// subpackages and import only this package.
package provenance

import (
	"context"
	"errors"

	"github.com/ssfkit/ssfkit/internal/driverurl"
)

// Capture says how much an SSF records for provenance.
type Capture string

// Capture levels.
const (
	// CaptureOff records and exports nothing.
	CaptureOff Capture = "off"
	// CaptureMetadata records every invocation and data access with digests (SHA-256) of
	// inputs, outputs and written values, not the values themselves.
	CaptureMetadata Capture = "metadata"
	// CaptureFull also keeps the inputs, outputs and written values.
	CaptureFull Capture = "full"
)

// ParseCapture parses a capture level; "" is off.
func ParseCapture(s string) (Capture, error) {
	switch c := Capture(s); c {
	case "", CaptureOff:
		return CaptureOff, nil
	case CaptureMetadata, CaptureFull:
		return c, nil
	}
	return "", errors.New("provenance: capture " + `"` + s + `"` + " is not one of off, metadata, full")
}

// Instance identifies one instance of an SSF: an id reused after its key expired starts a new
// incarnation (the intent's creation time, base 36).
type Instance struct {
	SSF         string `json:"ssf"`
	ID          string `json:"instance_id"`
	Incarnation string `json:"incarnation"`
}

// Invocation is one instance's FunctionInvocations record.
type Invocation struct {
	Instance
	// Caller is the invoking instance and its step, when another SSF invoked this one.
	CallerSSF  string `json:"caller_ssf,omitempty"`
	CallerID   string `json:"caller_id,omitempty"`
	CallerStep int    `json:"caller_step,omitempty"`
	Async      bool   `json:"async,omitempty"`
	// Holder is what may re-send the request, such as the Temporal workflow execution
	// ("temporal:NAMESPACE/WORKFLOW/RUN") whose activity the instance is.
	Holder string `json:"holder,omitempty"`
	// TxID is the transaction the instance ran in; EndsTx the one it committed or aborted (a
	// transaction end run by the runtime, Builtin "tx-end").
	TxID    string `json:"tx_id,omitempty"`
	EndsTx  string `json:"ends_tx,omitempty"`
	Builtin string `json:"builtin,omitempty"`
	// TraceID links the instance to its OpenTelemetry trace (the invoking step's traceparent).
	TraceID string `json:"trace_id,omitempty"`
	// Started is when the intent was created, Finished when the execution that decided the
	// result recorded it (unix nanoseconds; clocks of different machines).
	Started  int64 `json:"started"`
	Finished int64 `json:"finished"`
	// Outcome is "ok", "error" (an application error or a failure recorded by a collector) or
	// "tx_aborted".
	Outcome      string `json:"outcome"`
	Error        string `json:"error,omitempty"`
	InputDigest  string `json:"input_digest"`
	OutputDigest string `json:"output_digest,omitempty"`
	// Input and Output are kept with CaptureFull only.
	Input  []byte `json:"input,omitempty"`
	Output []byte `json:"output,omitempty"`
}

// Event kinds.
const (
	EventRead  = "read"
	EventWrite = "write"
	// A SQL step (ssf.RunSQL, and ssf.QuerySQL's read-only one): no item; Applied says whether
	// it committed, Digest (and Value) are of the result it logged.
	EventSQL      = "sql"
	EventSQLQuery = "sql-query"
)

// HasOutcome reports whether the event has an outcome (Applied): a write or a SQL step.
func (e DataEvent) HasOutcome() bool { return e.Kind != EventRead }

// DataEvent is one read or write of an item, or one SQL step, by one step of an instance.
type DataEvent struct {
	Step  int    `json:"step"`
	Kind  string `json:"kind"`
	Table string `json:"table"`
	Key   string `json:"key"`
	// Version identifies the item's value: the number of writes that applied to the item before
	// it and with it (0: never written). A read links to the write of the same SSF, table, key
	// and version. Nil where the value was a transaction's own uncommitted one (Shadow).
	Version *int64 `json:"version,omitempty"`
	// Applied is a write's outcome (false: its condition did not hold, and Version is the
	// version the condition saw).
	Applied bool `json:"applied"`
	// Shadow marks a read or write of the transaction's own copy of the item, made visible (as
	// a write of the transaction end's instance) when the transaction commits.
	Shadow bool  `json:"shadow,omitempty"`
	At     int64 `json:"at"`
	// Digest (SHA-256 of the JSON value, base64) and, with CaptureFull, Value, for writes.
	Digest string `json:"digest,omitempty"`
	Value  []byte `json:"value,omitempty"`
}

// Call is one invocation step: the callee's own Invocation names the caller back.
type Call struct {
	Step     int    `json:"step"`
	Callee   string `json:"callee"`
	CalleeID string `json:"callee_id"`
	At       int64  `json:"at"`
}

// Record is everything one finished instance did.
type Record struct {
	Invocation Invocation  `json:"invocation"`
	Events     []DataEvent `json:"events,omitempty"`
	Calls      []Call      `json:"calls,omitempty"`
}

// Sink keeps records. The runtime exports records in named batches, at least once: a batch is
// exported again (after a crash before the runtime noted it exported, or by a concurrent
// collector) under the same name with the same records, and every instance belongs to one
// batch. A sink keeps exactly one copy of each record: a database by keying rows by instance,
// an object store by naming a batch's object after the batch. Export returns nil only once the
// records are durable; an empty batch is valid.
type Sink interface {
	Export(ctx context.Context, batch string, recs []Record) error
	Close() error
}

// URL is a parsed sink URL.
type URL = driverurl.URL

// Opener opens a sink from a parsed URL.
type Opener func(ctx context.Context, u *URL) (Sink, error)

var registry = driverurl.NewRegistry[Sink]("provenance sink", "sqlite:///path/to/provenance.db or s3://BUCKET?prefix=provenance",
	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink\" (SQLite) or _ \"github.com/ssfkit/ssfkit/adapters/provenance/blobsink")

// Register makes a sink available under a URL scheme; it panics on a duplicate.
func Register(scheme string, open Opener) { registry.Register(scheme, open) }

// Schemes lists the registered URL schemes.
func Schemes() []string { return registry.Schemes() }

// Open opens the sink named by rawURL.
func Open(ctx context.Context, rawURL string) (Sink, error) {
	s, _, err := registry.Open(ctx, rawURL)
	return s, err
}
