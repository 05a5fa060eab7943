package httphost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvPeers(t *testing.T) {
	base := map[string]string{"SSFKIT_SSF": "teller", "SSFKIT_ENVIRONMENT": "bank", "SSFKIT_STORE": "mem://t", "SSFKIT_QUEUE": "mem://q"}
	base["SSFKIT_PEERS"] = `{"accounts":"https://bank-accounts.azurewebsites.net"}`
	c, err := host.ConfigFromEnv(env(base))
	if err != nil || c.Peers["accounts"] != "https://bank-accounts.azurewebsites.net" {
		t.Fatalf("%+v %v", c, err)
	}
	for raw, want := range map[string]string{
		`["accounts"]`:            "SSFKIT_PEERS must be a JSON object",
		`{"accounts":"accounts"}`: `the URL of accounts, "accounts", is not an http(s) URL`,
	} {
		base["SSFKIT_PEERS"] = raw
		if _, err := host.ConfigFromEnv(env(base)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SSFKIT_PEERS=%s: got %v, want an error saying %q", raw, err, want)
		}
	}
}

// platformFixture is what one platform puts around the functions: the URLs it gives them, how
// it authenticates callers, how it delivers queued starts and timer ticks.
type platformFixture struct {
	platform Platform
	// url is the base URL of an SSF's function on the platform.
	url func(name string) string
	// options are the function's ways to reach its peers as the SSF caller, and to check its own
	// callers.
	options func(t *testing.T, dial func(host string) string, caller string) Options
	// front is the platform's front end before the function at base: it refuses a call (a
	// status) or hands it on, as the platform does (Cloud Run strips the signature of the token
	// it checked, Azure's front end adds its headers).
	front func(r *http.Request, base string) (*http.Request, int)
	// platformAuth adds what the platform's own delivery to route of SSF name carries (Pub/Sub's
	// and Cloud Scheduler's ID tokens; nothing for the Functions host's invocations).
	platformAuth func(t *testing.T, r *http.Request, name string, route Route)
	// queued wraps a queued message as the platform posts it to /queue.
	queued func(m *queue.Message) []byte
	// timer is the body of a timer or scheduler tick.
	timer []byte
	// report extracts a collector's report from the response body.
	report func(body []byte) (json.RawMessage, error)
}

// staticCredential is an Entra ID credential handing out one token.
type staticCredential string

func (c staticCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// azureQueued is a queue trigger's custom-handler invocation of m.
func azureQueued(m *queue.Message) []byte {
	body, _ := json.Marshal(string(m.Body)) // the host passes a JSON message as a JSON string
	return []byte(fmt.Sprintf(`{"Data":{"message":%s},"Metadata":{"Id":%q,"DequeueCount":"%d"}}`, body, m.ID, m.Attempts))
}

// pubSubQueued is a Pub/Sub push request of m.
func pubSubQueued(m *queue.Message) []byte {
	b, _ := json.Marshal(map[string]any{"message": map[string]any{"data": m.Body, "messageId": m.ID}, "subscription": "projects/p/subscriptions/s", "deliveryAttempt": m.Attempts})
	return b
}

// azureFixture stands in for Azure: Resource Manager answers listkeys for the SSFs' identity
// token, and rotates every app's key after its first listing, so the first call to each peer is
// refused and the host must list the key again. The front end checks keys on the HTTP routes
// (/api/...) and adds its X-ARR-LOG-ID header; the other routes are the Functions host's own
// invocations, which reach the handler directly.
func azureFixture(t *testing.T) platformFixture {
	var mu sync.Mutex
	keys, listings := map[string]string{}, map[string]int{}
	keyOf := func(app string) string {
		mu.Lock()
		defer mu.Unlock()
		if keys[app] == "" {
			keys[app] = "stale-" + app
		}
		return keys[app]
	}
	const sites = "/subscriptions/s/resourceGroups/bank/providers/Microsoft.Web/sites"
	arm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app, ok := strings.CutPrefix(r.URL.Path, sites+"/")
		app, ok2 := strings.CutSuffix(app, "/host/default/listkeys")
		if r.Method != http.MethodPost || !ok || !ok2 || r.Header.Get("Authorization") != "Bearer identity-token" || r.URL.Query().Get("api-version") == "" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		key := keyOf(app)
		mu.Lock()
		if listings[app]++; listings[app] == 2 {
			keys[app] = "fresh-" + app // rotated: the first listing handed out a key that no longer works
			key = keys[app]
		}
		mu.Unlock()
		fmt.Fprintf(w, `{"masterKey":"m","functionKeys":{"default":%q}}`, key)
	}))
	t.Cleanup(arm.Close)
	app := func(base string) string {
		return strings.TrimSuffix(strings.TrimPrefix(base, "https://"), ".azurewebsites.net")
	}
	return platformFixture{
		platform: Azure,
		url:      func(name string) string { return "https://bank-" + name + ".azurewebsites.net" },
		options: func(t *testing.T, dial func(string) string, caller string) Options {
			v, err := NewAzureKeyVerifier(AzureKeyConfig{Credential: staticCredential("identity-token"), Site: sites + "/bank-" + caller, Management: arm.URL})
			if err != nil {
				t.Fatal(err)
			}
			return Options{Auth: &AzureFunctionKeys{Credential: staticCredential("identity-token"), Sites: sites, Management: arm.URL}, Client: redirectingClient(dial), Verifier: v}
		},
		front: func(r *http.Request, base string) (*http.Request, int) {
			if !strings.HasPrefix(r.URL.Path, "/api/") {
				return r, 0 // the Functions host's invocation of a queue or timer function
			}
			mu.Lock()
			admitted := listings[app(base)] >= 2 && r.Header.Get("x-functions-key") == keys[app(base)]
			mu.Unlock()
			if !admitted {
				return nil, http.StatusUnauthorized
			}
			r.Header.Set("X-ARR-LOG-ID", "00000000-0000-0000-0000-000000000001")
			return r, 0
		},
		platformAuth: func(*testing.T, *http.Request, string, Route) {},
		queued:       azureQueued,
		timer:        []byte(`{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"IsPastDue":false}},"Metadata":{}}`),
		report: func(body []byte) (json.RawMessage, error) {
			var resp struct{ ReturnValue json.RawMessage }
			err := json.Unmarshal(body, &resp)
			return resp.ReturnValue, err
		},
	}
}

