package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	"github.com/ssfkit/ssfkit/adapters/store/storetest"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/internal/testtables"
)

func TestMain(m *testing.M) { testtables.Main(m) }

func TestConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) store.Driver { return testtables.Dynamo(t, "conf").Driver() })
}

func BenchmarkDriver(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) store.Driver { return testtables.Dynamo(b, "bench").Driver() })
}

// awsEnv gives the SDK's default chain only what the test sets: no shared config or
// credentials files, no instance metadata, no variables from the machine.
func awsEnv(t *testing.T, vars map[string]string) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
	} {
		t.Setenv(k, v)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	endpoint := url.QueryEscape(testservers.Moto.Addr(t))
	awsEnv(t, map[string]string{"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})
	at := func(table, params string) string {
		return "dynamodb://" + table + "?endpoint=" + endpoint + "&region=us-west-2" + params
	}
	open := func(u string) *store.Table {
		t.Helper()
		tbl, err := store.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			tbl.Close()
			tbl.Driver().(store.Dropper).Drop(ctx)
		})
		return tbl
	}

	a, b := open(at("url_a", "&create=true")), open(at("url_b", "&create=true"))
	if a.Driver().(*dynamostore.Driver).Client() != b.Driver().(*dynamostore.Driver).Client() {
		t.Error("tables on one endpoint and region do not share an SDK client")
	}
	k := store.Key{Partition: "p", Sort: "s"}
	if err := a.Put(ctx, k, store.Attrs{"v": int64(1)}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := open(at("url_a", "")).Get(ctx, k); err != nil || got["v"] != int64(1) {
		t.Fatalf("reopened table: Get = %v, %v", got, err)
	}

	_, err := store.Open(ctx, at("url_missing", ""))
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "does not exist in region us-west-2") || !strings.Contains(err.Error(), "create=true") {
		t.Errorf("opening a missing table: %v; want a store.ErrInvalid saying so and how to create it", err)
	}

	client := a.Driver().(*dynamostore.Driver).Client()
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("url_schema"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("url_schema")})
	if _, err := store.Open(ctx, at("url_schema", "")); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "key schema is id (N, HASH)") {
		t.Errorf("opening a table with another key schema: %v; want a store.ErrInvalid describing it", err)
	}
}

func TestOpenURLErrors(t *testing.T) {
	endpoint := url.QueryEscape(testservers.Moto.Addr(t))
	for _, tc := range []struct {
		name, url, want string
		env             map[string]string
	}{
		{"NoRegion", "dynamodb://tbl?endpoint=" + endpoint, "no AWS region: add region=", map[string]string{"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}},
		{"NoCredentials", "dynamodb://tbl?region=ap-south-1&endpoint=" + endpoint, "no AWS credentials: set AWS_ACCESS_KEY_ID", nil},
		{"ShortName", "dynamodb://ab?region=x", "must be 3 to 255", nil},
		{"BadName", "dynamodb://bad%25name?region=x", "must be 3 to 255", nil},
		{"Path", "dynamodb://tbl/sub?region=x", "names a table, not a path", nil},
		{"UnknownParam", "dynamodb://tbl?regoin=x", `unknown parameter "regoin"`, nil},
		{"BadCreate", "dynamodb://tbl?create=yes", `create="yes" must be true or false`, nil},
		{"BadSerialize", "dynamodb://tbl?serialize=sometimes", `serialize="sometimes" must be true or false`, nil},
		{"BadEndpoint", "dynamodb://tbl?endpoint=ftp://host", "must be an http:// or https:// URL", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsEnv(t, tc.env)
			_, err := store.Open(context.Background(), tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) = %v; want an error containing %q", tc.url, err, tc.want)
			}
		})
	}
}

