// Package dynamostore is the Amazon DynamoDB store driver (aws-sdk-go-v2).
//
// URL: dynamodb://TABLE?region=REGION&endpoint=URL&create=true. Credentials, and the region
// unless the URL gives one, come from the SDK's default chain (environment, shared config and
// credentials files, SSO, container and instance roles). endpoint points the client at a
// DynamoDB-compatible server (DynamoDB Local, moto). create=true creates a missing table
// (on-demand capacity) and waits until it is active; without it a missing table is an error.
//
// A table has partition key pk and sort key sk, both strings. Each row is one item; its
// attributes are item attributes of their native types (N, S, B, BOOL, and M for maps), so
// conditions and updates run in DynamoDB as condition and update expressions: a conditional
// update is one UpdateItem request whenever the update's effect can be stated without reading
// the row, and otherwise (a map entry set in a map that does not exist yet, say) the first
// request's failed condition returns the row and a second request writes the result pinned to
// what it read. See docs/stores/dynamodb.md.
package dynamostore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ssfkit/ssfkit/adapters/store"
)

func init() { store.Register("dynamodb", open) }

// Driver is a store.Driver over one DynamoDB table.
type Driver struct {
	client *dynamodb.Client
	table  string
	region string
}

// Options configure New.
type Options struct {
	// Create creates the table if it does not exist, and waits until it is active.
	Create bool
}

// Tables opened by URL with the same endpoint and region share an SDK client (its connection
// pool and credential cache): an application opens a table per SSF. Clients live as long as the
// process, like database/sql's drivers; they hold no resources but idle connections.
var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*dynamodb.Client{}
)

// clientKey is what a shared client is for. serialize (URL parameter serialize=true) sends the
// client's requests one at a time: for emulators that do not apply a request to an item
// atomically, such as moto, where two concurrent conditional updates can both succeed. DynamoDB
// itself never needs it.
type clientKey struct {
	endpoint, region string
	serialize        bool
}

// oneAtATime is an HTTP transport that sends one request at a time.
type oneAtATime struct {
	mu   sync.Mutex
	next http.RoundTripper
}

func (t *oneAtATime) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	// The response is read before the next request starts: the emulator applies a request
	// while it answers it.
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func open(ctx context.Context, u *store.URL) (store.Driver, error) {
	if err := u.CheckParams("region", "endpoint", "create", "serialize"); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: a DynamoDB URL names a table, not a path: want dynamodb://TABLE, got path %q", store.ErrInvalid, u.Path)
	}
	create, err := strconv.ParseBool(u.Param("create", "false"))
	if err != nil {
		return nil, fmt.Errorf("%w: create=%q must be true or false", store.ErrInvalid, u.Query.Get("create"))
	}
	endpoint := u.Query.Get("endpoint")
	if endpoint != "" {
		if e, err := url.Parse(endpoint); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, fmt.Errorf("%w: endpoint=%q must be an http:// or https:// URL", store.ErrInvalid, endpoint)
		}
	}
	if err := checkTableName(u.Host); err != nil {
		return nil, err
	}
	serialize, err := strconv.ParseBool(u.Param("serialize", "false"))
	if err != nil {
		return nil, fmt.Errorf("%w: serialize=%q must be true or false", store.ErrInvalid, u.Query.Get("serialize"))
	}
	client, err := sharedClient(ctx, clientKey{endpoint, u.Query.Get("region"), serialize})
	if err != nil {
		return nil, err
	}
	return New(ctx, client, u.Host, Options{Create: create})
}

func sharedClient(ctx context.Context, key clientKey) (*dynamodb.Client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[key]; ok {
		return c, nil
	}
	endpoint, region := key.endpoint, key.region
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region: add region=... to the URL or set AWS_REGION", store.ErrInvalid)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"choose a profile with AWS_PROFILE, or run with an IAM role (%w)", err)
	}
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if key.serialize {
			o.HTTPClient = &http.Client{Transport: &oneAtATime{next: http.DefaultTransport}}
		}
	})
	clients[key] = c
	return c, nil
}

