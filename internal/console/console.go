// Package console is `ssfkit dev`'s web console, served on loopback beside the SSFs' API: the
// SSFs with live counts, their instances (pending, done, failed) with step timelines, a
// request's trace, an item's DAAL and history, the shared logs' colors with their tails, and the
// coordination service's tree. Pages are rendered on the server from the runtimes' own
// inspection calls and the provenance database; the overview refreshes its counts from a JSON
// endpoint. It reads, and never changes, anything.
package console

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/provenance"
	"github.com/ssfkit/ssfkit/internal/provquery"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

// Config is what the console shows.
type Config struct {
	Title    string
	Runtimes map[string]*ssf.Runtime
	// ProvenanceDB is the SQLite file the garbage collectors export to ("": capture is off).
	ProvenanceDB string
	// Coord is the coordination service, if dev runs one.
	Coord *coord.Service
	// TemporalUI is the Temporal Web UI's address, if dev serves it.
	TemporalUI string
}

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"since":   func(t time.Time) string { return time.Since(t).Round(time.Millisecond).String() },
	"clock":   func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"offset":  func(from, t time.Time) string { return "+" + t.Sub(from).Round(time.Microsecond).String() },
	"percent": percent,
	"deref":   func(v *int64) int64 { return *v },
	"escape":  pathEscape,
	"json":    func(b []byte) string { return string(b) },
}).ParseFS(templateFS, "templates/*.html"))

// Handler serves the console under Prefix.
func Handler(cfg Config) http.Handler {
	c := &console{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", c.overview)
	mux.HandleFunc("GET "+Prefix+"api/counts", c.countsJSON)
	mux.HandleFunc("GET "+Prefix+"ssf/{name}", c.ssfPage)
	mux.HandleFunc("GET "+Prefix+"ssf/{name}/instances/{id}", c.instancePage)
	mux.HandleFunc("GET "+Prefix+"ssf/{name}/items/{table}/{key...}", c.itemPage)
	mux.HandleFunc("GET "+Prefix+"trace/{ssf}/{id}", c.tracePage)
	mux.HandleFunc("GET "+Prefix+"logs", c.logsPage)
	mux.HandleFunc("GET "+Prefix+"coord", c.coordPage)
	return mux
}

type console struct{ cfg Config }

// page is what every template gets.
type page struct {
	Title, Heading string
	Cfg            Config
	Data           any
	Notes          []string
}

func (c *console) render(w http.ResponseWriter, r *http.Request, name, heading string, data any, notes ...string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; img-src 'self' data:")
	if err := pages.ExecuteTemplate(w, name, page{Title: c.cfg.Title, Heading: heading, Cfg: c.cfg, Data: data, Notes: notes}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (c *console) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	if errors.Is(err, errNotFound) || errors.Is(err, provquery.ErrNotFound) {
		status = http.StatusNotFound
	}
	http.Error(w, err.Error(), status)
}

var errNotFound = errors.New("not found")

func (c *console) runtime(name string) (*ssf.Runtime, error) {
	rt, ok := c.cfg.Runtimes[name]
	if !ok {
		return nil, fmt.Errorf("%w: no SSF %q here (%s)", errNotFound, name, strings.Join(slices.Sorted(maps.Keys(c.cfg.Runtimes)), ", "))
	}
	return rt, nil
}

// counts are one SSF's live numbers.
type counts struct {
	SSF       string    `json:"ssf"`
	Stats     ssf.Stats `json:"stats"`
	Pending   int       `json:"pending"`
	Items     int       `json:"items"`
	LastError string    `json:"error,omitempty"`
}

func (c *console) counts(ctx context.Context) []counts {
	var out []counts
	for _, name := range slices.Sorted(maps.Keys(c.cfg.Runtimes)) {
		rt := c.cfg.Runtimes[name]
		n := counts{SSF: name, Stats: rt.Stats()}
		var err error
		if n.Pending, err = rt.Pending(ctx); err == nil {
			var items map[string][]byte
			items, err = rt.Items(ctx)
			n.Items = len(items)
		}
		if err != nil {
			n.LastError = err.Error()
		}
		out = append(out, n)
	}
	return out
}

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "overview.html", "SSFs", c.counts(r.Context()))
}

