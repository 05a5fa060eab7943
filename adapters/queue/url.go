package queue

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// URL is a parsed queue URL such as sqs://orders?region=eu-west-1 or mem://jobs.
type URL struct {
	Scheme string
	// Host is the authority part without credentials (mem://NAME, sqs://NAME).
	Host string
	// Path is the path part, with its leading slash.
	Path string
	// User holds credentials written into the URL (user:secret@...), or nil. Redacted hides
	// the secret.
	User  *url.Userinfo
	Query url.Values
	raw   *url.URL
}

// ParseURL parses a queue URL. It rejects what no driver could use: a missing scheme, spaces,
// or a malformed query, with an error that names the problem.
func ParseURL(raw string) (*URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("queue: empty URL (want e.g. mem://jobs or sqs://QUEUE?region=REGION)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("queue: malformed URL %q: %v", raw, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("queue: URL %q has no scheme (want e.g. mem://jobs or sqs://QUEUE?region=REGION)", raw)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("queue: URL %q must be written scheme://..., e.g. %s://NAME", u.Redacted(), u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("queue: malformed query in URL %q: %v", u.Redacted(), err)
	}
	return &URL{Scheme: strings.ToLower(u.Scheme), Host: u.Host, Path: u.Path, User: u.User, Query: q, raw: u}, nil
}

// Redacted returns the URL with any secret replaced, safe for error messages and logs.
func (u *URL) Redacted() string { return u.raw.Redacted() }

// Param returns the query parameter name, or def when absent.
func (u *URL) Param(name, def string) string {
	if v := u.Query.Get(name); v != "" {
		return v
	}
	return def
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

// BoolParam returns the boolean parameter name (true, false, 1, 0; absent is false).
func (u *URL) BoolParam(name string) (bool, error) {
	s := u.Query.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q must be true or false", ErrInvalid, name, s)
	}
	return b, nil
}

// MaxMessageBytes returns the max_message_bytes parameter, or def when absent. It may lower a
// backend's native limit, max (e.g. to the smallest limit among the clouds an application runs
// on), never raise it.
func (u *URL) MaxMessageBytes(def, max int) (int, error) {
	s := u.Query.Get("max_message_bytes")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%w: max_message_bytes=%q must be an integer from 1 to %d, the backend's limit", ErrInvalid, s, max)
	}
	return n, nil
}