var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

func checkTableName(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("%w: DynamoDB table name %q must be 3 to 255 letters, digits, '_', '-' or '.'", store.ErrInvalid, name)
	}
	return nil
}

// New opens table through client, which the caller configured (credentials, region, endpoint,
// HTTP client, retries). The table must have the key schema pk (S, hash) and sk (S, range).
func New(ctx context.Context, client *dynamodb.Client, table string, opts Options) (*Driver, error) {
	if err := checkTableName(table); err != nil {
		return nil, err
	}
	d := &Driver{client: client, table: table, region: client.Options().Region}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing) && opts.Create:
		return d, d.create(ctx)
	case errors.As(err, &missing):
		return nil, fmt.Errorf("%w: table %s does not exist in region %s; create it with terraform (modules/aws) or add create=true", store.ErrInvalid, table, d.region)
	case err != nil:
		return nil, d.wrap(ctx, err)
	}
	if err := checkSchema(out.Table); err != nil {
		return nil, fmt.Errorf("table %s in region %s: %w", table, d.region, err)
	}
	if out.Table.TableStatus != types.TableStatusActive {
		return d, d.waitActive(ctx)
	}
	return d, nil
}

func checkSchema(t *types.TableDescription) error {
	defs := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		defs[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	var got []string
	for _, k := range t.KeySchema {
		got = append(got, fmt.Sprintf("%s (%s, %s)", aws.ToString(k.AttributeName), defs[aws.ToString(k.AttributeName)], k.KeyType))
	}
	if strings.Join(got, ", ") != "pk (S, HASH), sk (S, RANGE)" {
		return fmt.Errorf("%w: key schema is %s; ssfkit needs pk (S, HASH), sk (S, RANGE)", store.ErrInvalid, strings.Join(got, ", "))
	}
	return nil
}

func (d *Driver) create(ctx context.Context) error {
	key := func(name string, kt types.KeyType) (types.AttributeDefinition, types.KeySchemaElement) {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS},
			types.KeySchemaElement{AttributeName: aws.String(name), KeyType: kt}
	}
	pkDef, pkKey := key(attrPK, types.KeyTypeHash)
	skDef, skKey := key(attrSK, types.KeyTypeRange)
	out, err := d.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &d.table,
		AttributeDefinitions: []types.AttributeDefinition{pkDef, skDef},
		KeySchema:            []types.KeySchemaElement{pkKey, skKey},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse): // created concurrently
	case err != nil:
		return d.wrap(ctx, err)
	case out.TableDescription.TableStatus == types.TableStatusActive:
		return nil
	}
	return d.waitActive(ctx)
}

// tableWait bounds the wait for a table to become active (seconds on DynamoDB).
const tableWait = 5 * time.Minute

func (d *Driver) waitActive(ctx context.Context) error {
	w := dynamodb.NewTableExistsWaiter(d.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 500*time.Millisecond, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &d.table}, tableWait); err != nil {
		return fmt.Errorf("waiting for table %s to become active: %w", d.table, d.wrap(ctx, err))
	}
	return nil
}

// wrap maps SDK errors (after the SDK's own retries) onto the store's sentinels: throttling,
// server and network errors are store.ErrUnavailable, the item size limit store.ErrTooLarge,
// other validation errors store.ErrInvalid; context errors pass through.
func (d *Driver) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err) // never reached DynamoDB, or no answer
	}
	var missing *types.ResourceNotFoundException
	switch {
	case api.ErrorCode() == "ValidationException" && strings.Contains(api.ErrorMessage(), "exceeded the maximum allowed size"):
		return fmt.Errorf("%w: %s", store.ErrTooLarge, api.ErrorMessage())
	case api.ErrorCode() == "ValidationException":
		return fmt.Errorf("%w: DynamoDB: %s", store.ErrInvalid, api.ErrorMessage())
	case errors.As(err, &missing):
		return fmt.Errorf("table %s in region %s: %w", d.table, d.region, err)
	case retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary:
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err) // throttled, 5xx, connection lost
	}
	return err // refused: access denied, bad credentials, ...
}

