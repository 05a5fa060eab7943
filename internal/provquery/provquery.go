// Package provquery answers `ssfkit trace`'s questions with SQL over the provenance tables
// (docs/provenance.md): a request's tree, an item's history, an item's state at a time, and
// taint (everything downstream of a write or an instance).
//
// Imports (docs/architecture.md): adapters/provenance/sqlitesink, to open the database.
package provquery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance/sqlitesink"
)

// ErrNotFound: the database has no record of what was asked (not exported yet: the garbage
// collector exports an instance T after it finished; or never captured).
var ErrNotFound = errors.New("provenance: not found")

// Open opens a provenance database for queries.
func Open(ctx context.Context, path string) (*sql.DB, error) {
	return sqlitesink.OpenDB(ctx, path, true)
}

// Instance names one instance of one SSF.
type Instance struct {
	SSF string `json:"ssf,omitempty"`
	ID  string `json:"id,omitempty"`
}

func (i Instance) String() string { return i.SSF + "/" + i.ID }

// Node is one instance in a request's tree, with its steps and the instances it called.
type Node struct {
	Instance
	Incarnation     string          `json:"incarnation,omitempty"`
	Outcome         string          `json:"outcome,omitempty"`
	Error           string          `json:"error,omitempty"`
	TxID            string          `json:"tx_id,omitempty"`
	EndsTx          string          `json:"ends_tx,omitempty"`
	Builtin         string          `json:"builtin,omitempty"`
	WorkflowID      string          `json:"workflow_id,omitempty"`
	RunID           string          `json:"run_id,omitempty"`
	TraceID         string          `json:"trace_id,omitempty"`
	Started         time.Time       `json:"started,omitempty"`
	Finished        time.Time       `json:"finished,omitempty"`
	InputDigest     string          `json:"input_digest,omitempty"`
	OutputDigest    string          `json:"output_digest,omitempty"`
	Steps           []Step          `json:"steps,omitempty"`
	Children        []*Node         `json:"children,omitempty"`
	CallerSSF       string          `json:"caller_ssf,omitempty"`
	Caller          string          `json:"caller,omitempty"`
	CallerStep      int             `json:"caller_step,omitempty"`
	MissingChildren []string        `json:"missing_children,omitempty"` // callee ids with no record (not exported yet)
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
}

