package dynamostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/internal/crashkit"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// lossy is an HTTP client that delivers every request to moto but, for the writes drop picks,
// throws the response away and reports a reset connection: the write applied and its answer
// was lost, as when a connection dies (moto's kept-alive connections sometimes do) or a
// request to DynamoDB times out. The SDK retries the write.
type lossy struct {
	next aws.HTTPClient
	drop func(n int) bool // n counts the writes, from 1

	mu        sync.Mutex
	writes    int
	dropped   int
	ambiguous int // retries that found their own write and failed their condition
}

var writeOps = map[string]bool{"UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true}

func (l *lossy) Do(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	retried := !strings.HasPrefix(req.Header.Get("Amz-Sdk-Request"), "attempt=1;")
	resp, err := l.next.Do(req)
	if err != nil || !writeOps[op] {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	if retried && (bytes.Contains(body, []byte("ConditionalCheckFailed")) || bytes.Contains(body, []byte("TransactionCanceled"))) {
		l.ambiguous++
	}
	if l.drop(l.writes) {
		l.dropped++
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, nil
}

func (l *lossy) counts() (writes, dropped, ambiguous int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes, l.dropped, l.ambiguous
}

// quickRetries keeps the SDK's retry policy but without waiting, so tests stay fast.
func quickRetries(attempts int) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = attempts
			so.RateLimiter = ratelimit.None
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
}

// lossyTable returns a fresh table whose client loses the responses drop picks.
func lossyTable(t suite.T, attempts int, drop func(int) bool) (*store.Table, *lossy) {
	var l *lossy
	client := testtables.DynamoClient(t, quickRetries(attempts), func(o *dynamodb.Options) {
		l = &lossy{next: o.HTTPClient, drop: drop}
		o.HTTPClient = l
	})
	return testtables.DynamoOn(t, client, "lossy"), l
}

// TestLostResponseAmbiguity shows what a caller of the driver sees when a conditional write
// applies and its response is lost: the SDK's retry finds the condition false, because the
// write it is retrying changed the row, and the update is reported as not applied, with the row
// as the write left it. Without retries the caller gets store.ErrUnavailable ("may or may not
// have applied"). Either way only the row can tell; the runtime's conditions are written so
// that it does (TestExactlyOnceUnderLostResponses).
func TestLostResponseAmbiguity(t *testing.T) {
	ctx := context.Background()
	first := func(n int) bool { return n == 1 }
	k := store.Key{Partition: "p", Sort: "row"}

	t.Run("CreateIfAbsent", func(t *testing.T) {
		tbl, l := lossyTable(t, 3, first)
		r, err := tbl.Update(ctx, k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("owner"), "me")})
		if err != nil {
			t.Fatal(err)
		}
		if r.Applied || r.Attrs["owner"] != "me" {
			t.Fatalf("got %+v; want not applied, showing the row the lost write created", r)
		}
		if _, dropped, ambiguous := l.counts(); dropped != 1 || ambiguous != 1 {
			t.Fatalf("dropped %d responses and saw %d ambiguous retries, want 1 and 1", dropped, ambiguous)
		}
	})

	t.Run("CompareAndSwap", func(t *testing.T) {
		tbl, _ := lossyTable(t, 3, func(n int) bool { return n == 2 })
		if err := tbl.Put(ctx, k, store.Attrs{"v": int64(1)}); err != nil {
			t.Fatal(err)
		}
		r, err := tbl.Update(ctx, k, store.Equal(store.Attr("v"), int64(1)), store.Update{store.AddInt(store.Attr("v"), 1)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Applied || r.Attrs["v"] != int64(2) {
			t.Fatalf("got %+v; want not applied with v=2, the lost write's result", r)
		}
	})

	t.Run("UnconditionalAddAppliesTwice", func(t *testing.T) {
		// Why the runtime never relies on an unconditional non-idempotent update: the retry
		// applies it again, and nothing reports it.
		tbl, _ := lossyTable(t, 3, first)
		r, err := tbl.Update(ctx, k, store.Always(), store.Update{store.AddInt(store.Attr("n"), 1)})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Applied || r.Attrs["n"] != int64(2) {
			t.Fatalf("got %+v; want applied with n=2 (applied twice)", r)
		}
	})

	t.Run("Transaction", func(t *testing.T) {
		// DynamoDB makes a retried TransactWriteItems idempotent (the SDK sends the same
		// ClientRequestToken); moto does not, so the retry is cancelled and every update of
		// the batch is reported as not applied, showing the rows as the lost write left them.
		tbl, _ := lossyTable(t, 3, first)
		ups := []store.BatchUpdate{
			{Key: store.Key{Partition: "p", Sort: "a"}, Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "a")}},
			{Key: store.Key{Partition: "p", Sort: "b"}, Cond: store.RowAbsent(), Update: store.Update{store.SetAttr(store.Attr("v"), "b")}},
		}
		rs, err := tbl.UpdateBatch(ctx, ups)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Applied || r.Attrs["v"] != ups[i].Update[0].Value {
				t.Errorf("update %d: got %+v; want not applied, showing the lost write", i, r)
			}
		}
	})

	t.Run("NoRetries", func(t *testing.T) {
		tbl, _ := lossyTable(t, 1, first)
		_, err := tbl.Update(ctx, k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("owner"), "me")})
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("err = %v, want store.ErrUnavailable", err)
		}
		if a, found, err := tbl.Get(ctx, k); err != nil || !found || a["owner"] != "me" {
			t.Fatalf("Get = %v, %v, %v; the write applied although its caller got an error", a, found, err)
		}
	})
}