func tooLarge(k store.Key, n int) error {
	return fmt.Errorf("%w: row %s would be %d bytes, DynamoDB allows %d", store.ErrTooLarge, k, n, MaxItemBytes)
}

// Get implements store.Driver with a strongly consistent read.
func (d *Driver) Get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	return d.get(ctx, key)
}

func (d *Driver) get(ctx context.Context, key store.Key) (store.Attrs, bool, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &d.table, Key: keyItem(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, false, d.wrap(ctx, err)
	}
	a, err := decodeItem(out.Item)
	if err != nil {
		return nil, false, fmt.Errorf("row %s: %w", key, err)
	}
	return a, a != nil, nil
}

// write is one conditional update as DynamoDB takes it.
type write struct {
	b      *builder
	update string
	cond   cexpr
}

func (d *Driver) updateInput(key store.Key, w *write) *dynamodb.UpdateItemInput {
	cond := w.cond.text()
	names, values := w.b.params(&w.update, cond)
	return &dynamodb.UpdateItemInput{
		TableName: &d.table, Key: keyItem(key),
		UpdateExpression: &w.update, ConditionExpression: cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// fastWrite is the write that needs no read, or nil if cond never holds, cannot be translated,
// or the update's effect depends on the row (see planUpdate).
func fastWrite(key store.Key, cond store.Cond, upd store.Update) (*write, error) {
	b := newBuilder()
	c, err := b.cond(cond)
	if err != nil || c.konst < 0 {
		return nil, nil // untranslatable, or never holds: decided on a read row
	}
	p, ok := planUpdate(upd, rowAbsent(cond))
	if !ok {
		return nil, nil
	}
	if n := itemSize(key, p.lowerBound()); n > MaxItemBytes {
		return nil, tooLarge(key, n)
	}
	update, assume, err := p.render(b)
	if err != nil {
		return nil, err
	}
	return &write{b: b, update: update, cond: and(c, assume)}, nil
}

// Update implements store.Driver: one UpdateItem when the update needs no read (fastWrite);
// otherwise, and when that request's condition fails for a reason other than cond, the decision
// is taken on the row as DynamoDB returned it (or a read) and written pinned to it.
func (d *Driver) Update(ctx context.Context, key store.Key, cond store.Cond, upd store.Update) (store.UpdateResult, error) {
	if err := checkKey(key); err != nil {
		return store.UpdateResult{}, err
	}
	if err := upd.Validate(); err != nil {
		return store.UpdateResult{}, err
	}
	w, err := fastWrite(key, cond, upd)
	if err != nil {
		return store.UpdateResult{}, err
	}
	var cur store.Attrs // the row as last seen (nil: absent)
	pinnedTo, isPinned := store.Attrs(nil), false
	if w == nil {
		if cur, _, err = d.get(ctx, key); err != nil {
			return store.UpdateResult{}, err
		}
	}
	for {
		if w == nil {
			if !cond.Eval(cur, cur != nil) {
				return store.UpdateResult{Attrs: cur}, nil
			}
			next, err := upd.Apply(cur)
			if err != nil {
				return store.UpdateResult{}, err
			}
			if n := itemSize(key, next); n > MaxItemBytes {
				return store.UpdateResult{}, tooLarge(key, n)
			}
			b := newBuilder()
			update, pins, err := pinned(b, upd, cond, cur, next)
			if err != nil {
				return store.UpdateResult{}, err
			}
			w, pinnedTo, isPinned = &write{b: b, update: update, cond: pins}, cur, true
		}
		out, err := d.client.UpdateItem(ctx, d.updateInput(key, w))
		var failed *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			a, err := decodeItem(out.Attributes)
			if err != nil {
				return store.UpdateResult{}, fmt.Errorf("row %s: %w", key, err)
			}
			return store.UpdateResult{Applied: true, Attrs: a}, nil
		case !errors.As(err, &failed):
			return store.UpdateResult{}, d.wrap(ctx, err)
		}
		// ALL_OLD: the row as the failed condition saw it (no item: no row).
		seen, err := decodeItem(failed.Item)
		if err != nil {
			return store.UpdateResult{}, fmt.Errorf("row %s: %w", key, err)
		}
		if isPinned && reflect.DeepEqual(seen, pinnedTo) {
			// A pinned write failed on the very row it was pinned to: retrying would spin.
			return store.UpdateResult{}, fmt.Errorf("row %s: DynamoDB refused a write conditioned on the row it holds", key)
		}
		cur, w, isPinned = seen, nil, false
	}
}

// TransactWriteItems' limits.
const (
	maxTransactItems = 100
	maxTransactBytes = 4 << 20
)

// UpdateBatch implements store.Batcher. A batch of create-if-absent updates on distinct rows
// goes in one TransactWriteItems request: a transaction returns no attributes, but a created
// row is exactly the update applied to nothing. If the transaction is cancelled (a row exists,
// a conflict), nothing was written, and the updates run one by one (store.UpdateEach) so each
// gets its own result; so do batches the transaction cannot take.
func (d *Driver) UpdateBatch(ctx context.Context, ups []store.BatchUpdate) ([]store.UpdateResult, error) {
	for _, u := range ups {
		if err := checkKey(u.Key); err != nil {
			return nil, err
		}
		if err := u.Update.Validate(); err != nil {
			return nil, err
		}
	}
	items, results, err := d.transaction(ups)
	switch {
	case err != nil:
		return nil, err
	case items == nil:
		return store.UpdateEach(ctx, d, ups)
	}
	_, err = d.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		return store.UpdateEach(ctx, d, ups)
	}
	if err != nil {
		return nil, d.wrap(ctx, err)
	}
	return results, nil
}