// serviceAccount is the email of SSF name's service account in the bank's project.
func serviceAccount(name string) string {
	return "bank-" + name + "@ssfkit-bank.iam.gserviceaccount.com"
}

// bankScheduler is the bank environment's Cloud Scheduler service account.
const bankScheduler = "bank-sched-0a1b2c@ssfkit-bank.iam.gserviceaccount.com"

// cloudRunFixture stands in for Cloud Run: callers present Google ID tokens, signed by keys the
// fixture publishes as a JWKS on 127.0.0.1, for the callee's URL. The front end checks the
// token of X-Serverless-Authorization, or else of Authorization, against the service's invokers
// and strips its signature, as Cloud Run does.
func cloudRunFixture(t *testing.T) platformFixture {
	g := newGoogleFixture(t)
	names := []string{bank.Teller, bank.Accounts, bank.Audit}
	url := func(name string) string { return "https://bank-" + name + "-123456.europe-west1.run.app" }
	token := func(email, audience string) string {
		c := g.claims(email, audience)
		c["iat"], c["exp"] = time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
		return g.sign(t, c)
	}
	invokers := map[string]bool{bankScheduler: true}
	for _, n := range names {
		invokers[serviceAccount(n)] = true
	}
	return platformFixture{
		platform: CloudRun,
		url:      url,
		options: func(t *testing.T, dial func(string) string, caller string) Options {
			peers := []string{}
			for _, n := range names {
				peers = append(peers, serviceAccount(n)) // every SSF of the bank is a peer of the others, and itself
			}
			v, err := NewGoogleIDTokenVerifier(GoogleIDTokenConfig{Audience: url(caller), Keys: &KeySet{URL: g.jwks.URL},
				Callers: map[Route][]string{RouteSSF: peers, RouteSpawn: peers, RouteQueue: {serviceAccount(caller)},
					RouteIntentCollector: {bankScheduler}, RouteGarbageCollector: {bankScheduler}},
				FrontEndVerified: []Route{RouteQueue, RouteIntentCollector, RouteGarbageCollector}})
			if err != nil {
				t.Fatal(err)
			}
			return Options{Auth: &GoogleIDTokens{NewSource: func(_ context.Context, audience string) (oauth2.TokenSource, error) {
				return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token(serviceAccount(caller), audience), Expiry: time.Now().Add(time.Hour)}), nil
			}}, Client: redirectingClient(dial), Verifier: v}
		},
		front: func(r *http.Request, base string) (*http.Request, int) {
			header := "X-Serverless-Authorization"
			if r.Header.Get(header) == "" {
				header = "Authorization"
			}
			raw, ok := strings.CutPrefix(r.Header.Get(header), "Bearer ")
			claims := jwt.MapClaims{}
			_, err := jwt.Parse(raw, func(*jwt.Token) (any, error) { return &g.keys["k1"].PublicKey, nil }, jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(base))
			if _, _, perr := jwt.NewParser().ParseUnverified(raw, claims); !ok || err != nil || perr != nil {
				return nil, http.StatusUnauthorized
			}
			if email, _ := claims["email"].(string); !invokers[email] {
				return nil, http.StatusForbidden
			}
			r.Header.Set(header, "Bearer "+stripped(raw))
			return r, 0
		},
		platformAuth: func(t *testing.T, r *http.Request, name string, route Route) {
			email := bankScheduler
			if route == RouteQueue {
				email = serviceAccount(name) // the push subscription's token is the SSF's own
			}
			r.Header.Set("Authorization", "Bearer "+token(email, url(name)))
		},
		queued: pubSubQueued,
		timer:  []byte(`{}`),
		report: func(body []byte) (json.RawMessage, error) { return body, nil },
	}
}

