// Package driverurl parses the URLs that choose a driver (store.Open, queue.Open): scheme,
// authority, path and query parameters, with the checks every driver needs and errors that
// name the problem without leaking secrets.
package driverurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is the sentinel of every URL error (store.ErrInvalid and queue.ErrInvalid are it).
var ErrInvalid = errors.New("invalid argument")

// URL is a parsed driver URL such as sqlite:///var/lib/app.db?table=orders or sqs://jobs.
type URL struct {
	Scheme string
	// Host is the authority part without credentials (mem://NAME, dynamodb://TABLE); empty for
	// sqlite:///path.
	Host string
	// Path is the path part, with its leading slash.
	Path string
	// User holds credentials written into the URL (user:secret@...), or nil; Redacted hides
	// the secret.
	User  *url.Userinfo
	Query url.Values
	raw   *url.URL
}

// Parse parses raw, a URL of a kind of driver ("store", "queue"; examples shows valid ones in
// errors). It rejects what no driver could use: an empty URL, a missing scheme, an opaque
// form, a malformed query.
func Parse(raw, kind, examples string) (*URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%w: %s: empty URL (want e.g. %s)", ErrInvalid, kind, examples)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: malformed URL: %v", ErrInvalid, kind, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %s: URL %q has no scheme (want e.g. %s)", ErrInvalid, kind, u.Redacted(), examples)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: %s: URL %q must be written %s://... (want e.g. %s)", ErrInvalid, kind, u.Redacted(), u.Scheme, examples)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: malformed query in URL %q: %v", ErrInvalid, kind, u.Redacted(), err)
	}
	return &URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: u.Path, User: u.User, Query: q, raw: u}, nil
}

// Redacted returns the URL with any password replaced, safe for error messages and logs.
func (u *URL) Redacted() string { return u.raw.Redacted() }

// Param returns the query parameter name, or def when absent.
func (u *URL) Param(name, def string) string {
	if v := u.Query.Get(name); v != "" {
		return v
	}
	return def
}

// BoolParam returns the boolean parameter name (true, false, 1, 0; absent is false).
func (u *URL) BoolParam(name string) (bool, error) {
	if !u.Query.Has(name) {
		return false, nil
	}
	s := u.Query.Get(name)
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q must be true or false", ErrInvalid, name, s)
	}
	return b, nil
}

// IntParam returns the integer parameter name, which must lie in [min, max], or def when
// absent.
func (u *URL) IntParam(name string, def, min, max int) (int, error) {
	if !u.Query.Has(name) {
		return def, nil
	}
	s := u.Query.Get(name)
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("%w: %s=%q must be an integer from %d to %d", ErrInvalid, name, s, min, max)
	}
	return n, nil
}

// WithoutParams returns the URL as written, minus the named query parameters: what a driver
// hands to a native client after taking its own parameters out.
func (u *URL) WithoutParams(names ...string) string {
	c := *u.raw
	q := c.Query()
	for _, n := range names {
		q.Del(n)
	}
	c.RawQuery = q.Encode()
	return c.String()
}

// CheckParams rejects query parameters the driver does not understand, so a typo fails loudly
// instead of being ignored.
func (u *URL) CheckParams(known ...string) error {
	for name := range u.Query {
		ok := false
		for _, k := range known {
			ok = ok || name == k
		}
		if !ok {
			return fmt.Errorf("%w: unknown parameter %q in %s URL (known: %s)", ErrInvalid, name, u.Scheme, strings.Join(known, ", "))
		}
	}
	return nil
}

// Registry maps URL schemes to the openers of one kind of driver (D: store.Driver,
// queue.Driver): what store.Register/Open and queue.Register/Open are made of.
type Registry[D any] struct {
	kind, examples, importHint string
	openers                    map[string]func(context.Context, *URL) (D, error)
}

// NewRegistry returns an empty registry for drivers of kind; examples are valid URLs for
// errors, importHint a driver package to suggest when none is linked in.
func NewRegistry[D any](kind, examples, importHint string) *Registry[D] {
	return &Registry[D]{kind: kind, examples: examples, importHint: importHint, openers: map[string]func(context.Context, *URL) (D, error){}}
}

// Register makes a driver available under a URL scheme. It panics on a duplicate, like
// database/sql.Register, because two drivers claiming one scheme is a programming error.
func (r *Registry[D]) Register(scheme string, open func(context.Context, *URL) (D, error)) {
	if _, dup := r.openers[scheme]; dup {
		panic(r.kind + ": Register called twice for scheme " + scheme)
	}
	r.openers[scheme] = open
}

// Schemes lists the registered URL schemes.
func (r *Registry[D]) Schemes() []string {
	out := make([]string, 0, len(r.openers))
	for s := range r.openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Parse parses a URL of this registry's kind.
func (r *Registry[D]) Parse(raw string) (*URL, error) { return Parse(raw, r.kind, r.examples) }

// Open parses rawURL and opens it with the driver registered for its scheme.
func (r *Registry[D]) Open(ctx context.Context, rawURL string) (D, *URL, error) {
	var zero D
	u, err := r.Parse(rawURL)
	if err != nil {
		return zero, nil, err
	}
	open, ok := r.openers[u.Scheme]
	if !ok {
		hint := "no drivers are linked in; import one, e.g. _ \"" + r.importHint + "\""
		if known := r.Schemes(); len(known) > 0 {
			hint = "known schemes: " + strings.Join(known, ", ")
		}
		return zero, nil, fmt.Errorf("%s: unknown URL scheme %q in %q (%s)", r.kind, u.Scheme, u.Redacted(), hint)
	}
	d, err := open(ctx, u)
	if err != nil {
		return zero, nil, fmt.Errorf("%s: open %s: %w", r.kind, u.Redacted(), err)
	}
	return d, u, nil
}