// Step is one data event or call of an instance.
type Step struct {
	Step     int             `json:"step"`
	Kind     string          `json:"kind,omitempty"` // read, write, call, sql, sql-query
	Table    string          `json:"table,omitempty"`
	Key      string          `json:"key,omitempty"`
	Version  *int64          `json:"version,omitempty"`
	Applied  bool            `json:"applied"`
	Shadow   bool            `json:"shadow,omitempty"`
	Digest   string          `json:"digest,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	Callee   string          `json:"callee,omitempty"`
	CalleeID string          `json:"callee_id,omitempty"`
	At       time.Time       `json:"at,omitempty"`
}

// Tree returns the tree of the request whose first instance is id (of any SSF), following
// calls to the instances they made.
func Tree(ctx context.Context, db *sql.DB, id string) (*Node, error) {
	n, err := node(ctx, db, id, map[string]bool{})
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("%w: no instance %q in the provenance database", ErrNotFound, id)
	}
	return n, nil
}

func node(ctx context.Context, db *sql.DB, id string, seen map[string]bool) (*Node, error) {
	if seen[id] {
		return nil, nil
	}
	seen[id] = true
	n := &Node{}
	var caller, callerSSF, txID, endsTx, builtin, wf, run, trace, errText, outDigest sql.NullString
	var callerStep sql.NullInt64
	var started, finished int64
	var input, output []byte
	err := db.QueryRowContext(ctx, `SELECT ssf, instance_id, incarnation, outcome, error, tx_id, ends_tx, builtin,
		workflow_id, run_id, trace_id, started_ns, finished_ns, input_digest, output_digest, caller_ssf, caller_id, caller_step, input, output
		FROM invocations WHERE instance_id = ? ORDER BY started_ns DESC LIMIT 1`, id).Scan(
		&n.SSF, &n.ID, &n.Incarnation, &n.Outcome, &errText, &txID, &endsTx, &builtin, &wf, &run, &trace,
		&started, &finished, &n.InputDigest, &outDigest, &callerSSF, &caller, &callerStep, &input, &output)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n.Error, n.TxID, n.EndsTx, n.Builtin = errText.String, txID.String, endsTx.String, builtin.String
	n.WorkflowID, n.RunID, n.TraceID, n.OutputDigest = wf.String, run.String, trace.String, outDigest.String
	n.CallerSSF, n.Caller, n.CallerStep = callerSSF.String, caller.String, int(callerStep.Int64)
	n.Started, n.Finished, n.Input, n.Output = time.Unix(0, started), time.Unix(0, finished), input, output
	rows, err := db.QueryContext(ctx, `SELECT step, kind, item_table, item_key, version, applied, shadow, at_ns, digest, value, '', ''
		FROM data_events WHERE ssf = ? AND instance_id = ? AND incarnation = ?
		UNION ALL SELECT step, 'call', '', '', NULL, NULL, 0, at_ns, NULL, NULL, callee, callee_id
		FROM calls WHERE ssf = ? AND instance_id = ? AND incarnation = ? ORDER BY step`,
		n.SSF, n.ID, n.Incarnation, n.SSF, n.ID, n.Incarnation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s Step
		var version, applied sql.NullInt64
		var digest sql.NullString
		var at int64
		var value []byte
		if err := rows.Scan(&s.Step, &s.Kind, &s.Table, &s.Key, &version, &applied, &s.Shadow, &at, &digest, &value, &s.Callee, &s.CalleeID); err != nil {
			return nil, err
		}
		s.Value = value
		if version.Valid {
			v := version.Int64
			s.Version = &v
		}
		s.Applied, s.Digest, s.At = applied.Int64 == 1, digest.String, time.Unix(0, at)
		n.Steps = append(n.Steps, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for _, s := range n.Steps {
		if s.Kind != "call" {
			continue
		}
		c, err := node(ctx, db, s.CalleeID, seen)
		if err != nil {
			return nil, err
		}
		if c == nil {
			n.MissingChildren = append(n.MissingChildren, s.Callee+"/"+s.CalleeID)
			continue
		}
		n.Children = append(n.Children, c)
	}
	return n, nil
}

// Version is one value of an item: the write that made it and the reads that saw it.
type Version struct {
	Version int64           `json:"version"`
	Writer  Instance        `json:"writer,omitempty"` // empty for version 0 (no write) or a write not exported yet
	Step    int             `json:"step"`
	At      time.Time       `json:"at,omitempty"`
	Digest  string          `json:"digest,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Readers []Access        `json:"readers,omitempty"`
}

// Access is one step of one instance on an item.
type Access struct {
	Instance
	Step    int       `json:"step"`
	At      time.Time `json:"at,omitempty"`
	Version *int64    `json:"version,omitempty"`
	Applied bool      `json:"applied"`
	Write   bool      `json:"write,omitempty"`
}