// transaction prepares ups as one transaction and the results it will have if it commits, or
// returns nil items if the batch does not qualify.
func (d *Driver) transaction(ups []store.BatchUpdate) ([]types.TransactWriteItem, []store.UpdateResult, error) {
	if len(ups) < 2 || len(ups) > maxTransactItems {
		return nil, nil, nil
	}
	items := make([]types.TransactWriteItem, len(ups))
	results := make([]store.UpdateResult, len(ups))
	seen := map[store.Key]bool{}
	total := 0
	for i, u := range ups {
		if seen[u.Key] || !rowAbsent(u.Cond) {
			return nil, nil, nil
		}
		seen[u.Key] = true
		w, err := fastWrite(u.Key, u.Cond, u.Update)
		if err != nil || w == nil {
			return nil, nil, err
		}
		created, err := u.Update.Apply(nil)
		if err != nil {
			return nil, nil, err
		}
		if total += itemSize(u.Key, created); total > maxTransactBytes {
			return nil, nil, nil
		}
		in := d.updateInput(u.Key, w)
		items[i] = types.TransactWriteItem{Update: &types.Update{
			TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression, ConditionExpression: in.ConditionExpression,
			ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		}}
		results[i] = store.UpdateResult{Applied: true, Attrs: created}
	}
	return items, results, nil
}

