package travel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Raw runs the travel SSFs' code without ssfkit, the way Beldi's baseline runs its applications
// without Beldi: each SSF still owns its table, but a read is one store Get, a write one
// unconditional Update of a plain row (partition = table, sort key = key), and a call a plain
// function call with JSON-encoded input and output. Nothing is logged: a crash or a retried
// request can apply a step twice or stop halfway. There are no conditional writes or
// transactions, so reservations run only in ModeUnsafe, and double-book under concurrency.
type Raw struct {
	tables   map[string]*store.Table
	handlers map[string]handler
}

// rawValue is the attribute holding a raw row's JSON value.
const rawValue = "v"

// NewRaw returns the application on tables, one per SSF name.
func NewRaw(tables map[string]*store.Table) (*Raw, error) {
	r := &Raw{tables: tables, handlers: handlers()}
	for name := range r.handlers {
		if tables[name] == nil {
			return nil, fmt.Errorf("travel: raw: no table for SSF %s", name)
		}
	}
	return r, nil
}

// Invoke runs the SSF name on input, as a top-level request with id requestID (the id of the
// reservation it makes, if any).
func (r *Raw) Invoke(ctx context.Context, name, requestID string, input any) (json.RawMessage, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("travel: raw: input for %s: %w", name, err)
	}
	return r.call(ctx, name, requestID, in)
}

func (r *Raw) call(ctx context.Context, name, id string, input json.RawMessage) (json.RawMessage, error) {
	h, ok := r.handlers[name]
	if !ok {
		return nil, fmt.Errorf("travel: raw: no SSF named %q", name)
	}
	out, err := h(&rawEnv{raw: r, ctx: ctx, id: id, table: r.tables[name]}, input)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Snapshot reads the current state of every SSF, in the form Check takes.
func (r *Raw) Snapshot(ctx context.Context) (Items, error) {
	out := Items{}
	for name, tbls := range tables {
		out[name] = map[string][]byte{}
		for _, t := range tbls {
			rows, err := r.tables[name].Scan(ctx, t, store.ScanOptions{})
			if err != nil {
				return nil, fmt.Errorf("travel: raw: items of %s: %w", name, err)
			}
			for _, row := range rows {
				v, _ := row.Attrs[rawValue].([]byte)
				out[name][t+"/"+row.Key.Sort] = v
			}
		}
	}
	return out, nil
}

// rawEnv is an SSF execution under Raw.
type rawEnv struct {
	raw   *Raw
	ctx   context.Context
	id    string
	table *store.Table
}

func (e *rawEnv) InstanceID() string { return e.id }

func (e *rawEnv) ReadInto(table, key string, dst any) (bool, error) {
	a, found, err := e.table.Get(e.ctx, store.Key{Partition: table, Sort: key})
	if err != nil || !found {
		return false, err
	}
	v, _ := a[rawValue].([]byte)
	if err := json.Unmarshal(v, dst); err != nil {
		return true, fmt.Errorf("%s/%s holds %s, which does not decode into %T: %v", table, key, v, dst, err)
	}
	return true, nil
}

func (e *rawEnv) Write(table, key string, value any) error {
	v, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("value for %s/%s: %w", table, key, err)
	}
	_, err = e.table.Update(e.ctx, store.Key{Partition: table, Sort: key}, store.Always(), store.Update{store.SetAttr(store.Attr(rawValue), v)})
	return err
}

// SyncInvoke calls the callee's code directly; the callee gets a fresh id, as under ssfkit.
func (e *rawEnv) SyncInvoke(callee string, input any) (json.RawMessage, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("input for %s: %w", callee, err)
	}
	return e.raw.call(e.ctx, callee, uuid.NewString(), in)
}