// TestExactlyOnceUnderLostResponses runs the bank example (the crash-injection suite's
// application: nested synchronous calls, an asynchronous call, conditional writes) on tables
// whose client loses the response of every fifth write, so the SDK retries writes that already
// applied. Every transfer must apply exactly once: the results and the final state equal a clean
// run's, and the application's invariants hold.
func TestExactlyOnceUnderLostResponses(t *testing.T) {
	transfers := []bank.Transfer{
		{From: "alice", To: "bob", Amount: 30},
		{From: "bob", To: "carol", Amount: 500}, // insufficient funds
		{From: "carol", To: "alice", Amount: 50},
	}
	clean := runBank(t, testtables.Dynamo, transfers)
	var losers []*lossy
	var mu sync.Mutex
	lossyFactory := func(t suite.T, _ string) *store.Table {
		tbl, l := lossyTable(t, 3, func(n int) bool { return n%5 == 0 })
		mu.Lock()
		losers = append(losers, l)
		mu.Unlock()
		return tbl
	}
	got := runBank(t, lossyFactory, transfers)
	var dropped, ambiguous int
	for _, l := range losers {
		_, d, a := l.counts()
		dropped, ambiguous = dropped+d, ambiguous+a
	}
	t.Logf("%d responses lost; %d retries found their own write and failed their condition", dropped, ambiguous)
	if dropped == 0 || ambiguous == 0 {
		t.Fatalf("lost %d responses with %d ambiguous retries: the test exercised nothing", dropped, ambiguous)
	}
	if !reflect.DeepEqual(clean.receipts, got.receipts) {
		t.Fatalf("results differ from a clean run\nclean %+v\ngot   %+v", clean.receipts, got.receipts)
	}
	if c, g := clean.items.Comparable(), got.items.Comparable(); !reflect.DeepEqual(c, g) {
		t.Fatalf("final state differs from a clean run\nclean %v\ngot   %v", c, g)
	}
	opening := map[string]int64{"alice": 100, "bob": 100, "carol": 100}
	byID := map[string]bank.Transfer{}
	for i, tr := range transfers {
		byID[transferID(i)] = tr
	}
	if err := bank.Check(opening, got.receipts, byID, got.items); err != nil {
		t.Fatalf("invariants violated: %v", err)
	}
}

type bankOutcome struct {
	receipts map[string]bank.Receipt
	items    bank.Items
}

func transferID(i int) string { return fmt.Sprintf("transfer-%03d", i) }

// runBank opens the accounts and runs transfers one at a time, letting the intent collectors
// finish whatever failed, as tests/crashtest does.
func runBank(t *testing.T, newStore testtables.Factory, transfers []bank.Transfer) bankOutcome {
	ctx := context.Background()
	host := local.NewHost()
	host.Sequential = true
	t.Cleanup(host.Close)
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	rts := map[string]*ssf.Runtime{}
	for name, h := range bank.Handlers() {
		rt, err := host.Add(ssf.Config{
			Name: name, Store: newStore(t, name), Handler: h,
			RowCapacity: 2, Lifetime: time.Hour, GCBound: 2 * time.Hour, RelaunchDelay: time.Nanosecond,
			Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		rts[name] = rt
	}
	for _, a := range []string{"alice", "bob", "carol"} {
		crashkit.Submit(t, host, rts[bank.Accounts], "open-"+a, bank.AccountOp{Op: "open", Account: a, Amount: 100})
	}
	for i, tr := range transfers {
		crashkit.Submit(t, host, rts[bank.Teller], transferID(i), tr)
		crashkit.Drain(t, host, clock, rts)
	}
	out := bankOutcome{receipts: map[string]bank.Receipt{}}
	for i := range transfers {
		st, err := rts[bank.Teller].Intent(ctx, transferID(i))
		if err != nil || !st.Done {
			t.Fatalf("transfer %d not finished (err %v)", i, err)
		}
		var r bank.Receipt
		if err := json.Unmarshal(st.Result.Output, &r); err != nil {
			t.Fatalf("transfer %d: result %+v: %v", i, st.Result, err)
		}
		out.receipts[transferID(i)] = r
	}
	items, err := bank.Snapshot(ctx, rts)
	if err != nil {
		t.Fatal(err)
	}
	out.items = items
	return out
}
