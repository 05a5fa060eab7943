package main

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"go.temporal.io/sdk/worker"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// example is an example application the CLI hosts (`ssfkit dev --app`, `ssfkit demo`).
type example struct {
	name  string
	title string // what the banners call it
	// handlers are its SSFs; requests from clients go to entry.
	handlers func() map[string]ssf.Handler
	entry    string
	// load sends the requests that load the application's data, if it has any; they must be
	// idempotent (fixed request ids), since dev runs them at every start.
	load func(ctx context.Context, h *local.Host) error
	// try returns example requests to a server at base, for dev's banner.
	try func(base string) string
	// workflows registers the example's Temporal workflows, if it has any.
	workflows func(worker.WorkflowRegistry)
}

// examples are the example applications, by name.
var examples = map[string]example{bankExample.name: bankExample, travelExample.name: travelExample}

// defaultExample is the one dev and demo run unless told otherwise.
const defaultExample = "bank"

// exampleNames lists the examples' names, for messages.
func exampleNames() string {
	names := slices.Sorted(maps.Keys(examples))
	return strings.Join(names, " or ")
}

// hostedApp is an example hosted in-process, each SSF on its own table.
type hostedApp struct {
	host     *local.Host
	runtimes map[string]*ssf.Runtime
	tables   []*store.Table
}

// openApp registers each of the handlers' SSFs on a new host, with the settings in base and
// the table at tableURL(name).
func openApp(ctx context.Context, handlers map[string]ssf.Handler, tableURL func(ssfName string) (string, error), base ssf.Config) (*hostedApp, error) {
	return openTunedApp(ctx, handlers, tableURL, base, nil)
}

// openTunedApp is openApp with tune, if not nil, adjusting each SSF's configuration (the
// timings a config file sets per SSF).
func openTunedApp(ctx context.Context, handlers map[string]ssf.Handler, tableURL func(ssfName string) (string, error), base ssf.Config, tune func(ssfName string, cfg *ssf.Config)) (*hostedApp, error) {
	app := &hostedApp{host: local.NewHost(), runtimes: map[string]*ssf.Runtime{}}
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
		rt, err := app.host.Add(cfg)
		if err != nil {
			app.Close()
			return nil, err
		}
		app.runtimes[name] = rt
	}
	return app, nil
}

// Close stops the host's spawned executions, then closes the tables. Collectors must have
// stopped before.
func (a *hostedApp) Close() {
	a.host.Close()
	for _, t := range a.tables {
		t.Close()
	}
}

// sqliteURL is the store URL of the SQLite file at the absolute path.
func sqliteURL(path string) string { return (&url.URL{Scheme: "sqlite", Path: path}).String() }

// tablePerSSF returns a function giving each SSF its own table in the store at base: a table
// named after the SSF in a SQLite file, or a separate in-memory table.
func tablePerSSF(base string) (func(ssfName string) (string, error), error) {
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
