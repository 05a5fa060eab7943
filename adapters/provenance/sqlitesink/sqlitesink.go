// Package sqlitesink keeps provenance records in an SQLite database file (the embedded
// analytical store of `ssfkit dev` and `ssfkit trace`), in the tables docs/provenance.md
// documents: invocations, data_events and calls.
//
// URL: sqlite:///path/to/provenance.db[?retention=720h]. retention, if set, deletes
// invocations (with their events and calls) that finished longer ago than that, as exports
// arrive: how long provenance is kept is the environment's choice, independent of the
// runtime's bound T.
//
// Exactly-once: every row's primary key is the instance (SSF, id, incarnation) and the step, and
// one export is one transaction of INSERT OR IGNOREs, so an export repeated after a crash adds
// nothing, and a crash during one leaves none of it.
//
// Imports (docs/architecture.md): only adapters/provenance.
package sqlitesink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/ssfkit/ssfkit/adapters/provenance"
)

func init() {
	provenance.Register("sqlite", func(ctx context.Context, u *provenance.URL) (provenance.Sink, error) {
		if err := u.CheckParams("retention"); err != nil {
			return nil, err
		}
		var retention time.Duration
		if r := u.Param("retention", ""); r != "" {
			d, err := time.ParseDuration(r)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("provenance sink: retention=%q is not a positive duration (e.g. 720h)", r)
			}
			retention = d
		}
		return Open(ctx, u.Path, retention)
	})
}

// Schema is the provenance tables' SQL (SQLite dialect), as docs/provenance.md documents it.
const Schema = `
CREATE TABLE IF NOT EXISTS invocations (
  ssf           TEXT NOT NULL,
  instance_id   TEXT NOT NULL,
  incarnation   TEXT NOT NULL,
  caller_ssf    TEXT,
  caller_id     TEXT,
  caller_step   INTEGER,
  async         INTEGER NOT NULL,
  holder        TEXT,
  workflow_id   TEXT GENERATED ALWAYS AS (CASE WHEN json_valid(holder) THEN json_extract(holder, '$.wf') END) VIRTUAL,
  run_id        TEXT GENERATED ALWAYS AS (CASE WHEN json_valid(holder) THEN json_extract(holder, '$.run') END) VIRTUAL,
  tx_id         TEXT,
  ends_tx       TEXT,
  builtin       TEXT,
  trace_id      TEXT,
  started_ns    INTEGER NOT NULL,
  finished_ns   INTEGER NOT NULL,
  outcome       TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'tx_aborted')),
  error         TEXT,
  input_digest  TEXT NOT NULL,
  output_digest TEXT,
  input         BLOB,
  output        BLOB,
  exported_ns   INTEGER NOT NULL,
  PRIMARY KEY (ssf, instance_id, incarnation)
);
CREATE INDEX IF NOT EXISTS invocations_caller ON invocations (caller_id);
CREATE INDEX IF NOT EXISTS invocations_tx ON invocations (tx_id);
CREATE INDEX IF NOT EXISTS invocations_ends_tx ON invocations (ends_tx);
CREATE INDEX IF NOT EXISTS invocations_finished ON invocations (finished_ns);
CREATE INDEX IF NOT EXISTS invocations_trace ON invocations (trace_id);
CREATE TABLE IF NOT EXISTS data_events (
  ssf         TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  incarnation TEXT NOT NULL,
  step        INTEGER NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('read', 'write', 'sql', 'sql-query')),
  item_table  TEXT NOT NULL,
  item_key    TEXT NOT NULL,
  version     INTEGER,
  applied     INTEGER,
  shadow      INTEGER NOT NULL,
  at_ns       INTEGER NOT NULL,
  digest      TEXT,
  value       BLOB,
  PRIMARY KEY (ssf, instance_id, incarnation, step)
);
CREATE INDEX IF NOT EXISTS data_events_item ON data_events (ssf, item_table, item_key, version);
CREATE TABLE IF NOT EXISTS calls (
  ssf         TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  incarnation TEXT NOT NULL,
  step        INTEGER NOT NULL,
  callee      TEXT NOT NULL,
  callee_id   TEXT NOT NULL,
  at_ns       INTEGER NOT NULL,
  PRIMARY KEY (ssf, instance_id, incarnation, step)
);
CREATE INDEX IF NOT EXISTS calls_callee ON calls (callee_id);
`

// Sink is an SQLite provenance sink.
type Sink struct {
	db        *sql.DB
	retention time.Duration
}

// Open opens (creating if needed) the provenance database at path.
func Open(ctx context.Context, path string, retention time.Duration) (*Sink, error) {
	db, err := OpenDB(ctx, path, false)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("provenance sink %s: creating tables: %w", path, err)
	}
	if err := migrateEventKinds(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("provenance sink %s: %w", path, err)
	}
	return &Sink{db: db, retention: retention}, nil
}