// TestEscapedNames stores attributes named like the key attributes, like the escape, and like
// expression placeholders and reserved words, and checks that rows and keys come back intact.
func TestEscapedNames(t *testing.T) {
	ctx := context.Background()
	tbl := testtables.Dynamo(t, "names")
	row := store.Attrs{"pk": "a", "sk": int64(1), "~": true, "~pk": []byte{1}, "~~": "x", "Value": "v", "a.b": "dot", "#n0": "n", ":v0": "v"}
	k := store.Key{Partition: "part", Sort: "sort"}
	if err := tbl.Put(ctx, k, row); err != nil {
		t.Fatal(err)
	}
	r, err := tbl.Update(ctx, k, store.And(store.Equal(store.Attr("pk"), "a"), store.Exists(store.Attr("~"))),
		store.Update{store.RemoveAttr(store.Attr("sk")), store.AddInt(store.Attr("~~pk"), 2)})
	if err != nil || !r.Applied {
		t.Fatalf("Update = %+v, %v", r, err)
	}
	delete(row, "sk")
	row["~~pk"] = int64(2)
	rows, err := tbl.Scan(ctx, "part", store.ScanOptions{})
	if err != nil || len(rows) != 1 || rows[0].Key != k || !equalAttrs(rows[0].Attrs, row) {
		t.Fatalf("Scan = %+v, %v; want key %v with %v", rows, err, k, row)
	}
	item, err := tbl.Driver().(*dynamostore.Driver).Client().GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(strings.TrimPrefix(tbl.Name(), "dynamodb://")),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "part"}, "sk": &types.AttributeValueMemberS{Value: "sort"}},
	})
	if err != nil || item.Item["~pk"].(*types.AttributeValueMemberS).Value != "a" || item.Item["~~~pk"] == nil {
		t.Fatalf("stored item %v, %v; want row attribute pk in ~pk and ~~pk in ~~~pk", item.Item, err)
	}
}

func TestKeys(t *testing.T) {
	ctx := context.Background()
	d := testtables.Dynamo(t, "keys").Driver()
	for _, k := range []store.Key{
		{Partition: "p", Sort: ""},
		{Partition: "p", Sort: "\xff"},
		{Partition: strings.Repeat("p", 2049), Sort: "s"},
		{Partition: "p", Sort: strings.Repeat("s", 1025)},
	} {
		if _, _, err := d.Get(ctx, k); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Get with key %.20s: %v; want store.ErrInvalid", k, err)
		}
	}
	k := store.Key{Partition: strings.Repeat("p", 2048), Sort: strings.Repeat("s", 1024)}
	if _, err := d.Update(ctx, k, store.Always(), store.Update{store.SetAttr(store.Attr("s"), "\xff")}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("setting a string that is not UTF-8: %v; want store.ErrInvalid", err)
	}
	if _, err := d.Update(ctx, k, store.Always(), nil); err != nil {
		t.Errorf("an empty update of a row with the longest keys: %v", err)
	}
	if _, found, err := d.Get(ctx, k); err != nil || !found {
		t.Errorf("an empty update did not create the row: %v, %v", found, err)
	}
}

// TestPagination scans a partition larger than one Query response (1 MB).
func TestPagination(t *testing.T) {
	ctx := context.Background()
	d := testtables.Dynamo(t, "pages").Driver()
	blob := bytes.Repeat([]byte{'x'}, 300_000)
	var sorts []string
	for i := range 5 {
		k := store.Key{Partition: "p", Sort: fmt.Sprint(i)}
		if _, err := d.Update(ctx, k, store.Always(), store.Update{store.SetAttr(store.Attr("blob"), blob), store.SetAttr(store.Attr("i"), int64(i))}); err != nil {
			t.Fatal(err)
		}
		sorts = append(sorts, k.Sort)
	}
	for _, tc := range []struct {
		opts store.ScanOptions
		want []string
	}{
		{store.ScanOptions{}, sorts},
		{store.ScanOptions{Reverse: true, Limit: 4}, []string{"4", "3", "2", "1"}},
		{store.ScanOptions{Projection: []store.Path{store.Attr("i")}}, sorts},
	} {
		rows, err := d.Scan(ctx, "p", tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.Key.Sort)
			if r.Attrs["i"] != int64(len(got)-1) && !tc.opts.Reverse {
				t.Errorf("row %s has %v", r.Key, r.Attrs["i"])
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Scan %+v: sort keys %q, want %q", tc.opts, got, tc.want)
		}
	}
}

