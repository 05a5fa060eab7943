package testtables

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/aztablestore"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// AzureTables returns a fresh table on the Azurite emulator (started once per binary).
func AzureTables(t suite.T, ssf string) *store.Table {
	return Open(t, AzuriteURL(t, AzureTableName(ssf), "create=true"))
}

// AzureTableName makes a unique Azure table name for ssf, from letters and digits only (Azure's
// rule). The counter follows the last 'x' of the name, so distinct counters give distinct names.
func AzureTableName(ssf string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(ssf) {
		if ('a' <= r && r <= 'z' || '0' <= r && r <= '9') && b.Len() < 40 {
			b.WriteRune(r)
		}
	}
	return fmt.Sprintf("t%sx%d", b.String(), tables.Add(1))
}

// AzuriteURL is the aztables URL of table on Azurite, with the development account's key in
// the URL (where Redacted hides it) and the given extra query parameters.
func AzuriteURL(t suite.T, table string, params ...string) string {
	q := url.Values{"endpoint": {testservers.AzuriteAddrs(t).Table}}
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		q.Set(k, v)
	}
	u := url.URL{Scheme: "aztables", User: url.UserPassword(testservers.AzuriteAccount, testservers.AzuriteKey), Host: table, RawQuery: q.Encode()}
	return u.String()
}