// migrateEventKinds rebuilds a data_events table made before SQL steps, whose CHECK admits only
// reads and writes (SQLite cannot alter a constraint), keeping its rows.
func migrateEventKinds(ctx context.Context, db *sql.DB) error {
	var ddl string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'data_events'`).Scan(&ddl); err != nil {
		return fmt.Errorf("reading the data_events table's definition: %w", err)
	}
	if !strings.Contains(ddl, "kind IN ('read', 'write')") {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for _, stmt := range []string{
		`DROP INDEX IF EXISTS data_events_item`,
		`ALTER TABLE data_events RENAME TO data_events_before_sql_steps`,
		Schema, // creates data_events (and its index) anew; the other tables exist
		`INSERT INTO data_events SELECT * FROM data_events_before_sql_steps`,
		`DROP TABLE data_events_before_sql_steps`,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("admitting SQL steps' events in data_events: %w", err)
		}
	}
	return tx.Commit()
}

// OpenDB opens the provenance database at path for SQL (readOnly for queries: it must exist).
func OpenDB(ctx context.Context, path string, readOnly bool) (*sql.DB, error) {
	if path == "" || path == "/" {
		return nil, errors.New("provenance: sqlite URL names no file (want sqlite:///path/to/provenance.db)")
	}
	path = filepath.Clean(path)
	if readOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("provenance database %s: %w (it is created by the first export: run the garbage collector of an SSF that captures provenance)", path, err)
		}
	} else if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("provenance database %s: directory: %w", path, err)
	}
	q := url.Values{"_txlock": {"immediate"}, "_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"}}
	if readOnly {
		q.Set("mode", "ro")
	}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("provenance database %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("provenance database %s: %w", path, err)
	}
	return db, nil
}

// Export stores recs in one transaction; records already stored are left as they are (the
// batch's name is not needed: rows are keyed by instance).
func (s *Sink) Export(ctx context.Context, _ string, recs []provenance.Record) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	now := time.Now().UnixNano()
	for _, r := range recs {
		v := r.Invocation
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO invocations (ssf, instance_id, incarnation,
			caller_ssf, caller_id, caller_step, async, holder, tx_id, ends_tx, builtin, trace_id, started_ns, finished_ns,
			outcome, error, input_digest, output_digest, input, output, exported_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.SSF, v.ID, v.Incarnation, null(v.CallerSSF), null(v.CallerID), nullInt(v.CallerSSF != "", int64(v.CallerStep)),
			v.Async, null(v.Holder), null(v.TxID), null(v.EndsTx), null(v.Builtin), null(v.TraceID), v.Started, v.Finished,
			v.Outcome, null(v.Error), v.InputDigest, null(v.OutputDigest), v.Input, v.Output, now); err != nil {
			return fmt.Errorf("provenance: storing invocation %s/%s: %w", v.SSF, v.ID, err)
		}
		for _, e := range r.Events {
			var version any
			if e.Version != nil {
				version = *e.Version
			}
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO data_events (ssf, instance_id, incarnation, step, kind,
				item_table, item_key, version, applied, shadow, at_ns, digest, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				v.SSF, v.ID, v.Incarnation, e.Step, e.Kind, e.Table, e.Key, version,
				nullInt(e.HasOutcome(), boolInt(e.Applied)), e.Shadow, e.At, null(e.Digest), e.Value); err != nil {
				return fmt.Errorf("provenance: storing step %d of %s/%s: %w", e.Step, v.SSF, v.ID, err)
			}
		}
		for _, c := range r.Calls {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO calls (ssf, instance_id, incarnation, step, callee, callee_id, at_ns)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, v.SSF, v.ID, v.Incarnation, c.Step, c.Callee, c.CalleeID, c.At); err != nil {
				return fmt.Errorf("provenance: storing call at step %d of %s/%s: %w", c.Step, v.SSF, v.ID, err)
			}
		}
	}
	if s.retention > 0 {
		if err := prune(ctx, tx, now-s.retention.Nanoseconds()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// prune deletes the instances that finished before cutoff, with their events and calls.
func prune(ctx context.Context, tx *sql.Tx, cutoff int64) error {
	for _, table := range []string{"data_events", "calls"} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE (ssf, instance_id, incarnation) IN
			(SELECT ssf, instance_id, incarnation FROM invocations WHERE finished_ns < ?)`, cutoff); err != nil {
			return fmt.Errorf("provenance: retention: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM invocations WHERE finished_ns < ?`, cutoff); err != nil {
		return fmt.Errorf("provenance: retention: %w", err)
	}
	return nil
}

// Close closes the database.
func (s *Sink) Close() error { return s.db.Close() }

func null(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(valid bool, v int64) any {
	if !valid {
		return nil
	}
	return v
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
