// Package apps holds the example applications the CLI hosts (`ssfkit dev`, `worker`, `build`,
// `up`, `demo`): one App record each, how to host them in-process, and the demo harness that
// runs them under injected crashes and checks their invariants. cmd/ssfkit only parses flags
// and wires these together.
//
// It may import the portable APIs, the local host, the examples, internal/faults, the embedded
// Temporal server and the embedded store drivers the demo runs on; no cloud driver (the command
// links those in) and no test kit.
package apps

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// App is an example application: its SSFs and workflows, what dev shows and loads, its demo
// workload, and a main package per cloud host (examples/NAME/DIR, DIR from deploy.Clouds).
type App struct {
	Name  string
	Title string // what the banners call it
	// Handlers are its SSFs; requests from clients go to Entry.
	Handlers func() map[string]ssf.Handler
	Entry    string
	// Load sends the requests that load the application's data, if it has any; they must be
	// idempotent (fixed request ids), since dev runs them at every start.
	Load func(ctx context.Context, h *local.Host) error
	// Try returns example requests to a server at base, for dev's banner.
	Try func(base string) string
	// Workflows registers the app's Temporal workflows, if it has any.
	Workflows func(worker.WorkflowRegistry)
	// demo returns a fresh demo workload of the app (demo.go).
	demo func() workload
}

// All are the example applications, the default first.
var All = []App{bankApp, travelApp}

// Default is the app dev and demo run unless told otherwise.
const Default = "bank"

// Lookup returns the app called name.
func Lookup(name string) (App, bool) {
	i := slices.IndexFunc(All, func(a App) bool { return a.Name == name })
	if i < 0 {
		return App{}, false
	}
	return All[i], true
}

// Names are the apps' names, the default first.
func Names() []string {
	var names []string
	for _, a := range All {
		names = append(names, a.Name)
	}
	return names
}

// MainPackage is the app's main package for the cloud host whose examples live in hostDir.
func (a App) MainPackage(hostDir string) string {
	return "github.com/ssfkit/ssfkit/examples/" + a.Name + "/" + hostDir
}

// Hosted is an app hosted in-process, each SSF on its own table.
type Hosted struct {
	Host     *local.Host
	Runtimes map[string]*ssf.Runtime
	tables   []*store.Table
}

// Open registers each of the handlers' SSFs on a new host, with the settings in base and the
// table at tableURL(name).
func Open(ctx context.Context, handlers map[string]ssf.Handler, tableURL func(ssfName string) (string, error), base ssf.Config) (*Hosted, error) {
	return OpenTuned(ctx, handlers, tableURL, base, nil)
}

// OpenTuned is Open with tune, if not nil, adjusting each SSF's configuration (the
// timings a config file sets per SSF).
func OpenTuned(ctx context.Context, handlers map[string]ssf.Handler, tableURL func(ssfName string) (string, error), base ssf.Config, tune func(ssfName string, cfg *ssf.Config)) (*Hosted, error) {
	app := &Hosted{Host: local.NewHost(), Runtimes: map[string]*ssf.Runtime{}}
	for _, name := range slices.Sorted(maps.Keys(handlers)) {
		u, err := tableURL(name)
		if err != nil {
			app.Close()
			return nil, err
		}
		tbl, err := store.Open(ctx, u)
		if err != nil {
			app.Close()
			return nil, fmt.Errorf("SSF %s: %w", name, err)
		}
		app.tables = append(app.tables, tbl)
		cfg := base
		cfg.Name, cfg.Store, cfg.Handler = name, tbl, handlers[name]
		if tune != nil {
			tune(name, &cfg)
		}
		rt, err := app.Host.Add(cfg)
		if err != nil {
			app.Close()
			return nil, err
		}
		app.Runtimes[name] = rt
	}
	return app, nil
}

// Close stops the host's spawned executions, then closes the tables. Collectors must have
// stopped before.
func (a *Hosted) Close() {
	a.Host.Close()
	for _, t := range a.tables {
		t.Close()
	}
}

// SQLiteURL is the store URL of the SQLite file at the absolute path.
func SQLiteURL(path string) string { return (&url.URL{Scheme: "sqlite", Path: path}).String() }

// TablePerSSF returns a function giving each SSF its own table in the store at base: a table
// named after the SSF in a SQLite file, or a separate in-memory table.
func TablePerSSF(base string) (func(ssfName string) (string, error), error) {
	u, err := store.ParseURL(base)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "sqlite":
		if u.Query.Has("table") {
			return nil, fmt.Errorf("store URL %s names a table; leave it out, each SSF gets a table named after it", u.Redacted())
		}
		return func(name string) (string, error) {
			q := url.Values{}
			for k, v := range u.Query {
				q[k] = v
			}
			q.Set("table", name)
			return (&url.URL{Scheme: u.Scheme, Path: u.Path, RawQuery: q.Encode()}).String(), nil
		}, nil
	case "mem":
		return func(name string) (string, error) {
			if u.Host == "" {
				return base, nil // mem:// opens a fresh private table each time
			}
			return (&url.URL{Scheme: u.Scheme, Host: u.Host + "_" + name, RawQuery: u.Query.Encode()}).String(), nil
		}, nil
	}
	return nil, fmt.Errorf("store URL %s: ssfkit runs the example on the embedded stores only (sqlite:///abs/path.db or mem://NAME)", u.Redacted())
}

// The timing of SSFs hosted by dev and the worker (and the Temporal demo): long enough for a
// person stepping through requests, short enough to see the collectors work.
const (
	DevLifetime      = 30 * time.Second
	DevGCBound       = time.Minute
	DevRelaunchDelay = DevLifetime
)

// DevConfig is the runtime configuration of SSFs hosted by dev and the worker.
func DevConfig() ssf.Config {
	return ssf.Config{Lifetime: DevLifetime, GCBound: DevGCBound, RelaunchDelay: DevRelaunchDelay}
}