func (c *console) countsJSON(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(c.counts(r.Context()))
}

// instanceRow is one instance in an SSF's list.
type instanceRow struct {
	ID, State, Error string
	Started          time.Time
	Launches         int
}

type item struct {
	Table, Key, Value string
}

func (c *console) ssfPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rt, err := c.runtime(name)
	if err != nil {
		c.fail(w, err)
		return
	}
	list, err := rt.ListInstances(r.Context(), 100)
	if err != nil {
		c.fail(w, err)
		return
	}
	var rows []instanceRow
	for _, in := range list {
		rows = append(rows, instanceRow{ID: in.ID, State: state(in.Status), Error: errorOf(in.Status), Started: in.Status.Started, Launches: in.Status.Launches})
	}
	values, err := rt.Items(r.Context())
	if err != nil {
		c.fail(w, err)
		return
	}
	var items []item
	for _, k := range slices.Sorted(maps.Keys(values)) {
		table, key, _ := strings.Cut(k, "/")
		items = append(items, item{Table: table, Key: key, Value: preview(values[k])})
	}
	c.render(w, r, "ssf.html", "SSF "+name, struct {
		SSF       string
		Instances []instanceRow
		Items     []item
	}{name, rows, items}, "Instances are listed while the garbage collector keeps them (T after they finish); older ones are in the provenance database.")
}

func state(st ssf.IntentStatus) string {
	switch {
	case !st.Done:
		return "pending"
	case errors.Is(st.Result.Err(), ssf.ErrTxAborted):
		return "aborted"
	case strings.Contains(st.Result.Error, ssf.ErrGaveUp.Error()) || strings.Contains(st.Result.Error, ssf.ErrAbandoned.Error()):
		return "dead-lettered"
	case st.Result.Error != "":
		return "failed"
	}
	return "done"
}

func errorOf(st ssf.IntentStatus) string {
	if st.Result.Error != "" {
		return st.Result.Error
	}
	return st.LastError
}

// instanceView is an instance's status and its step timeline.
type instanceView struct {
	SSF, ID, State, Error string
	Launches              int
	Node                  *provquery.Node // nil when neither the logs nor the database have its steps
	Live                  bool            // the steps come from the instance's logs, not the database
}

func (c *console) instancePage(w http.ResponseWriter, r *http.Request) {
	name, id := r.PathValue("name"), r.PathValue("id")
	rt, err := c.runtime(name)
	if err != nil {
		c.fail(w, err)
		return
	}
	st, err := rt.Intent(r.Context(), id)
	if err != nil {
		c.fail(w, err)
		return
	}
	v := instanceView{SSF: name, ID: id, State: state(st), Error: errorOf(st), Launches: st.Launches}
	if st.Collected {
		v.State = "collected"
	} else if !st.Exists {
		v.State = "unknown"
	}
	v.Node, v.Live, err = c.node(r.Context(), name, id, false)
	if err != nil {
		c.fail(w, err)
		return
	}
	if v.Node == nil && v.State == "unknown" {
		c.fail(w, fmt.Errorf("%w: SSF %s has no instance %q, and the provenance database has no record of it", errNotFound, name, id))
		return
	}
	c.render(w, r, "instance.html", "Instance "+id, v)
}

