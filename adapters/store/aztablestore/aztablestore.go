// Package aztablestore is the Azure Table storage driver (aztables). It also serves the Cosmos DB
// for Table API, on an account with Strong consistency.
//
// URL: aztables://[ACCOUNT:KEY@]TABLE?endpoint=URL&create=true&max_row_bytes=N&cosmos=BOOL.
// Credentials, first found wins: the account key in the URL (percent-encoded); the connection
// string in AZURE_STORAGE_CONNECTION_STRING; AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY; Entra
// ID through azidentity's DefaultAzureCredential (a managed identity in production, https only).
// endpoint defaults to https://ACCOUNT.table.core.windows.net when an account is named. Drivers
// with the same endpoint and credential share one service client.
//
// Layout: PartitionKey and RowKey are the store keys, escaped (see encodeKey) so that Azure takes
// them and sorts them in byte order. The row's attributes, encoded with store.EncodeAttrs, are
// split across binary properties d0, d1, ... of at most 64 KiB each.
//
// Conditional writes are optimistic: read the entity and its ETag, evaluate the condition here,
// then replace with If-Match (or insert, for a missing row) and start over when another writer
// got there first. Create-if-absent inserts without reading, and a row this driver has just seen
// is written with its cached ETag without reading (see cache.go); the ETag check makes both safe.
// Writes are never retried by the SDK after a request may have reached the service, since a
// retried insert or replace could apply twice: such failures are store.ErrUnavailable, which the
// runtime is built to recover from. Azure has no descending query: reverse scans read from a
// per-partition tail hint, or the whole partition. docs/stores/azure-tables.md has the details.
package aztablestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("aztables", open) }

const (
	// DefaultMaxRowBytes matches the other drivers (DynamoDB's item limit), so a row that fits
	// here fits on every backend.
	DefaultMaxRowBytes = store.PortableMaxRowBytes
	// MaxRowBytes is the largest max_row_bytes accepted: 15 chunks of 64 KiB, which with keys of
	// up to 1 KiB each and the property overhead stays under Azure's 1 MiB entity limit.
	MaxRowBytes = maxChunks * chunkBytes
	// minRowBytes keeps a misconfigured limit from rejecting every row.
	minRowBytes = 256

	chunkBytes = 64 << 10 // Azure's limit on one binary property
	maxChunks  = 15
	// maxGroupOps and maxGroupBytes keep an entity-group transaction inside Azure's limits of
	// 100 operations and a 4 MiB request (the binary chunks travel base64-encoded).
	maxGroupOps   = 100
	maxGroupBytes = 2 << 20
	// maxPage is the most entities Azure returns in one query response.
	maxPage = 1000
)

// chunkNames are the property names of the attribute chunks.
var chunkNames = func() (n [maxChunks]string) {
	for i := range n {
		n[i] = "d" + strconv.Itoa(i)
	}
	return
}()

// Environment variables consulted for credentials, after the URL.
const (
	envConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	envAccount          = "AZURE_STORAGE_ACCOUNT"
	envKey              = "AZURE_STORAGE_KEY"
)

// Driver is a store.Driver over one Azure table.
type Driver struct {
	client *aztables.Client
	limits store.Limits
	// ordered is false on Cosmos DB, whose queries do not return rows in RowKey order.
	ordered bool
	closed  atomic.Bool
	rows    rowCache
	tails   tailHints
}