// redirectingClient sends requests for a function's https URL to the test server serving it,
// over plain HTTP (the platforms terminate TLS in front of functions).
func redirectingClient(dial func(host string) string) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, dial(host))
	}
	return &http.Client{Transport: &schemeRewriter{tr}}
}

type schemeRewriter struct{ next http.RoundTripper }

func (s *schemeRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" && !strings.HasPrefix(r.URL.Host, "127.0.0.1") {
		r = r.Clone(r.Context())
		r.URL.Scheme = "http"
	}
	return s.next.RoundTrip(r)
}

// The bank example's three SSFs as HTTP functions on each platform: sync calls and callbacks
// cross functions over HTTP with the platform's authentication (a caller that cannot
// authenticate is refused), asynchronous starts go through the callee's /spawn onto its queue
// and come back as the platform's queue deliveries, a poison message fails so the platform
// dead-letters it, the money is conserved, and the collectors run on timer ticks.
func TestBankOverHTTP(t *testing.T) {
	for _, fixture := range []func(*testing.T) platformFixture{azureFixture, cloudRunFixture} {
		p := fixture(t)
		t.Run(string(p.platform), func(t *testing.T) { testBank(t, p) })
	}
}

func testBank(t *testing.T, p platformFixture) {
	ctx := context.Background()
	names := []string{bank.Teller, bank.Accounts, bank.Audit}
	servers, addrs := map[string]*Server{}, map[string]string{}
	var rejected atomic.Int64
	var mux sync.Map // name -> *Server, filled once all exist
	listeners := map[string]*httptest.Server{}
	for _, name := range names {
		base := p.url(name)
		listeners[name] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, status := p.front(r, base)
			if status != 0 {
				rejected.Add(1)
				http.Error(w, http.StatusText(status), status)
				return
			}
			s, _ := mux.Load(name)
			s.(*Server).ServeHTTP(w, r)
		}))
		t.Cleanup(listeners[name].Close)
		addrs[strings.TrimPrefix(base, "https://")] = listeners[name].Listener.Addr().String()
	}
	dial := func(host string) string { return addrs[host] }
	for _, name := range names {
		peers := map[string]string{}
		for _, other := range names {
			if other != name {
				peers[other] = p.url(other)
			}
		}
		cfg := host.Config{SSF: name, Environment: "bank", Store: fmt.Sprintf("mem://%s-%s", p.platform, name),
			Queue: fmt.Sprintf("mem://%s-%s", p.platform, name), Peers: peers}
		s, err := New(ctx, p.platform, cfg, bank.Handlers(), p.options(t, dial, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		servers[name] = s
		mux.Store(name, s)
	}
	// The test is a client of the teller and accounts functions, authenticated as the teller.
	client := p.options(t, dial, bank.Teller)
	call := func(name, route string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		if p.platform == Azure && (route == "/ssf" || route == "/spawn") {
			route = "/api" + route
		}
		for attempt := 0; ; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, p.url(name)+route, bytes.NewReader(b))
			if err := client.Auth.Authorize(ctx, req, name, p.url(name), attempt > 0); err != nil {
				t.Fatal(err)
			}
			resp, err := client.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			_, _ = out.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
				continue
			}
			return resp.StatusCode, out.Bytes()
		}
	}
	invoke := func(name string, req ssf.Request) ssf.Result {
		t.Helper()
		status, out := call(name, "/ssf", req)
		var res ssf.Result
		if err := json.Unmarshal(out, &res); status != http.StatusOK || err != nil || res.Err() != nil {
			t.Fatalf("invoking %s: %d %s %v", name, status, out, res.Err())
		}
		return res
	}

	opening := map[string]int64{"alice": 100, "bob": 100}
	for name, amount := range opening {
		invoke(bank.Accounts, ssf.Request{InstanceID: "open-" + name, Input: json.RawMessage(fmt.Sprintf(`{"op":"open","account":%q,"amount":%d}`, name, amount))})
	}
	transfers := map[string]bank.Transfer{"t1": {From: "alice", To: "bob", Amount: 30}, "t2": {From: "bob", To: "alice", Amount: 500}}
	receipts := map[string]bank.Receipt{}
	for id, tr := range transfers {
		in, _ := json.Marshal(tr)
		var r bank.Receipt
		if err := json.Unmarshal(invoke(bank.Teller, ssf.Request{InstanceID: id, Input: in}).Output, &r); err != nil {
			t.Fatal(err)
		}
		receipts[id] = r
	}
	// A retried request is answered from the intent, not run again.
	again, _ := json.Marshal(transfers["t1"])
	invoke(bank.Teller, ssf.Request{InstanceID: "t1", Input: again})
	if rejected.Load() == 0 && p.platform == Azure {
		t.Fatal("no call used a rotated key: the fixture did not exercise the host's key refresh")
	}

	// A caller without credentials is refused by the platform; a malformed request by the host.
	if resp, err := http.Post(listeners[bank.Teller].URL+"/ssf", "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unauthenticated call: %v %v", resp, err)
	}
	// Nor does a request that bypasses the front end get in: the host checks its caller itself.
	for _, route := range []string{"/ssf", "/api/ssf", "/spawn", "/queue", "/intent-collector", "/garbage-collector"} {
		w := httptest.NewRecorder()
		servers[bank.Teller].ServeHTTP(w, httptest.NewRequest(http.MethodPost, route, strings.NewReader(`{}`)))
		if w.Code != http.StatusUnauthorized && w.Code != http.StatusForbidden {
			t.Fatalf("%s without credentials, past the front end: %d %s", route, w.Code, w.Body)
		}
	}
	if status, out := call(bank.Teller, "/ssf", json.RawMessage(`{"instance_id": 7}`)); status != http.StatusBadRequest {
		t.Fatalf("a malformed request: %d %s, want 400", status, out)
	}

	// Audit's stamps were spawned by the teller through audit's /spawn: deliver its queue.
	if n := deliver(t, p, bank.Audit, servers[bank.Audit], listeners[bank.Audit].URL); n != 2 {
		t.Fatalf("audit's queue delivered %d starts, want 2", n)
	}
	// A start spawned by the test through /spawn, and a poison message: the second fails.
	start := ssf.Request{Kind: ssf.KindInvoke, InstanceID: "open-carol", Input: json.RawMessage(`{"op":"open","account":"carol","amount":5}`), Async: true}
	if status, out := call(bank.Accounts, "/spawn", start); status != http.StatusAccepted {
		t.Fatalf("spawn: %d %s", status, out)
	}
	if _, err := servers[bank.Accounts].fn.Queue.Send(ctx, []byte("not a request")); err != nil {
		t.Fatal(err)
	}
	if n := deliver(t, p, bank.Accounts, servers[bank.Accounts], listeners[bank.Accounts].URL); n != 1 {
		t.Fatalf("accounts' queue delivered %d starts, want 1 (and the poison message refused)", n)
	}
	opening["carol"] = 5

	runtimes := map[string]*ssf.Runtime{}
	for name, s := range servers {
		runtimes[name] = s.Runtime()
	}
	items, err := bank.Snapshot(ctx, runtimes)
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Check(opening, receipts, transfers, items); err != nil {
		t.Fatal(err)
	}

	// Timer ticks run the collectors; the garbage collector also collects the shared log the
	// teller keeps in its table.
	trimmed := logtest.LeaveTrimmed(t, servers[bank.Teller].Runtime().Config().Store)
	var ic ssf.ICReport
	var gc host.GarbageReport
	for route, report := range map[string]any{"/intent-collector": &ic, "/garbage-collector": &gc} {
		req, _ := http.NewRequest(http.MethodPost, listeners[bank.Teller].URL+route, bytes.NewReader(p.timer))
		p.platformAuth(t, req, bank.Teller, Route(route))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		raw, err := p.report(body.Bytes())
		if resp.StatusCode != http.StatusOK || err != nil || json.Unmarshal(raw, report) != nil {
			t.Fatalf("%s: %d %s %v", route, resp.StatusCode, body.Bytes(), err)
		}
	}
	if ic.Pending != 0 || gc.Stamped == 0 || gc.Logs.RecordsDeleted != trimmed {
		t.Fatalf("collectors: %+v %+v, want nothing pending, the finished instances stamped and %d log records deleted", ic, gc, trimmed)
	}
}

