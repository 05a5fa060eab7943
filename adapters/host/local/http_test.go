package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testclock"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// crashOnce crashes the first execution step that matches, once.
type crashOnce struct {
	mu    sync.Mutex
	match func(ssf.FaultPoint) bool
}

func (c *crashOnce) Inject(_ context.Context, p ssf.FaultPoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.match != nil && c.match(p) {
		c.match = nil
		return ssf.ErrCrashed
	}
	return nil
}

func (c *crashOnce) arm(match func(ssf.FaultPoint) bool) {
	c.mu.Lock()
	c.match = match
	c.mu.Unlock()
}

// counter adds its input's "by" to a counter and returns the new value; a negative "by" is an
// application error.
func counter(env *ssf.Env, input json.RawMessage) (any, error) {
	var in struct{ By int64 }
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	if in.By < 0 {
		return nil, errors.New("by must not be negative")
	}
	var n int64
	if _, err := env.ReadInto("c", "n", &n); err != nil {
		return nil, err
	}
	if err := env.Write("c", "n", n+in.By); err != nil {
		return nil, err
	}
	return n + in.By, nil
}

func newServer(t *testing.T) (*httptest.Server, *ssf.Runtime, *crashOnce, *local.Host) {
	t.Helper()
	h := local.NewHost()
	faults := &crashOnce{}
	rt, err := h.Add(ssf.Config{
		Name: "counter", Store: store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://counter"),
		Handler: counter, RelaunchDelay: time.Nanosecond, Faults: faults,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(local.HTTPHandler(h))
	t.Cleanup(func() { srv.Close(); h.Close() })
	return srv, rt, faults, h
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func do(t *testing.T, method, url, key, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, url, raw, err)
		}
	}
	return r
}

func expect(t *testing.T, what string, r reply, status int, fields map[string]any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d (body %v)", what, r.status, status, r.body)
	}
	for k, want := range fields {
		if got := r.body[k]; got != want {
			t.Fatalf("%s: %s = %v, want %v (body %v)", what, k, got, want, r.body)
		}
	}
}

func TestHTTPInvokeIsIdempotent(t *testing.T) {
	srv, rt, _, _ := newServer(t)
	u := srv.URL + "/v1/ssf/counter"

	first := do(t, "POST", u, "k1", `{"by": 2}`)
	expect(t, "first", first, 200, map[string]any{"instance_id": "k1", "status": "done", "output": 2.0})
	if h := first.header.Get(local.ReplayedHeader); h != "" {
		t.Fatalf("the first answer says %s: %q", local.ReplayedHeader, h)
	}
	runs := rt.Stats().Executions
	repeat := do(t, "POST", u, "k1", `{"by": 2}`)
	expect(t, "repeat", repeat, 200, map[string]any{"instance_id": "k1", "output": 2.0})
	if h := repeat.header.Get(local.ReplayedHeader); h != "true" {
		t.Fatalf("a replayed answer says %s: %q, want true", local.ReplayedHeader, h)
	}
	if got := rt.Stats().Executions; got != runs {
		t.Fatalf("repeating a request with the same key ran the handler again (%d executions, want %d)", got, runs)
	}
	expect(t, "same key, another body", do(t, "POST", u, "k1", `{"by": 3}`), 409, nil)
	// Between what an intent row holds and the HTTP cap: refused for good, never "retry".
	expect(t, "body over the input limit", do(t, "POST", u, "k-big", `"`+strings.Repeat("x", ssf.MaxInputBytes)+`"`), 413, nil)
	expect(t, "new key", do(t, "POST", u, "k2", `{"by": 3}`), 200, map[string]any{"output": 5.0})

	anon := do(t, "POST", u, "", `{"by": 1}`)
	expect(t, "no key", anon, 200, map[string]any{"output": 6.0})
	if id, _ := anon.body["instance_id"].(string); len(id) != 36 {
		t.Fatalf("without an Idempotency-Key the instance id should be a new UUID, got %q", id)
	}

	expect(t, "application error", do(t, "POST", u, "k3", `{"by": -1}`), 200,
		map[string]any{"status": "done", "error": "by must not be negative"})

	expect(t, "instance", do(t, "GET", u+"/instances/k2", "", ""), 200, map[string]any{"status": "done", "output": 5.0})
	expect(t, "unknown instance", do(t, "GET", u+"/instances/nope", "", ""), 404, nil)

	items := do(t, "GET", u+"/items", "", "")
	expect(t, "items", items, 200, map[string]any{"ssf": "counter"})
	if got := items.body["items"].(map[string]any)["c/n"]; got != 6.0 {
		t.Fatalf("items: c/n = %v, want 6 (body %v)", got, items.body)
	}
	expect(t, "healthz", do(t, "GET", srv.URL+"/healthz", "", ""), 200, map[string]any{"status": "ok"})
}