// node returns an instance's steps, from its logs while they are kept, else from the
// provenance database; with deep, the instances it called too.
func (c *console) node(ctx context.Context, ssfName, id string, deep bool) (*provquery.Node, bool, error) {
	if rt, ok := c.cfg.Runtimes[ssfName]; ok {
		rec, found, err := rt.Steps(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if found {
			n := nodeOf(rec)
			if deep {
				for _, call := range rec.Calls {
					child, _, err := c.node(ctx, call.Callee, call.CalleeID, true)
					if err != nil {
						return nil, false, err
					}
					if child == nil {
						n.MissingChildren = append(n.MissingChildren, call.Callee+"/"+call.CalleeID)
						continue
					}
					n.Children = append(n.Children, child)
				}
			}
			return n, true, nil
		}
	}
	db, err := c.db(ctx)
	if db == nil || err != nil {
		return nil, false, err
	}
	defer db.Close()
	n, err := provquery.Tree(ctx, db, id)
	if errors.Is(err, provquery.ErrNotFound) {
		return nil, false, nil
	}
	if err == nil && !deep {
		n.Children = nil
	}
	return n, false, err
}

// db opens the provenance database, or returns nil when there is none yet.
func (c *console) db(ctx context.Context) (*sql.DB, error) {
	if c.cfg.ProvenanceDB == "" {
		return nil, nil
	}
	db, err := provquery.Open(ctx, c.cfg.ProvenanceDB)
	if err != nil {
		return nil, nil // not created yet: nothing exported
	}
	return db, nil
}

// nodeOf turns a provenance record (from live logs) into the tree's node.
func nodeOf(rec provenance.Record) *provquery.Node {
	v := rec.Invocation
	n := &provquery.Node{Instance: provquery.Instance{SSF: v.SSF, ID: v.ID}, Incarnation: v.Incarnation, Outcome: v.Outcome, Error: v.Error,
		TxID: v.TxID, EndsTx: v.EndsTx, Builtin: v.Builtin, TraceID: v.TraceID, Started: time.Unix(0, v.Started), Finished: time.Unix(0, v.Finished),
		InputDigest: v.InputDigest, OutputDigest: v.OutputDigest, CallerSSF: v.CallerSSF, Caller: v.CallerID, CallerStep: v.CallerStep}
	if v.Outcome == "pending" {
		n.Finished = time.Time{}
	}
	for _, e := range rec.Events {
		n.Steps = append(n.Steps, provquery.Step{Step: e.Step, Kind: e.Kind, Table: e.Table, Key: e.Key, Version: e.Version,
			Applied: e.Applied, Shadow: e.Shadow, Digest: e.Digest, Value: e.Value, At: time.Unix(0, e.At)})
	}
	for _, call := range rec.Calls {
		n.Steps = append(n.Steps, provquery.Step{Step: call.Step, Kind: "call", Callee: call.Callee, CalleeID: call.CalleeID, At: time.Unix(0, call.At)})
	}
	sort.Slice(n.Steps, func(i, j int) bool { return n.Steps[i].Step < n.Steps[j].Step })
	return n
}

func (c *console) tracePage(w http.ResponseWriter, r *http.Request) {
	ssfName, id := r.PathValue("ssf"), r.PathValue("id")
	n, live, err := c.node(r.Context(), ssfName, id, true)
	if err != nil {
		c.fail(w, err)
		return
	}
	if n == nil {
		c.fail(w, fmt.Errorf("%w: no instance %s of SSF %s in the logs or the provenance database", errNotFound, id, ssfName))
		return
	}
	c.render(w, r, "trace.html", "Request "+id, struct {
		Root *provquery.Node
		Live bool
	}{n, live})
}

// itemView is an item's DAAL and history.
type itemView struct {
	SSF, Table, Key, Value string
	Shape                  ssf.DAALShape
	Lock                   string
	History                []provquery.Version
	HistoryNote            string
}

func (c *console) itemPage(w http.ResponseWriter, r *http.Request) {
	name, table, key := r.PathValue("name"), r.PathValue("table"), r.PathValue("key")
	rt, err := c.runtime(name)
	if err != nil {
		c.fail(w, err)
		return
	}
	ctx := r.Context()
	values, err := rt.Items(ctx)
	if err != nil {
		c.fail(w, err)
		return
	}
	v := itemView{SSF: name, Table: table, Key: key, Value: preview(values[table+"/"+key])}
	if v.Shape, err = rt.DAAL(ctx, table, key); err != nil {
		c.fail(w, err)
		return
	}
	locks, err := rt.Locks(ctx)
	if err != nil {
		c.fail(w, err)
		return
	}
	v.Lock = locks[table+"/"+key]
	switch db, err := c.db(ctx); {
	case err != nil:
		c.fail(w, err)
		return
	case db == nil:
		v.HistoryNote = "No provenance exported yet: an item's history appears T after its writers finish."
	default:
		defer db.Close()
		v.History, err = provquery.History(ctx, db, name, table, key)
		if errors.Is(err, provquery.ErrNotFound) {
			v.HistoryNote, err = "No exported access to this item yet: its history appears T after its writers finish.", nil
		}
		if err != nil {
			c.fail(w, err)
			return
		}
	}
	c.render(w, r, "item.html", "Item "+table+"/"+key, v)
}

// colorView is one color of a shared log with its tail and latest records.
type colorView struct {
	Color   string
	Tail    uint64
	Records []string
	Err     string
}

type tenantView struct {
	SSF, Tenant string
	Colors      []colorView
}

func (c *console) logsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var out []tenantView
	for _, name := range slices.Sorted(maps.Keys(c.cfg.Runtimes)) {
		tbl := c.cfg.Runtimes[name].Config().Store
		tenants, err := sharedlog.Tenants(ctx, tbl)
		if err != nil {
			c.fail(w, err)
			return
		}
		for _, tenant := range tenants {
			l, err := sharedlog.New(tbl, tenant, sharedlog.Options{})
			if err != nil {
				c.fail(w, err)
				return
			}
			tv := tenantView{SSF: name, Tenant: tenant}
			colors, err := l.Colors(ctx)
			if err != nil {
				c.fail(w, err)
				return
			}
			for _, color := range colors {
				cv := colorView{Color: color}
				if cv.Tail, err = l.CheckTail(ctx, color); err != nil {
					cv.Err = err.Error()
				}
				for sn := cv.Tail; sn > 0 && len(cv.Records) < 5; {
					rec, found, err := l.ReadPrev(ctx, color, sn)
					if err != nil || !found {
						break
					}
					cv.Records = append(cv.Records, fmt.Sprintf("%d: %s", rec.SN, preview(rec.Data)))
					sn = rec.SN - 1
				}
				tv.Colors = append(tv.Colors, cv)
			}
			out = append(out, tv)
		}
	}
	c.render(w, r, "logs.html", "Shared logs", out, "The newest records of each color, at most five; trimmed records are gone.")
}