// deliver posts the server's queued messages to its /queue route as the platform would and
// acknowledges the accepted ones; a refused message must be the poison one, and is dropped
// (the platform would dead-letter it). It returns the number accepted.
func deliver(t *testing.T, p platformFixture, name string, s *Server, url string) int {
	t.Helper()
	ctx := context.Background()
	accepted := 0
	for {
		msgs, err := s.fn.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return accepted
		}
		for _, m := range msgs {
			req, _ := http.NewRequest(http.MethodPost, url+"/queue", bytes.NewReader(p.queued(m)))
			p.platformAuth(t, req, name, RouteQueue)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				accepted++
			case string(m.Body) != "not a request":
				t.Fatalf("the start %s was refused: %s", m.Body, resp.Status)
			}
			if err := s.fn.Queue.Ack(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The Azure module bounds a queued start's life below T through the sender: the host puts
// SSFKIT_QUEUE_MESSAGE_TTL_SECONDS into its queue's URL, and refuses it for a queue whose
// messages take no time-to-live from their sender.
func TestConfigFromEnvQueueMessageTTL(t *testing.T) {
	base := map[string]string{"SSFKIT_SSF": "teller", "SSFKIT_ENVIRONMENT": "bank", "SSFKIT_STORE": "mem://t",
		"SSFKIT_QUEUE": "azqueue://bank-teller?account=bankacct", "SSFKIT_QUEUE_MESSAGE_TTL_SECONDS": "450"}
	c, err := host.ConfigFromEnv(env(base))
	if err != nil || c.Queue != "azqueue://bank-teller?account=bankacct&message_ttl=450" {
		t.Fatalf("%q %v", c.Queue, err)
	}
	for queueURL, ttl := range map[string]string{"mem://q": "450", "azqueue://bank-teller?account=bankacct": "-5"} {
		base["SSFKIT_QUEUE"], base["SSFKIT_QUEUE_MESSAGE_TTL_SECONDS"] = queueURL, ttl
		if _, err := host.ConfigFromEnv(env(base)); err == nil || !strings.Contains(err.Error(), "SSFKIT_QUEUE_MESSAGE_TTL_SECONDS") {
			t.Errorf("%s with TTL %s: %v, want a refusal naming the setting", queueURL, ttl, err)
		}
	}
}

func TestConfigFromEnvMaxAttempts(t *testing.T) {
	base := map[string]string{"SSFKIT_SSF": "teller", "SSFKIT_ENVIRONMENT": "bank", "SSFKIT_STORE": "mem://t", "SSFKIT_QUEUE": "mem://q",
		"SSFKIT_MAX_ATTEMPTS": "3"}
	if c, err := host.ConfigFromEnv(env(base)); err != nil || c.MaxAttempts != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	base["SSFKIT_MAX_ATTEMPTS"] = "0"
	if _, err := host.ConfigFromEnv(env(base)); err == nil || !strings.Contains(err.Error(), "SSFKIT_MAX_ATTEMPTS") {
		t.Fatalf("SSFKIT_MAX_ATTEMPTS=0: %v", err)
	}
}

// A start the platform delivers for the last time (SSFKIT_MAX_RECEIVE_COUNT), and a poison one,
// are dead-lettered by the host with the reason and answered 200, so the platform does not move
// them without one; an earlier failure is answered 500. The deliveries carry attributes (on
// Azure in a queue.Envelope) and the platform's times, from which the record takes its first
// failure.
func TestQueuedStartsDeadLettered(t *testing.T) {
	inserted := time.Date(2025, 6, 15, 15, 6, 40, 0, time.UTC)
	for _, platform := range []Platform{Azure, CloudRun} {
		t.Run(string(platform), func(t *testing.T) {
			ctx := t.Context()
			name := "dl-" + string(platform)
			cfg := host.Config{SSF: bank.Teller, Environment: "bank", Store: "mem://" + name, Queue: "mem://" + name, DeadLetterQueue: "mem://" + name + "-dlq",
				MaxReceiveCount: 2, Peers: map[string]string{bank.Accounts: "http://127.0.0.1:1"}} // unreachable: every transfer fails
			// The platform's own delivery: this test is about dead-lettering, TestCloudRunVerifiesIDTokens
			// and TestAzureVerifiesFunctionKeys about who may deliver.
			platformOnly := verifierFunc(func(_ *http.Request, route Route) error {
				if route != RouteQueue {
					return ErrForbidden
				}
				return nil
			})
			s, err := New(ctx, platform, cfg, bank.Handlers(), Options{Verifier: platformOnly})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in, _ := json.Marshal(bank.Transfer{From: "a", To: "b", Amount: 1})
			start, _ := json.Marshal(ssf.Request{Kind: ssf.KindInvoke, InstanceID: "t-" + string(platform), Input: in, Async: true})
			attrs := map[string]string{"trace": "t-1"}
			delivery := func(id string, body []byte, attempt int) []byte {
				if platform == Azure {
					text, _ := json.Marshal(string(queue.Envelope{Attributes: attrs, Body: body}.Encode()))
					return fmt.Appendf(nil, `{"Data":{"message":%s},"Metadata":{"Id":%q,"DequeueCount":%d,"InsertionTime":%q,"PopReceipt":"p"}}`,
						text, id, attempt, inserted.Format(time.RFC3339))
				}
				b, _ := json.Marshal(map[string]any{"message": map[string]any{"data": body, "messageId": id, "attributes": attrs,
					"publishTime": inserted.Format(time.RFC3339Nano)}, "subscription": "projects/p/subscriptions/s", "deliveryAttempt": attempt})
				return b
			}
			post := func(payload []byte) int {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/queue", bytes.NewReader(payload)))
				return w.Code
			}
			if code := post(delivery("m-1", start, 1)); code != http.StatusInternalServerError {
				t.Fatalf("the first delivery of a failing start: %d, want 500 (delivered again)", code)
			}
			if code := post(delivery("m-1", start, 2)); code != http.StatusOK {
				t.Fatalf("the last delivery of a failing start: %d, want 200 (dead-lettered)", code)
			}
			if code := post(delivery("m-2", []byte("not a request"), 1)); code != http.StatusOK {
				t.Fatalf("a poison start: %d, want 200 (dead-lettered)", code)
			}
			ms, err := s.fn.DeadLetter.Receive(ctx, queue.ReceiveOptions{Max: 10, Wait: time.Second})
			if err != nil || len(ms) != 2 {
				t.Fatalf("dead letters: %d, %v; want 2", len(ms), err)
			}
			for _, m := range ms {
				rec, err := queue.ParseDeadLetter(m.Body)
				if err != nil {
					t.Fatal(err)
				}
				a := m.Attributes
				if a[queue.AttrSource] != s.fn.Queue.Name() || a[queue.AttrMessageID] != rec.MessageID || a[queue.AttrAttempts] != fmt.Sprint(rec.Attempts) ||
					a[queue.AttrError] != queue.AttributeValue(rec.Error) || a[queue.AttrFirstFailure] != rec.FirstFailure.Format(time.RFC3339Nano) ||
					rec.Attributes["trace"] != "t-1" {
					t.Errorf("record %+v has attributes %q", rec, a)
				}
				switch rec.MessageID {
				case "m-1":
					// The first failure: when the platform stored the start (neither says when it first delivered it).
					if rec.Attempts != 2 || !strings.Contains(rec.Error, "calling accounts") || !rec.FirstFailure.Equal(inserted) || string(rec.Body) != string(start) {
						t.Errorf("record of the last delivery %+v, want first failure %v", rec, inserted)
					}
				case "m-2":
					if rec.Attempts != 1 || !strings.Contains(rec.Error, "not a JSON request") || !rec.FirstFailure.Equal(rec.LastFailure) {
						t.Errorf("poison record %+v", rec)
					}
				default:
					t.Errorf("unexpected record %+v", rec)
				}
			}
		})
	}
}