func TestHTTPErrors(t *testing.T) {
	srv, _, _, _ := newServer(t)
	u := srv.URL + "/v1/ssf/counter"
	expect(t, "bad JSON", do(t, "POST", u, "", `{"by": `), 400, nil)
	expect(t, "unknown SSF", do(t, "POST", srv.URL+"/v1/ssf/nope", "", `{}`), 404, nil)
	expect(t, "unknown SSF items", do(t, "GET", srv.URL+"/v1/ssf/nope/items", "", ""), 404, nil)
	expect(t, "key too long", do(t, "POST", u, strings.Repeat("k", 500), `{}`), 400, nil)
	expect(t, "body too large", do(t, "POST", u, "", `"`+strings.Repeat("x", local.MaxRequestBytes)+`"`), 413, nil)
	expect(t, "unknown route", do(t, "GET", srv.URL+"/v2/anything", "", ""), 404, nil)
	expect(t, "wrong method", do(t, "GET", u, "", ""), 405, nil)
}

func TestHTTPAbandonedExecution(t *testing.T) {
	srv, rt, faults, h := newServer(t)
	u := srv.URL + "/v1/ssf/counter"

	// A crash before the intent exists: the request was not accepted, the client must retry.
	faults.arm(func(p ssf.FaultPoint) bool { return p.Op == "get" && !p.After })
	r := do(t, "POST", u, "k1", `{"by": 2}`)
	expect(t, "crash before acceptance", r, 503, nil)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	expect(t, "retry", do(t, "POST", u, "k1", `{"by": 2}`), 200, map[string]any{"output": 2.0})

	// A crash after the write took effect: accepted, and left to the intent collector.
	faults.arm(func(p ssf.FaultPoint) bool {
		return p.After && p.Writes("d|c|n")
	})
	r = do(t, "POST", u, "k2", `{"by": 3}`)
	expect(t, "crash after the write", r, 202, map[string]any{"instance_id": "k2", "status": "pending"})
	loc := r.header.Get("Location")
	if loc != "/v1/ssf/counter/instances/k2" {
		t.Fatalf("Location = %q", loc)
	}
	expect(t, "pending", do(t, "GET", srv.URL+loc, "", ""), 200, map[string]any{"status": "pending"})
	if _, err := rt.CollectIntents(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	// The write is not repeated: 2 + 3, not 2 + 3 + 3.
	expect(t, "finished by the intent collector", do(t, "GET", srv.URL+loc, "", ""), 200, map[string]any{"status": "done", "output": 5.0})
	expect(t, "repeat after completion", do(t, "POST", u, "k2", `{"by": 3}`), 200, map[string]any{"output": 5.0})
}

// A key whose instance finished and was collected answers with its result, never "retry"
// (503), and never runs the request again.
func TestHTTPCollectedKeyAnswersItsResult(t *testing.T) {
	h := local.NewHost()
	clock := testclock.New(time.Unix(1e9, 0))
	rt, err := h.Add(ssf.Config{
		Name: "counter", Store: store.NewTable(memstore.New(memstore.DefaultMaxRowBytes), "mem://counter"),
		Handler: counter, Lifetime: time.Minute, GCBound: 2 * time.Minute, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(local.HTTPHandler(h))
	t.Cleanup(func() { srv.Close(); h.Close() })
	u := srv.URL + "/v1/ssf/counter"
	expect(t, "first", do(t, "POST", u, "k1", `{"by": 2}`), 200, map[string]any{"output": 2.0})
	for range 2 { // stamp, then collect
		clock.Advance(3 * time.Minute)
		if _, err := rt.CollectGarbage(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	runs := rt.Stats().Executions
	expect(t, "collected key", do(t, "POST", u, "k1", `{"by": 2}`), 200, map[string]any{"status": "done", "output": 2.0})
	if got := rt.Stats().Executions; got != runs {
		t.Fatalf("a collected key ran its handler again (%d executions, want %d)", got, runs)
	}
	expect(t, "collected instance", do(t, "GET", u+"/instances/k1", "", ""), 200, map[string]any{"status": "done", "output": 2.0})
	expect(t, "state unchanged", do(t, "POST", u, "k2", `{"by": 0}`), 200, map[string]any{"output": 2.0})

	clock.Advance(rt.Config().KeyRetention + time.Second)
	if _, err := rt.CollectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	expired := do(t, "POST", u, "k1", `{"by": 2}`)
	expect(t, "expired key", expired, 410, nil)
	if msg, _ := expired.body["error"].(string); !strings.Contains(msg, "new idempotency key") {
		t.Fatalf("expired key: the error does not say what to do: %q", msg)
	}
	expect(t, "expired instance", do(t, "GET", u+"/instances/k1", "", ""), 200, map[string]any{"status": "expired"})
	expect(t, "expired key, another body", do(t, "POST", u, "k1", `{"by": 5}`), 409, nil)
	expect(t, "state unchanged after expiry", do(t, "POST", u, "k3", `{"by": 0}`), 200, map[string]any{"output": 2.0})
}

func TestHTTPRefusesAKeyThatIsNotUTF8(t *testing.T) {
	srv, rt, _, _ := newServer(t)
	expect(t, "key not UTF-8", do(t, "POST", srv.URL+"/v1/ssf/counter", "k\xff", `{"by": 1}`), 400, nil)
	if got := rt.Stats().Executions; got != 0 {
		t.Fatalf("%d executions, want none", got)
	}
}