// History returns every version of an item of an SSF, oldest first, with who wrote and who
// read it, and the writes whose condition failed (as readers of the version they saw).
func History(ctx context.Context, db *sql.DB, ssf, table, key string) ([]Version, error) {
	rows, err := db.QueryContext(ctx, `SELECT instance_id, step, kind, version, applied, at_ns, digest, value
		FROM data_events WHERE ssf = ? AND item_table = ? AND item_key = ? AND NOT shadow ORDER BY version, at_ns`, ssf, table, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byVersion := map[int64]*Version{}
	for rows.Next() {
		var a Access
		var kind string
		var version, applied sql.NullInt64
		var digest sql.NullString
		var at int64
		var value []byte
		if err := rows.Scan(&a.ID, &a.Step, &kind, &version, &applied, &at, &digest, &value); err != nil {
			return nil, err
		}
		a.SSF, a.At, a.Write, a.Applied = ssf, time.Unix(0, at), kind == "write", applied.Int64 == 1
		if !version.Valid {
			continue
		}
		v := byVersion[version.Int64]
		if v == nil {
			v = &Version{Version: version.Int64}
			byVersion[version.Int64] = v
		}
		if a.Write && a.Applied {
			v.Writer, v.Step, v.At, v.Digest, v.Value = a.Instance, a.Step, a.At, digest.String, value
			continue
		}
		ver := version.Int64
		a.Version = &ver
		v.Readers = append(v.Readers, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(byVersion) == 0 {
		return nil, fmt.Errorf("%w: no access to %s/%s of SSF %s in the provenance database", ErrNotFound, table, key, ssf)
	}
	out := make([]Version, 0, len(byVersion))
	for _, v := range byVersion {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// StateAt returns the version of an item that was current at t: the last write that applied at
// or before t (by the writing machine's clock). ok is false when no exported write precedes t.
func StateAt(ctx context.Context, db *sql.DB, ssf, table, key string, t time.Time) (v Version, ok bool, err error) {
	var digest sql.NullString
	var at int64
	var value []byte
	err = db.QueryRowContext(ctx, `SELECT version, instance_id, step, at_ns, digest, value FROM data_events
		WHERE ssf = ? AND item_table = ? AND item_key = ? AND kind = 'write' AND applied = 1 AND NOT shadow AND at_ns <= ?
		ORDER BY version DESC LIMIT 1`, ssf, table, key, t.UnixNano()).Scan(&v.Version, &v.Writer.ID, &v.Step, &at, &digest, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	v.Writer.SSF, v.At, v.Digest, v.Value = ssf, time.Unix(0, at), digest.String, value
	return v, true, nil
}

// Item names one version of an item of an SSF.
type Item struct {
	SSF     string `json:"ssf,omitempty"`
	Table   string `json:"table,omitempty"`
	Key     string `json:"key,omitempty"`
	Version int64  `json:"version"`
}

func (i Item) String() string { return fmt.Sprintf("%s:%s/%s@%d", i.SSF, i.Table, i.Key, i.Version) }

// Tainted is what lies downstream of a seed: the instances that read a tainted version, were
// called by or returned to a tainted instance, or committed a tainted transaction, and the
// versions those instances wrote.
type Tainted struct {
	Instances []Instance `json:"instances,omitempty"`
	Items     []Item     `json:"items,omitempty"`
}

// TaintFromInstance returns everything downstream of an instance (by id, of any SSF).
func TaintFromInstance(ctx context.Context, db *sql.DB, id string) (Tainted, error) {
	var ssf string
	err := db.QueryRowContext(ctx, `SELECT ssf FROM invocations WHERE instance_id = ? LIMIT 1`, id).Scan(&ssf)
	if errors.Is(err, sql.ErrNoRows) {
		return Tainted{}, fmt.Errorf("%w: no instance %q in the provenance database", ErrNotFound, id)
	}
	if err != nil {
		return Tainted{}, err
	}
	return taint(ctx, db, []Instance{{SSF: ssf, ID: id}}, nil)
}

// TaintFromWrite returns everything downstream of one version of an item.
func TaintFromWrite(ctx context.Context, db *sql.DB, seed Item) (Tainted, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM data_events WHERE ssf = ? AND item_table = ? AND item_key = ?
		AND version = ? AND kind = 'write' AND applied = 1`, seed.SSF, seed.Table, seed.Key, seed.Version).Scan(&n); err != nil {
		return Tainted{}, err
	}
	if n == 0 {
		return Tainted{}, fmt.Errorf("%w: no write of %s in the provenance database", ErrNotFound, seed)
	}
	return taint(ctx, db, nil, []Item{seed})
}

// taint walks the provenance graph breadth first from the seeds, to a fixed point.
func taint(ctx context.Context, db *sql.DB, instances []Instance, items []Item) (Tainted, error) {
	seenI, seenV := map[Instance]bool{}, map[Item]bool{}
	var out Tainted
	for len(instances) > 0 || len(items) > 0 {
		var nextI []Instance
		var nextV []Item
		for _, in := range instances {
			if seenI[in] {
				continue
			}
			seenI[in] = true
			out.Instances = append(out.Instances, in)
			writes, err := query(ctx, db, `SELECT ssf, item_table, item_key, version, '' FROM data_events
				WHERE ssf = ? AND instance_id = ? AND kind = 'write' AND applied = 1 AND NOT shadow`, in.SSF, in.ID)
			if err != nil {
				return out, err
			}
			for _, w := range writes {
				nextV = append(nextV, Item{SSF: w[0], Table: w[1], Key: w[2], Version: atoi(w[3])})
			}
			// Data flows both ways along a call (input down, output up), and from a
			// transaction's participants to the instance that commits it.
			related, err := query(ctx, db, `SELECT c.callee, c.callee_id, '', '', '' FROM calls c WHERE c.ssf = ? AND c.instance_id = ?
				UNION SELECT caller_ssf, caller_id, '', '', '' FROM invocations WHERE ssf = ? AND instance_id = ? AND caller_id IS NOT NULL
				UNION SELECT e.ssf, e.instance_id, '', '', '' FROM invocations p JOIN invocations e ON e.ends_tx = p.tx_id
				WHERE p.ssf = ? AND p.instance_id = ? AND p.tx_id IS NOT NULL`, in.SSF, in.ID, in.SSF, in.ID, in.SSF, in.ID)
			if err != nil {
				return out, err
			}
			for _, r := range related {
				nextI = append(nextI, Instance{SSF: r[0], ID: r[1]})
			}
		}
		for _, v := range items {
			if seenV[v] {
				continue
			}
			seenV[v] = true
			out.Items = append(out.Items, v)
			readers, err := query(ctx, db, `SELECT ssf, instance_id, '', '', '' FROM data_events WHERE ssf = ? AND item_table = ?
				AND item_key = ? AND version = ? AND NOT (kind = 'write' AND applied = 1)`, v.SSF, v.Table, v.Key, v.Version)
			if err != nil {
				return out, err
			}
			for _, r := range readers {
				nextI = append(nextI, Instance{SSF: r[0], ID: r[1]})
			}
		}
		instances, items = nextI, nextV
	}
	sort.Slice(out.Instances, func(i, j int) bool { return out.Instances[i].String() < out.Instances[j].String() })
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].String() < out.Items[j].String() })
	return out, nil
}

// query returns rows of five text columns.
func query(ctx context.Context, db *sql.DB, q string, args ...any) ([][5]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][5]string
	for rows.Next() {
		var r [5]sql.NullString
		if err := rows.Scan(&r[0], &r[1], &r[2], &r[3], &r[4]); err != nil {
			return nil, err
		}
		out = append(out, [5]string{r[0].String, r[1].String, r[2].String, r[3].String, r[4].String})
	}
	return out, rows.Err()
}

func atoi(s string) int64 {
	var n int64
	fmt.Sscan(strings.TrimSpace(s), &n)
	return n
}

// Check verifies the provenance database's own invariants, for every item of every SSF: the
// versions that writes made are 1, 2, ... without a gap or a repeat (exactly one write made
// each), and every read saw version 0 or one some write made. An export that lost or repeated
// a record, or a runtime that numbered a version twice, breaks them.
func Check(ctx context.Context, db *sql.DB) error {
	rows, err := query(ctx, db, `SELECT ssf, item_table, item_key, group_concat(version, ','), count(*) FROM
		(SELECT * FROM data_events WHERE kind = 'write' AND applied = 1 AND NOT shadow ORDER BY version)
		GROUP BY ssf, item_table, item_key`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		for i, v := range strings.Split(r[3], ",") {
			if atoi(v) != int64(i+1) {
				return fmt.Errorf("provenance: %s:%s/%s: the writes made versions %s, not 1..%s", r[0], r[1], r[2], r[3], r[4])
			}
		}
	}
	orphans, err := query(ctx, db, `SELECT r.ssf, r.item_table, r.item_key, r.version, r.instance_id FROM data_events r
		WHERE NOT r.shadow AND r.version > 0 AND NOT (r.kind = 'write' AND r.applied = 1) AND NOT EXISTS
		(SELECT 1 FROM data_events w WHERE w.ssf = r.ssf AND w.item_table = r.item_table AND w.item_key = r.item_key
		 AND w.version = r.version AND w.kind = 'write' AND w.applied = 1 AND NOT w.shadow)`)
	if err != nil {
		return err
	}
	if len(orphans) > 0 {
		o := orphans[0]
		return fmt.Errorf("provenance: %d accesses saw a version no write made, e.g. %s:%s/%s@%s by instance %s", len(orphans), o[0], o[1], o[2], o[3], o[4])
	}
	return nil
}