// TestTooLarge covers the limits the conformance suite does not reach: a row that grows past
// DynamoDB's limit in an update the driver cannot size beforehand is refused by DynamoDB,
// and that refusal is store.ErrTooLarge too.
func TestTooLarge(t *testing.T) {
	ctx := context.Background()
	d := testtables.Dynamo(t, "large").Driver()
	k := store.Key{Partition: "p", Sort: "s"}
	row := store.Attrs{"a": bytes.Repeat([]byte{'a'}, 300_000)}
	if _, err := d.Update(ctx, k, store.Always(), store.Update{store.SetAttr(store.Attr("a"), row["a"])}); err != nil {
		t.Fatal(err)
	}
	for _, upd := range []store.Update{
		{store.SetAttr(store.Attr("b"), bytes.Repeat([]byte{'b'}, 150_000))},            // sent, refused by DynamoDB
		{store.SetAttr(store.Attr("m").Entry("b"), bytes.Repeat([]byte{'b'}, 150_000))}, // sized on the returned row
	} {
		if _, err := d.Update(ctx, k, store.Always(), upd); !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("Update(%v...): %v; want store.ErrTooLarge", upd[0].Path, err)
		}
	}
	if got, _, err := d.Get(ctx, k); err != nil || !equalAttrs(got, row) {
		t.Errorf("the row changed: %v", err)
	}
}

// recorder is an HTTP client that records the DynamoDB operations it sends.
type recorder struct {
	next aws.HTTPClient
	mu   sync.Mutex
	ops  []string
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.ops = append(r.ops, strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810."))
	r.mu.Unlock()
	return r.next.Do(req)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

// TestUpdateBatch checks which batches go in one transaction, and that a cancelled one falls
// back to per-update results.
func TestUpdateBatch(t *testing.T) {
	ctx := context.Background()
	var rec *recorder
	client := testtables.DynamoClient(t, func(o *dynamodb.Options) {
		rec = &recorder{next: o.HTTPClient}
		o.HTTPClient = rec
	})
	tbl := testtables.DynamoOn(t, client, "batch")
	key := func(s string) store.Key { return store.Key{Partition: "p", Sort: s} }
	create := func(s string) store.BatchUpdate {
		return store.BatchUpdate{Key: key(s), Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), s), store.SetAttr(store.Attr("m").Entry("k"), int64(1))}}
	}
	rec.take()
	for _, tc := range []struct {
		name    string
		ups     []store.BatchUpdate
		applied []bool
		ops     []string
	}{
		{"Creates", []store.BatchUpdate{create("a"), create("b"), create("c")}, []bool{true, true, true}, []string{"TransactWriteItems"}},
		{"OneExists", []store.BatchUpdate{create("d"), create("a")}, []bool{true, false}, []string{"TransactWriteItems", "UpdateItem", "UpdateItem"}},
		{"NotCreates", []store.BatchUpdate{create("e"), {Key: key("a"), Cond: store.Always(), Update: store.Update{store.AddInt(store.Attr("n"), 1)}}}, []bool{true, true}, []string{"UpdateItem", "UpdateItem"}},
		{"SameRow", []store.BatchUpdate{create("f"), create("f")}, []bool{true, false}, []string{"UpdateItem", "UpdateItem"}},
	} {
		rs, err := tbl.UpdateBatch(ctx, tc.ups)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, r := range rs {
			want := store.Attrs{"v": tc.ups[i].Key.Sort, "m": map[string]any{"k": int64(1)}}
			if r.Applied != tc.applied[i] || (r.Applied && tc.ups[i].Cond.Op != store.OpTrue && !equalAttrs(r.Attrs, want)) || (!r.Applied && r.Attrs["v"] != tc.ups[i].Key.Sort) {
				t.Errorf("%s: result %d = %+v, want applied=%v with the row", tc.name, i, r, tc.applied[i])
			}
		}
		if ops := rec.take(); !slices.Equal(ops, tc.ops) {
			t.Errorf("%s: requests %v, want %v", tc.name, ops, tc.ops)
		}
	}
}