var (
	noMetadata = aztables.MetadataFormatNone
	// minimalMetadata adds each entity's ETag to query results.
	minimalMetadata = aztables.MetadataFormatMinimal
	// noContent keeps inserts from echoing the entity (up to 1 MiB) back.
	noContent = http.Header{"Prefer": []string{"return-no-content"}}
	// tableName is Azure's rule for table names ("tables" is reserved as well).
	tableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{2,62}$`)
)

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	if err := u.CheckParams("endpoint", "create", "max_row_bytes", "cosmos"); err != nil {
		return nil, err
	}
	table := u.Host
	if !tableName.MatchString(table) || strings.EqualFold(table, "tables") {
		return nil, fmt.Errorf("%w: Azure table name %q must be 3-63 letters and digits, starting with a letter (and not \"tables\"); write aztables://TABLE?endpoint=...", store.ErrInvalid, table)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: aztables URL has path %q; the table name is the host part and the endpoint a parameter: aztables://TABLE?endpoint=https://ACCOUNT.table.core.windows.net", store.ErrInvalid, u.Path)
	}
	limit := DefaultMaxRowBytes
	if s := u.Query.Get("max_row_bytes"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < minRowBytes || n > MaxRowBytes {
			return nil, fmt.Errorf("%w: max_row_bytes=%q must be an integer from %d to %d (Azure's 1 MiB entity limit less keys and overhead)", store.ErrInvalid, s, minRowBytes, MaxRowBytes)
		}
		limit = n
	}
	create, err := boolParam(u, "create", false)
	if err != nil {
		return nil, err
	}
	svc, k, err := serviceClient(u)
	if err != nil {
		return nil, err
	}
	// Cosmos DB's Table API endpoints, as aztables recognises them.
	where := k.endpoint + k.connectionString
	cosmos, err := boolParam(u, "cosmos", strings.Contains(where, ".table.cosmos.") || strings.Contains(where, ".table.cosmosdb."))
	if err != nil {
		return nil, err
	}
	d := &Driver{client: svc.NewClient(table), limits: store.Limits{MaxRowBytes: limit}, ordered: !cosmos}
	if err := d.ensureTable(ctx, svc, table, create); err != nil {
		return nil, fmt.Errorf("table %s at %s: %w", table, k, err)
	}
	return d, nil
}

func boolParam(u *store.URL, name string, def bool) (bool, error) {
	s := u.Query.Get(name)
	if s == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q must be true or false", store.ErrInvalid, name, s)
	}
	return b, nil
}

// ensureTable checks that the table exists, creating it if asked to. The check is a query, which
// needs only read access, so a least-privilege identity can open an existing table.
func (d *Driver) ensureTable(ctx context.Context, svc *aztables.ServiceClient, table string, create bool) error {
	// An unreachable endpoint fails Open at once rather than after the SDK's retries.
	ctx = writeContext(ctx)
	probe := "PartitionKey eq ''" // no row has an empty PartitionKey: see encodeKey
	_, err := d.client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &probe, Top: ptr[int32](1), Format: &noMetadata}).NextPage(ctx)
	if !hasCode(err, aztables.TableNotFound) {
		return wrap(ctx, err)
	}
	if !create {
		return errors.New("the table does not exist: create it, or add create=true to the URL")
	}
	if _, err := svc.CreateTable(ctx, table, nil); err != nil && !hasCode(err, aztables.TableAlreadyExists) {
		return wrap(ctx, err)
	}
	return nil
}

// clientKey identifies a service client: an endpoint and the credential used on it.
type clientKey struct {
	endpoint, account, key, connectionString string
}

// String names the endpoint for messages, never a secret.
func (k clientKey) String() string {
	if k.connectionString != "" {
		return "the endpoint in " + envConnectionString
	}
	return k.endpoint
}

// Service clients are shared: they are safe for concurrent use, and an application opens a
// table per SSF, each of which would otherwise fetch its own Entra ID tokens. They hold nothing
// that needs closing, so they live as long as the process.
var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*aztables.ServiceClient{}
	entraID   azcore.TokenCredential
)

// serviceClient returns the shared client for u's endpoint and credential.
func serviceClient(u *store.URL) (*aztables.ServiceClient, clientKey, error) {
	endpoint := strings.TrimSuffix(u.Query.Get("endpoint"), "/")
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "https" && e.Scheme != "http") || e.Host == "" || e.RawQuery != "" || e.Fragment != "" {
			return nil, clientKey{}, fmt.Errorf("%w: endpoint=%q must be an http(s) URL without a query, e.g. https://ACCOUNT.table.core.windows.net (SAS tokens are not accepted: they would show in logs)", store.ErrInvalid, endpoint)
		}
	}
	// store.URL does not expose the userinfo; WithoutParams returns the URL as written.
	raw, err := url.Parse(u.WithoutParams())
	if err != nil {
		return nil, clientKey{}, fmt.Errorf("%w: %v", store.ErrInvalid, err)
	}
	var k clientKey
	switch {
	case raw.User != nil:
		key, ok := raw.User.Password()
		if raw.User.Username() == "" || !ok || key == "" {
			return nil, clientKey{}, fmt.Errorf("%w: credentials in the URL must be ACCOUNT:KEY@ (percent-encoded)", store.ErrInvalid)
		}
		k.account, k.key = raw.User.Username(), key
	case os.Getenv(envConnectionString) != "":
		if endpoint != "" {
			return nil, clientKey{}, fmt.Errorf("%w: endpoint=%s conflicts with %s, which names its own endpoint: drop one", store.ErrInvalid, endpoint, envConnectionString)
		}
		k.connectionString = os.Getenv(envConnectionString)
	case os.Getenv(envKey) != "":
		if os.Getenv(envAccount) == "" {
			return nil, clientKey{}, fmt.Errorf("%w: %s is set but %s is not", store.ErrInvalid, envKey, envAccount)
		}
		k.account, k.key = os.Getenv(envAccount), os.Getenv(envKey)
	default:
		k.account = os.Getenv(envAccount) // names the default endpoint only
	}
	if endpoint == "" && k.connectionString == "" {
		if k.account == "" {
			return nil, clientKey{}, fmt.Errorf("%w: no Azure endpoint or credentials: add endpoint=https://ACCOUNT.table.core.windows.net (Entra ID), put ACCOUNT:KEY@ in the URL, or set %s, or %s (with %s)", store.ErrInvalid, envConnectionString, envAccount, envKey)
		}
		endpoint = "https://" + k.account + ".table.core.windows.net"
	}
	k.endpoint = endpoint
	if k.key == "" && k.connectionString == "" && strings.HasPrefix(endpoint, "http:") {
		return nil, clientKey{}, fmt.Errorf("%w: no account key for %s, and Entra ID tokens are only sent over https: put ACCOUNT:KEY@ in the URL", store.ErrInvalid, endpoint)
	}

	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[k]; ok {
		return c, k, nil
	}
	var c *aztables.ServiceClient
	switch {
	case k.connectionString != "":
		c, err = aztables.NewServiceClientFromConnectionString(k.connectionString, clientOptions)
	case k.key != "":
		var cred *aztables.SharedKeyCredential
		if cred, err = aztables.NewSharedKeyCredential(k.account, k.key); err == nil {
			c, err = aztables.NewServiceClientWithSharedKey(endpoint, cred, clientOptions)
		}
	default:
		if entraID == nil {
			if entraID, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
				entraID = nil
				return nil, clientKey{}, fmt.Errorf("no Azure credentials (Entra ID): %w", err)
			}
		}
		c, err = aztables.NewServiceClient(endpoint, entraID, clientOptions)
	}
	if err != nil {
		// The SDK's messages here (bad base64, malformed connection string) quote no secret.
		return nil, clientKey{}, fmt.Errorf("%w: Azure credentials for %s: %v", store.ErrInvalid, k, err)
	}
	clients[k] = c
	return c, k, nil
}

// clientOptions keep up to 64 idle connections per endpoint, where the SDK keeps 10: the tables
// of one process share an endpoint, and a busy runtime has many requests in flight at once.
var clientOptions = func() *aztables.ClientOptions {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: t}}}
}()

func ptr[T any](v T) *T { return &v }

// writeContext disables the SDK's retries except on throttling, which Azure answers before
// doing anything. A timeout or a 5xx after the request went out leaves a write in doubt, and a
// blind retry of an insert or an If-Match replace that did apply would fail as a conflict that
// the CAS loop would then re-run: the update would apply twice.
func writeContext(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{ShouldRetry: func(resp *http.Response, err error) bool {
		return err == nil && (resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("x-ms-error-code") == "ServerBusy")
	}})
}

// wrap maps Azure errors onto the store sentinels.
func wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrInvalid) {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		var ue *url.Error // the HTTP client's: no response came back
		if errors.As(err, &ue) {
			return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
		}
		return err
	}
	switch code := aztables.TableErrorCode(re.ErrorCode); {
	case re.StatusCode == http.StatusRequestEntityTooLarge || code == aztables.EntityTooLarge || code == aztables.PropertyValueTooLarge:
		return fmt.Errorf("%w: %s", store.ErrTooLarge, code)
	case re.StatusCode == http.StatusRequestTimeout || re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500:
		return fmt.Errorf("%w: %d %s", store.ErrUnavailable, re.StatusCode, code)
	case code == aztables.InvalidInput || code == aztables.OutOfRangeInput || code == aztables.PropertyNameInvalid:
		return fmt.Errorf("%w: %s", store.ErrInvalid, code)
	case code == aztables.TableNotFound:
		return errors.New("the table does not exist (deleted after it was opened?)")
	}
	return err
}

func hasCode(err error, code aztables.TableErrorCode) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == string(code)
}

// conflict reports a write that lost a race: the row was created (insert), changed or deleted
// (If-Match) since it was read. Nothing was written; the caller reads again.
func conflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && (re.StatusCode == http.StatusPreconditionFailed ||
		re.ErrorCode == string(aztables.EntityAlreadyExists) || rowMissing(err))
}

// rowMissing reports a 404 for the entity, as opposed to one for the table.
func rowMissing(err error) bool {
	return hasCode(err, aztables.ResourceNotFound) || hasCode(err, aztables.EntityNotFound)
}

func (d *Driver) keys(key store.Key) (pk, rk string, err error) {
	if d.closed.Load() {
		return "", "", store.ErrClosed
	}
	if pk, err = encodeKey(key.Partition); err == nil {
		rk, err = encodeKey(key.Sort)
	}
	return pk, rk, err
}

// entity returns the JSON of an entity holding blob.
func entity(pk, rk string, blob []byte) []byte {
	e := map[string]any{"PartitionKey": pk, "RowKey": rk}
	for i := 0; len(blob) > 0; i++ {
		n := min(len(blob), chunkBytes)
		e[chunkNames[i]], e[chunkNames[i]+"@odata.type"] = blob[:n], "Edm.Binary"
		blob = blob[n:]
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // strings and byte slices always marshal
	}
	return b
}

// entry is one entity as read: its keys, and unless only keys were asked for, its ETag (from
// queries with minimal metadata) and attribute blob.
type entry struct {
	sort, rk string
	etag     azcore.ETag
	blob     []byte
}

// parseEntity parses an entity's JSON.
func parseEntity(raw []byte, keysOnly bool) (entry, error) {
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil {
		return entry{}, err
	}
	var out entry
	var err error
	out.rk, _ = e["RowKey"].(string)
	if out.sort, err = decodeKey(out.rk); err != nil || keysOnly {
		return out, err
	}
	if s, ok := e["odata.etag"].(string); ok {
		out.etag = azcore.ETag(s)
	}
	for _, name := range chunkNames {
		s, ok := e[name].(string)
		if !ok {
			break
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return entry{}, fmt.Errorf("entity %q, property %s: %v", out.rk, name, err)
		}
		out.blob = append(out.blob, b...)
	}
	if out.blob == nil {
		return entry{}, fmt.Errorf("entity %q has no attribute data (not written by ssfkit?)", out.rk)
	}
	return out, nil
}

// read returns the row and its ETag; found is false for a missing row.
func (d *Driver) read(ctx context.Context, key store.Key, pk, rk string) (store.Attrs, azcore.ETag, bool, error) {
	resp, err := d.client.GetEntity(ctx, pk, rk, &aztables.GetEntityOptions{Format: &noMetadata})
	if rowMissing(err) {
		d.rows.drop(key)
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, wrap(ctx, err)
	}
	e, err := parseEntity(resp.Value, false)
	if err == nil {
		var a store.Attrs
		if a, err = store.DecodeAttrs(e.blob); err == nil {
			d.rows.put(key, resp.ETag, e.blob)
			return a, resp.ETag, true, nil
		}
	}
	return nil, "", false, fmt.Errorf("row %s: %w", key, err)
}

// Get implements store.Driver.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	pk, rk, err := d.keys(key)
	if err != nil {
		return nil, false, err
	}
	a, _, found, err := d.read(ctx, key, pk, rk)
	return a, found, err
}

// Update implements store.Driver.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	pk, rk, err := d.keys(key)
	if err != nil {
		return store.UpdateResult{}, err
	}
	u := store.BatchUpdate{Key: key, Cond: cond, Update: upd}
	for first := true; ; first = false {
		var cur store.Attrs
		var etag azcore.ETag
		exists := false
		// The first attempt may skip the read and guess the row: missing, for create-if-absent
		// (the runtime's logs and intents, which usually do not exist yet), or as this driver
		// last saw it. The write checks the guess; only an update that applies to it and
		// writes can rely on it.
		guess := false
		if first {
			if isRowAbsent(cond) {
				guess = true
			} else if c, ok := d.rows.get(key); ok {
				if cur, err = store.DecodeAttrs(c.blob); err == nil {
					guess, etag, exists = true, c.etag, true
				}
			}
		}
		if !guess {
			if cur, etag, exists, err = d.read(ctx, key, pk, rk); err != nil {
				return store.UpdateResult{}, err
			}
		}
		res, blob, err := u.Evaluate(cur, exists, d.limits.MaxRowBytes)
		if guess && (err != nil || !res.Applied) {
			continue // decide on the row as it is
		}
		if err != nil || !res.Applied {
			return res, err
		}
		wctx := writeContext(ctx)
		var written azcore.ETag
		if exists {
			var r aztables.UpdateEntityResponse
			r, err = d.client.UpdateEntity(wctx, entity(pk, rk, blob), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
			written = r.ETag
		} else {
			var r aztables.AddEntityResponse
			r, err = d.client.AddEntity(policy.WithHTTPHeader(wctx, noContent), entity(pk, rk, blob), nil)
			written = r.ETag
		}
		if err != nil {
			d.rows.drop(key)
			if conflict(err) {
				continue
			}
			return store.UpdateResult{}, wrap(ctx, err)
		}
		d.rows.put(key, written, blob)
		return res, nil
	}
}

func isRowAbsent(c store.Cond) bool {
	return c.Op == store.OpNot && len(c.Args) == 1 && c.Args[0].Op == store.OpRowExists
}

// UpdateBatch implements store.Batcher. Updates that all create rows in one partition (the
// runtime's read logs) go in one entity-group transaction of inserts: it applies all of them or,
// if any row exists, none, and then, as for any other batch, each update runs as Update.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if rs, err := d.createGroup(ctx, ups); rs != nil || err != nil {
		return rs, err
	}
	return store.UpdateEach(ctx, d, ups)
}

// createGroup inserts ups in one transaction, if they suit one. It returns nil results, and no
// error, when they do not or when the service rejected the transaction (which then changed
// nothing).
func (d *Driver) createGroup(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	if len(ups) < 2 || len(ups) > maxGroupOps || d.closed.Load() {
		return nil, nil
	}
	rs := make([]store.UpdateResult, len(ups))
	actions := make([]aztables.TransactionAction, len(ups))
	seen := make(map[string]bool, len(ups))
	size := 0
	for i, u := range ups {
		if u.Key.Partition != ups[0].Key.Partition || seen[u.Key.Sort] || u.Update.Validate() != nil {
			return nil, nil
		}
		seen[u.Key.Sort] = true
		pk, rk, err := d.keys(u.Key)
		if err != nil {
			return nil, nil
		}
		// Evaluated as if the row were missing, which the insert verifies. An update that would
		// not apply or would fail on a missing row goes to Update, which sees the real row.
		res, blob, err := u.Evaluate(nil, false, d.limits.MaxRowBytes)
		if err != nil || !res.Applied {
			return nil, nil
		}
		if size += len(blob); size > maxGroupBytes {
			return nil, nil
		}
		rs[i] = res
		actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: entity(pk, rk, blob)}
	}
	_, err := d.client.SubmitTransaction(writeContext(ctx), actions, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusAccepted || re.StatusCode >= 400 && re.StatusCode < 500 && re.StatusCode != http.StatusTooManyRequests && re.StatusCode != http.StatusRequestTimeout) {
		// A failed operation inside the group (202) or a rejected request: nothing was written.
		return nil, nil
	}
	if err != nil {
		return nil, wrap(ctx, err)
	}
	for _, u := range ups {
		d.rows.drop(u.Key) // whatever was cached described a row that did not exist
	}
	return rs, nil
}

// Scan implements store.Driver. Azure has no descending query, so a reverse scan reads the
// partition from its start, or from a tail hint: the first row of the previous reverse scan's
// result. Rows from the hint on are all later rows, so if there are Limit of them they are the
// answer. Cosmos DB, whose queries are not ordered by RowKey, is sorted here and read in full.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	pk, err := encodeKey(partition)
	if err != nil {
		return nil, err
	}
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	keysOnly := opts.Projection != nil && len(opts.Projection) == 0
	tail := opts.Reverse && opts.Limit > 0
	var entries []entry
	hinted := false
	if from, ok := d.tails.get(partition); tail && ok {
		if entries, err = d.query(ctx, pk, from, keysOnly, 0); err != nil {
			return nil, err
		}
		hinted = len(entries) >= opts.Limit
	}
	if !hinted {
		top := 0
		if opts.Limit > 0 && !opts.Reverse && d.ordered {
			top = opts.Limit
		}
		if entries, err = d.query(ctx, pk, "", keysOnly, top); err != nil {
			return nil, err
		}
	}
	// Sorting what Azure already ordered is cheap; Cosmos DB needs it.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.sort, b.sort) })
	if opts.Reverse {
		slices.Reverse(entries)
	}
	if opts.Limit > 0 && len(entries) > opts.Limit {
		entries = entries[:opts.Limit]
	}
	if tail {
		hint := ""
		if len(entries) > 0 {
			hint = entries[len(entries)-1].rk
		}
		d.tails.put(partition, hint)
	}
	out := make([]store.Row, len(entries))
	for i, e := range entries {
		out[i].Key = store.Key{Partition: partition, Sort: e.sort}
		if keysOnly {
			out[i].Attrs = store.Attrs{}
			continue
		}
		if out[i].Attrs, err = store.DecodeProjected(e.blob, opts.Projection); err != nil {
			return nil, fmt.Errorf("row %s: %w", out[i].Key, err)
		}
		d.rows.put(out[i].Key, e.etag, e.blob) // the runtime updates the DAAL tail it scanned
	}
	return out, nil
}

// query lists the partition's rows whose RowKey is from or later (all when from is empty),
// stopping once it has top of them if top > 0.
func (d *Driver) query(ctx context.Context, pk, from string, keysOnly bool, top int) ([]entry, error) {
	filter := "PartitionKey eq " + quote(pk)
	if from != "" {
		filter += " and RowKey ge " + quote(from)
	}
	lo := &aztables.ListEntitiesOptions{Filter: &filter, Format: &minimalMetadata}
	if keysOnly {
		lo.Select, lo.Format = ptr("RowKey"), &noMetadata
	}
	if top > 0 {
		lo.Top = ptr(int32(min(top, maxPage)))
	}
	var out []entry
	for pager := d.client.NewListEntitiesPager(lo); pager.More() && (top <= 0 || len(out) < top); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrap(ctx, err)
		}
		for _, raw := range page.Entities {
			e, err := parseEntity(raw, keysOnly)
			if err != nil {
				return nil, fmt.Errorf("partition %q: %w", pk, err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// quote makes an OData string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Delete implements store.Driver.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	pk, rk, err := d.keys(key)
	if err != nil {
		return false, err
	}
	for {
		cur, etag, exists, err := d.read(ctx, key, pk, rk)
		if err != nil || !exists || !cond.Eval(cur, true) {
			return false, err
		}
		_, err = d.client.DeleteEntity(writeContext(ctx), pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
		d.rows.drop(key)
		if conflict(err) {
			continue
		}
		if err != nil {
			return false, wrap(ctx, err)
		}
		return true, nil
	}
}

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return d.limits }

// Drop implements store.Dropper. Azure takes up to a minute to finish deleting a table, and
// refuses to create one of the same name meanwhile.
func (d *Driver) Drop(ctx context.Context) error {
	_, err := d.client.Delete(writeContext(ctx), nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return nil // already gone (Azure says ResourceNotFound, not TableNotFound)
	}
	return wrap(ctx, err)
}

// Close implements store.Driver. The shared service client stays for other tables.
func (d *Driver) Close() error {
	d.closed.Store(true)
	return nil
}
