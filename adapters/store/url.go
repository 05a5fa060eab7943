package store

import (
	"regexp"

	"github.com/ssfkit/ssfkit/internal/driverurl"
)

// URL is a parsed store URL such as sqlite:///var/lib/app.db?table=orders or mem://demo.
type URL = driverurl.URL

// ParseURL parses a store URL. It rejects what no driver could use: a missing scheme, spaces,
// or a malformed query, with an error that names the problem.
func ParseURL(raw string) (*URL, error) { return registry.Parse(raw) }

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ValidIdentifier reports whether s can name a table on every backend (letters, digits,
// underscore; starting with a letter or underscore; at most 63 characters).
func ValidIdentifier(s string) bool { return identifier.MatchString(s) }

// TablePlaceholder marks where tools that make their own tables (ssfkit conformance, ssfkit
// bench) put each table's name in a store URL, e.g. dynamodb://{table}?create=true.
const TablePlaceholder = "{table}"

// MinRowBytes is the smallest max_row_bytes a driver accepts: the runtime's own attributes must fit.
const MinRowBytes = 256

// PortableMaxRowBytes is the drivers' default row size limit: DynamoDB's item limit, the
// smallest among the clouds' stores, so a value that fits one backend fits every one.
const PortableMaxRowBytes = 400 * 1024

// MaxRowBytes returns u's max_row_bytes parameter (a driver's size limit lowered, e.g. to the
// smallest among the backends an application runs on), or def when absent.
func MaxRowBytes(u *URL, def int) (int, error) {
	return u.IntParam("max_row_bytes", def, MinRowBytes, 1<<30)
}