// BenchmarkUpdateBatch compares a batch of four create-if-absent updates (an intent and its
// read-log entries, say) sent as one transaction with the same updates sent one by one.
func BenchmarkUpdateBatch(b *testing.B) {
	for _, mode := range []string{"Transaction", "OneByOne"} {
		b.Run(mode, func(b *testing.B) {
			d := testtables.Dynamo(b, "batch").Driver().(*dynamostore.Driver)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				ups := make([]store.BatchUpdate, 4)
				for j := range ups {
					ups[j] = store.BatchUpdate{Key: store.Key{Partition: fmt.Sprint("i|", i), Sort: fmt.Sprint("r|", j)}, Cond: store.RowAbsent(),
						Update: store.Update{store.SetAttr(store.Attr("Kind"), "read"), store.SetAttr(store.Attr("Value"), []byte(`{"balance":100}`))}}
				}
				var err error
				if mode == "Transaction" {
					_, err = d.UpdateBatch(ctx, ups)
				} else {
					_, err = store.UpdateEach(ctx, d, ups)
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// canned is an HTTP client that answers DescribeTable with a good table and everything else
// with one fixed response.
type canned struct {
	status int
	body   string
}

func (c canned) Do(req *http.Request) (*http.Response, error) {
	status, body := c.status, c.body
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".DescribeTable") {
		status, body = 200, `{"Table":{"TableName":"tbl","TableStatus":"ACTIVE",`+
			`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],`+
			`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}]}}`
	}
	return &http.Response{
		StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req,
	}, nil
}

// TestErrors checks how the driver maps what goes wrong onto the store's sentinel errors.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	k := store.Key{Partition: "p", Sort: "s"}
	apiError := func(typ, msg string) string {
		return `{"__type":"com.amazonaws.dynamodb.v20120810#` + typ + `","message":"` + msg + `"}`
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
		text   string
	}{
		{"Throttled", 400, apiError("ProvisionedThroughputExceededException", "slow down"), store.ErrUnavailable, "slow down"},
		{"RequestLimit", 400, apiError("RequestLimitExceeded", "too many"), store.ErrUnavailable, "too many"},
		{"ServerError", 500, apiError("InternalServerError", "oops"), store.ErrUnavailable, "oops"},
		{"Unavailable", 503, "<html>busy</html>", store.ErrUnavailable, "503"},
		{"ItemTooLarge", 400, apiError("ValidationException", "Item size has exceeded the maximum allowed size"), store.ErrTooLarge, "maximum allowed size"},
		{"Validation", 400, apiError("ValidationException", "bad expression"), store.ErrInvalid, "bad expression"},
		{"AccessDenied", 400, apiError("AccessDeniedException", "not yours"), nil, "not yours"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := testtables.DynamoClient(t, quickRetries(3), func(o *dynamodb.Options) { o.HTTPClient = canned{tc.status, tc.body} })
			d, err := dynamostore.New(ctx, client, "tbl", dynamostore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Update(ctx, k, store.Always(), store.Update{store.SetAttr(store.Attr("a"), int64(1))})
			for _, sentinel := range []error{store.ErrUnavailable, store.ErrTooLarge, store.ErrInvalid} {
				if errors.Is(err, sentinel) != (sentinel == tc.want) {
					t.Errorf("err = %v; want one wrapping %v", err, tc.want)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v; want it to say %q", err, tc.text)
			}
		})
	}

	t.Run("Unreachable", func(t *testing.T) {
		client := testtables.DynamoClient(t, quickRetries(2), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:1") })
		if _, err := dynamostore.New(ctx, client, "tbl", dynamostore.Options{}); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("New with nothing listening: %v; want store.ErrUnavailable", err)
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		d := testtables.Dynamo(t, "cancel").Driver()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := d.Get(cctx, k); !errors.Is(err, context.Canceled) {
			t.Errorf("Get with a cancelled context: %v; want context.Canceled", err)
		}
	})

	t.Run("TableDeleted", func(t *testing.T) {
		d := testtables.Dynamo(t, "deleted").Driver()
		if err := d.(store.Dropper).Drop(ctx); err != nil {
			t.Fatal(err)
		}
		_, _, err := d.Get(ctx, k)
		if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "deleted_") {
			t.Errorf("Get on a deleted table: %v; want an error naming the table", err)
		}
	})
}
