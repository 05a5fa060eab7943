package queue

import "github.com/ssfkit/ssfkit/internal/driverurl"

// URL is a parsed queue URL such as sqs://orders?region=eu-west-1 or mem://jobs.
type URL = driverurl.URL

// ParseURL parses a queue URL. It rejects what no driver could use: a missing scheme, spaces,
// or a malformed query, with an error that names the problem.
func ParseURL(raw string) (*URL, error) { return registry.Parse(raw) }

// MaxMessageBytes returns u's max_message_bytes parameter, or def when absent. It may lower a
// backend's native limit, max (e.g. to the smallest limit among the clouds an application runs
// on), never raise it.
func MaxMessageBytes(u *URL, def, max int) (int, error) {
	return u.IntParam("max_message_bytes", def, 1, max)
}