// znodeView is one node of the coordination tree.
type znodeView struct {
	Path, Data string
	Stat       coord.Stat
	Depth      int
	Hidden     bool // the console's anonymous session may not read it
}

func (c *console) coordPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Coord == nil {
		c.render(w, r, "coord.html", "Coordination", []znodeView(nil), "The coordination service is off (ssfkit dev --zk-addr off).")
		return
	}
	var nodes []znodeView
	c.cfg.Coord.View(func(v coord.View) {
		var walk func(p string, depth int)
		walk = func(p string, depth int) {
			if len(nodes) >= 500 {
				return
			}
			data, stat, err := v.Get(coord.Caller{}, p, false)
			n := znodeView{Path: p, Data: preview(data), Stat: stat, Depth: depth, Hidden: err != nil}
			nodes = append(nodes, n)
			children, _, err := v.Children(coord.Caller{}, p, false)
			if err != nil {
				return
			}
			sort.Strings(children)
			for _, child := range children {
				walk(path.Join(p, child), depth+1)
			}
		}
		walk("/", 0)
	})
	c.render(w, r, "coord.html", "Coordination", nodes, "Nodes as the world may read them (ACLs apply); at most 500.")
}

// preview shortens a value for a table cell.
func preview(b []byte) string {
	const max = 160
	if b == nil {
		return ""
	}
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

func percent(part, whole time.Duration) string {
	if whole <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f", 100*float64(min(part, whole))/float64(whole))
}

func pathEscape(s string) string {
	parts := strings.Split(s, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