// Scan implements store.Driver with a strongly consistent Query, page by page.
func (d *Driver) Scan(ctx context.Context, partition string, opts store.ScanOptions) ([]store.Row, error) {
	if err := checkKeyPart("partition", partition, maxPartitionBytes); err != nil {
		return nil, err
	}
	b := newBuilder()
	keyCond := b.name(attrPK) + " = " + b.value(&types.AttributeValueMemberS{Value: partition})
	var proj *string
	if opts.Projection != nil {
		proj = ptr(b.projection(opts.Projection))
	}
	names, values := b.params(&keyCond, proj)
	in := &dynamodb.QueryInput{
		TableName: &d.table, KeyConditionExpression: &keyCond, ProjectionExpression: proj,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ConsistentRead: aws.Bool(true), ScanIndexForward: aws.Bool(!opts.Reverse),
	}
	if opts.Limit > 0 {
		in.Limit = aws.Int32(int32(min(opts.Limit, math.MaxInt32)))
	}
	rows := []store.Row{}
	for {
		out, err := d.client.Query(ctx, in)
		if err != nil {
			return nil, d.wrap(ctx, err)
		}
		for _, item := range out.Items {
			sk, _ := item[attrSK].(*types.AttributeValueMemberS)
			if sk == nil {
				return nil, fmt.Errorf("partition %q: an item without a string sort key", partition)
			}
			key := store.Key{Partition: partition, Sort: sk.Value}
			a, err := decodeItem(item)
			if err != nil {
				return nil, fmt.Errorf("row %s: %w", key, err)
			}
			rows = append(rows, store.Row{Key: key, Attrs: a})
			if len(rows) == opts.Limit {
				return rows, nil
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return rows, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// projection renders a projection expression for paths, plus the sort key. DynamoDB rejects
// overlapping paths, so an entry of a projected attribute, and repeats, are left out.
func (b *builder) projection(paths []store.Path) string {
	whole := map[string]bool{}
	for _, p := range paths {
		if len(p) == 1 && rowPath(p) {
			whole[p[0]] = true
		}
	}
	parts := []string{b.name(attrSK)}
	seen := map[string]bool{}
	for _, p := range paths {
		if !rowPath(p) || (len(p) == 2 && whole[p[0]]) {
			continue
		}
		if path := b.path(p); !seen[path] {
			seen[path] = true
			parts = append(parts, path)
		}
	}
	return strings.Join(parts, ", ")
}

// Delete implements store.Driver with a conditional DeleteItem.
func (d *Driver) Delete(ctx context.Context, key store.Key, cond store.Cond) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	b := newBuilder()
	c, err := b.cond(cond)
	if err == nil {
		if c.konst < 0 {
			return false, nil
		}
		return d.delete(ctx, key, b, c)
	}
	// An untranslatable condition is evaluated on a read row, and the delete pinned to it.
	for {
		cur, exists, err := d.get(ctx, key)
		if err != nil || !exists || !cond.Eval(cur, exists) {
			return false, err
		}
		b := newBuilder()
		pins, err := b.pin(cur, condPaths(cond, nil))
		if err != nil {
			return false, err
		}
		if deleted, err := d.delete(ctx, key, b, pins); err != nil || deleted {
			return deleted, err
		}
	}
}

func (d *Driver) delete(ctx context.Context, key store.Key, b *builder, c cexpr) (bool, error) {
	cond := c.text()
	names, values := b.params(cond)
	out, err := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &d.table, Key: keyItem(key), ConditionExpression: cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues: types.ReturnValueAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return false, nil
	}
	if err != nil {
		return false, d.wrap(ctx, err)
	}
	return len(out.Attributes) > 0, nil
}

// Client returns the SDK client, for DynamoDB features the store interface does not cover.
func (d *Driver) Client() *dynamodb.Client { return d.client }

// Limits implements store.Driver.
func (d *Driver) Limits() store.Limits { return store.Limits{MaxRowBytes: MaxItemBytes} }

// Drop implements store.Dropper: it deletes the table (DynamoDB finishes in the background).
func (d *Driver) Drop(ctx context.Context) error {
	_, err := d.client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &d.table})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil
	}
	return d.wrap(ctx, err)
}

// Close implements store.Driver. The SDK client may be shared with other tables and holds
// nothing that needs closing.
func (d *Driver) Close() error { return nil }
