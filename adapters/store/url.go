package store

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// URL is a parsed store URL such as sqlite:///var/lib/app.db?table=orders or mem://demo.
type URL struct {
	Scheme string
	// Host is the authority part (mem://NAME, dynamodb://TABLE); empty for sqlite:///path.
	Host string
	// Path is the path part, with its leading slash.
	Path  string
	Query url.Values
	raw   *url.URL
}

// ParseURL parses a store URL. It rejects what no driver could use: a missing scheme, spaces,
// or a malformed query, with an error that names the problem.
func ParseURL(raw string) (*URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("store: empty URL (want e.g. sqlite:///path/to/file.db or mem://name)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store: malformed URL %q: %v", raw, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store: URL %q has no scheme (want e.g. sqlite:///path/to/file.db or mem://name)", raw)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("store: URL %q must be written scheme://..., e.g. %s:///path", raw, u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("store: malformed query in URL %q: %v", raw, err)
	}
	return &URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: u.Path, Query: q, raw: u}, nil
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

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ValidIdentifier reports whether s can name a table on every backend (letters, digits,
// underscore; starting with a letter or underscore; at most 63 characters).
func ValidIdentifier(s string) bool { return identifier.MatchString(s) }

// TablePlaceholder marks where tools that make their own tables (ssfkit conformance, ssfkit
// bench) put each table's name in a store URL, e.g. dynamodb://{table}?create=true.
const TablePlaceholder = "{table}"
