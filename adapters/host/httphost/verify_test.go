package httphost

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// googleFixture stands in for Google's signing keys: RSA keys of its own, published as a JWKS
// by a server on 127.0.0.1, and ID tokens signed with them.
type googleFixture struct {
	mu     sync.Mutex
	keys   map[string]*rsa.PrivateKey // published, by kid
	signer string                     // the kid new tokens are signed with
	down   bool                       // the JWKS answers 503
	reads  atomic.Int64
	jwks   *httptest.Server
	now    time.Time
}

var (
	keyOnce sync.Once
	rsaKeys []*rsa.PrivateKey
)

// testKeys are RSA keys made once per test binary (2048-bit keys take a while under -race).
func testKeys(t *testing.T) []*rsa.PrivateKey {
	keyOnce.Do(func() {
		for range 3 {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys = append(rsaKeys, k)
		}
	})
	return rsaKeys
}

func newGoogleFixture(t *testing.T) *googleFixture {
	f := &googleFixture{keys: map[string]*rsa.PrivateKey{"k1": testKeys(t)[0]}, signer: "k1", now: time.Now()}
	f.jwks = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.reads.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.down {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range f.keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		w.Header().Set("Cache-Control", "public, max-age=3600, must-revalidate, no-transform")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(f.jwks.Close)
	return f
}

// claims are a valid ID token's claims for email, audience aud.
func (f *googleFixture) claims(email, aud string) jwt.MapClaims {
	return jwt.MapClaims{"iss": "https://accounts.google.com", "aud": aud, "azp": "1234", "sub": "1234", "email": email, "email_verified": true,
		"iat": f.now.Add(-time.Minute).Unix(), "exp": f.now.Add(59 * time.Minute).Unix()}
}

// sign signs claims with the current signer key.
func (f *googleFixture) sign(t *testing.T, claims jwt.MapClaims) string {
	f.mu.Lock()
	kid, key := f.signer, f.keys[f.signer]
	f.mu.Unlock()
	return signWith(t, claims, kid, key)
}

func signWith(t *testing.T, claims jwt.MapClaims, kid string, key *rsa.PrivateKey) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stripped is the token as Cloud Run's front end hands it to the container after checking it.
func stripped(token string) string {
	return token[:strings.LastIndex(token, ".")+1] + strippedSignature
}

func (f *googleFixture) keySet() *KeySet {
	return &KeySet{URL: f.jwks.URL, Client: f.jwks.Client(), Now: func() time.Time { return f.now }}
}

const (
	testAudience  = "https://bank-accounts-123456789012.europe-west1.run.app"
	accountsSA    = "bank-accounts@ssfkit-bank.iam.gserviceaccount.com"
	tellerSA      = "bank-teller@ssfkit-bank.iam.gserviceaccount.com"
	schedulerSA   = "bank-sched-0a1b2c@ssfkit-bank.iam.gserviceaccount.com"
	strangerSA    = "someone@elsewhere.iam.gserviceaccount.com"
	forbiddenPeer = "bank-audit@ssfkit-bank.iam.gserviceaccount.com" // of the environment, not a peer of accounts
)

// cloudRunVerifier is the accounts SSF's verifier as PlatformVerifier configures it from the
// module's settings.
func cloudRunVerifier(t *testing.T, f *googleFixture) *GoogleIDTokenVerifier {
	v, err := NewGoogleIDTokenVerifier(GoogleIDTokenConfig{
		Audience: testAudience,
		Callers: map[Route][]string{RouteSSF: {accountsSA, tellerSA}, RouteSpawn: {accountsSA, tellerSA}, RouteQueue: {accountsSA},
			RouteIntentCollector: {schedulerSA}, RouteGarbageCollector: {schedulerSA}},
		FrontEndVerified: []Route{RouteQueue, RouteIntentCollector, RouteGarbageCollector},
		Keys:             f.keySet(),
		Now:              func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var storeSeq atomic.Int64

// accountsServer is the bank's accounts SSF on platform, checking its callers with v, on a
// fresh in-memory store and queue.
func accountsServer(t *testing.T, platform Platform, v Verifier) *Server {
	n := storeSeq.Add(1)
	cfg := host.Config{SSF: bank.Accounts, Environment: "bank", Store: fmt.Sprintf("mem://verify-%d", n), Queue: fmt.Sprintf("mem://verify-q-%d", n),
		Peers: map[string]string{bank.Teller: "https://bank-teller.example"}}
	s, err := New(context.Background(), platform, cfg, bank.Handlers(), Options{Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// openRequest opens account id with 1 unit: a request that, admitted, creates an instance.
func openRequest(id string) ssf.Request {
	return ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Input: json.RawMessage(fmt.Sprintf(`{"op":"open","account":%q,"amount":1}`, id))}
}

// routeBody is a request to route that creates instance id if it is run.
func routeBody(t *testing.T, platform Platform, route Route, id string) []byte {
	req := openRequest(id)
	switch route {
	case RouteSSF:
		b, _ := json.Marshal(req)
		return b
	case RouteSpawn:
		req.Async = true
		b, _ := json.Marshal(req)
		return b
	case RouteQueue:
		req.Async = true
		body, _ := json.Marshal(req)
		m := &queue.Message{ID: "m-" + id, Body: body, Attempts: 1}
		if platform == Azure {
			return azureQueued(m)
		}
		return pubSubQueued(m)
	}
	return []byte(`{}`)
}

// ranNothing checks that a refused request did no work: no execution, no instance, nothing
// queued.
func ranNothing(t *testing.T, s *Server, id string, executions int64) {
	t.Helper()
	ctx := context.Background()
	if got := s.Runtime().Stats().Executions; got != executions {
		t.Errorf("a refused request ran: %d executions, want %d", got, executions)
	}
	if st, err := s.Runtime().Intent(ctx, id); err != nil || st.Exists || st.Done {
		t.Errorf("a refused request created instance %s: %+v %v", id, st, err)
	}
	msgs, err := s.fn.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10})
	if err != nil || len(msgs) != 0 {
		t.Errorf("a refused request queued %d messages (%v)", len(msgs), err)
	}
}

// ranIt checks that an admitted request did its work.
func ranIt(t *testing.T, s *Server, route Route, id string) {
	t.Helper()
	ctx := context.Background()
	switch route {
	case RouteSSF, RouteQueue:
		if st, err := s.Runtime().Intent(ctx, id); err != nil || !st.Done {
			t.Errorf("the admitted request did not run instance %s: %+v %v", id, st, err)
		}
	case RouteSpawn:
		msgs, err := s.fn.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("the admitted spawn queued %d messages (%v), want 1", len(msgs), err)
		}
		_ = s.fn.Queue.Ack(ctx, msgs[0])
	}
}

type authCase struct {
	name   string
	route  Route
	header func(r *http.Request)
	want   int
}

// serve sends one request to s in process, from remote, and checks the status and, for a
// refusal, that nothing ran; for an admission, that it ran.
func serve(t *testing.T, s *Server, c authCase, n int, remote string) {
	t.Helper()
	id := fmt.Sprintf("case-%d", n)
	path := string(c.route)
	if s.platform == Azure && (c.route == RouteSSF || c.route == RouteSpawn) {
		path = "/api" + path
	}
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(routeBody(t, s.platform, c.route, id)))
	r.RemoteAddr = remote
	r.Header.Set("Content-Type", "application/json")
	if c.header != nil {
		c.header(r)
	}
	before := s.Runtime().Stats().Executions
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != c.want {
		t.Errorf("%s: %s answered %d %s, want %d", c.name, path, w.Code, strings.TrimSpace(w.Body.String()), c.want)
		return
	}
	if c.want/100 == 2 {
		ranIt(t, s, c.route, id)
		return
	}
	var body struct{ Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == "" {
		t.Errorf("%s: the refusal %q is not a JSON error", c.name, w.Body.String())
	}
	if c.want == http.StatusUnauthorized && s.platform == CloudRun && w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("%s: a 401 without WWW-Authenticate", c.name)
	}
	ranNothing(t, s, id, before)
}

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// modified is a valid token of email whose claims change applies.
func (f *googleFixture) modified(t *testing.T, email string, change func(jwt.MapClaims)) string {
	c := f.claims(email, testAudience)
	change(c)
	return f.sign(t, c)
}

// unsigned builds a token with header and claims and the given signature segment.
func unsigned(header, claims map[string]any, signature string) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "." + signature
}

// The Cloud Run host checks Google ID tokens with real RS256 signatures against a JWKS served
// on 127.0.0.1: issuer, audience (its own URL), lifetime, verified email, and the caller for
// the route; a refused request runs nothing.
func TestCloudRunVerifiesIDTokens(t *testing.T) {
	f := newGoogleFixture(t)
	s := accountsServer(t, CloudRun, cloudRunVerifier(t, f))
	peer := f.sign(t, f.claims(tellerSA, testAudience))
	push := f.sign(t, f.claims(accountsSA, testAudience))
	sched := f.sign(t, f.claims(schedulerSA, testAudience))
	otherKey := testKeys(t)[1]
	pub, _ := x509.MarshalPKIXPublicKey(&f.keys["k1"].PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	hs256 := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, f.claims(tellerSA, testAudience))
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(pubPEM)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	peerClaims := map[string]any(f.claims(tellerSA, testAudience))
	for i, c := range []authCase{
		{"a peer's token", RouteSSF, bearer(peer), http.StatusOK},
		{"the SSF's own token", RouteSSF, bearer(push), http.StatusOK},
		{"a peer's spawn", RouteSpawn, bearer(peer), http.StatusAccepted},
		{"the audience with a trailing slash", RouteSSF, bearer(f.sign(t, f.claims(tellerSA, testAudience+"/"))), http.StatusOK},
		{"the issuer without https://", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { c["iss"] = "accounts.google.com" })), http.StatusOK},
		{"Pub/Sub's push, checked by Cloud Run", RouteQueue, bearer(stripped(push)), http.StatusOK},
		{"Pub/Sub's push with its signature", RouteQueue, bearer(push), http.StatusOK},
		{"the scheduler, checked by Cloud Run", RouteIntentCollector, bearer(stripped(sched)), http.StatusOK},
		{"the scheduler, checked by Cloud Run", RouteGarbageCollector, bearer(stripped(sched)), http.StatusOK},
		{"the scheduler with its signature", RouteGarbageCollector, bearer(sched), http.StatusOK},

		{"no Authorization", RouteSSF, nil, http.StatusUnauthorized},
		{"no Authorization", RouteSpawn, nil, http.StatusUnauthorized},
		{"no Authorization", RouteQueue, nil, http.StatusUnauthorized},
		{"no Authorization", RouteIntentCollector, nil, http.StatusUnauthorized},
		{"no Authorization", RouteGarbageCollector, nil, http.StatusUnauthorized},
		{"only X-Serverless-Authorization", RouteSSF, func(r *http.Request) { r.Header.Set("X-Serverless-Authorization", "Bearer "+peer) }, http.StatusUnauthorized},
		{"Basic credentials", RouteSSF, func(r *http.Request) { r.SetBasicAuth("teller", "secret") }, http.StatusUnauthorized},
		{"not a JWT", RouteSSF, bearer("not-a-token"), http.StatusUnauthorized},
		{"garbage segments", RouteSSF, bearer("a.b.c"), http.StatusUnauthorized},
		{"two Authorization headers", RouteSSF, func(r *http.Request) {
			r.Header.Add("Authorization", "Bearer "+peer)
			r.Header.Add("Authorization", "Bearer "+peer)
		}, http.StatusUnauthorized},
		{"a token for another service", RouteSSF, bearer(f.sign(t, f.claims(tellerSA, "https://bank-teller-123456789012.europe-west1.run.app"))), http.StatusUnauthorized},
		{"a token without audience", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { delete(c, "aud") })), http.StatusUnauthorized},
		{"another issuer", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), http.StatusUnauthorized},
		{"no issuer", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { delete(c, "iss") })), http.StatusUnauthorized},
		{"expired", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) {
			c["iat"], c["exp"] = f.now.Add(-62*time.Minute).Unix(), f.now.Add(-2*time.Minute).Unix()
		})), http.StatusUnauthorized},
		{"no expiry", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { delete(c, "exp") })), http.StatusUnauthorized},
		{"not yet valid (nbf)", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { c["nbf"] = f.now.Add(5 * time.Minute).Unix() })), http.StatusUnauthorized},
		{"issued in the future", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { c["iat"] = f.now.Add(5 * time.Minute).Unix() })), http.StatusUnauthorized},
		{"no iat", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { delete(c, "iat") })), http.StatusUnauthorized},
		{"an unverified email", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { c["email_verified"] = false })), http.StatusUnauthorized},
		{"no email", RouteSSF, bearer(f.modified(t, tellerSA, func(c jwt.MapClaims) { delete(c, "email") })), http.StatusUnauthorized},
		{"forged: signed by another key under Google's kid", RouteSSF, bearer(signWith(t, f.claims(tellerSA, testAudience), "k1", otherKey)), http.StatusUnauthorized},
		{"forged: an unknown kid", RouteSSF, bearer(signWith(t, f.claims(tellerSA, testAudience), "k-forged", otherKey)), http.StatusUnauthorized},
		{"forged: no kid", RouteSSF, bearer(signWith(t, f.claims(tellerSA, testAudience), "", f.keys["k1"])), http.StatusUnauthorized},
		{"forged: alg none", RouteSSF, bearer(unsigned(map[string]any{"alg": "none", "typ": "JWT", "kid": "k1"}, peerClaims, "")), http.StatusUnauthorized},
		{"forged: HS256 keyed with Google's public key", RouteSSF, bearer(hs256), http.StatusUnauthorized},
		{"forged: claims changed after signing", RouteSSF, bearer(func() string {
			parts := strings.Split(peer, ".")
			c := map[string]any(f.claims(tellerSA, testAudience))
			c["email"] = accountsSA
			b, _ := json.Marshal(c)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
		}()), http.StatusUnauthorized},
		{"forged: a 'stripped' token on a peer route", RouteSSF, bearer(stripped(peer)), http.StatusUnauthorized},
		{"forged: a 'stripped' token for another service", RouteQueue, bearer(stripped(f.sign(t, f.claims(accountsSA, "https://other.example")))), http.StatusUnauthorized},
		{"forged: a 'stripped' expired token", RouteIntentCollector, bearer(stripped(f.modified(t, schedulerSA, func(c jwt.MapClaims) {
			c["iat"], c["exp"] = f.now.Add(-62*time.Minute).Unix(), f.now.Add(-2*time.Minute).Unix()
		}))), http.StatusUnauthorized},
		{"forged: a 'stripped' alg none token", RouteQueue, bearer(unsigned(map[string]any{"alg": "none"}, map[string]any(f.claims(accountsSA, testAudience)), strippedSignature)), http.StatusUnauthorized},
		{"forged: a 'stripped' token of another issuer", RouteQueue, bearer(stripped(f.modified(t, accountsSA, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }))), http.StatusUnauthorized},

		{"a caller that is not a peer", RouteSSF, bearer(f.sign(t, f.claims(forbiddenPeer, testAudience))), http.StatusForbidden},
		{"a stranger", RouteSpawn, bearer(f.sign(t, f.claims(strangerSA, testAudience))), http.StatusForbidden},
		{"the scheduler's token on /ssf", RouteSSF, bearer(sched), http.StatusForbidden},
		{"the scheduler's token on /spawn", RouteSpawn, bearer(sched), http.StatusForbidden},
		{"the scheduler's token on /queue", RouteQueue, bearer(stripped(sched)), http.StatusForbidden},
		{"a peer's token on /intent-collector", RouteIntentCollector, bearer(peer), http.StatusForbidden},
		{"a peer's token on /garbage-collector", RouteGarbageCollector, bearer(peer), http.StatusForbidden},
		{"the SSF's own token on /intent-collector", RouteIntentCollector, bearer(push), http.StatusForbidden},
		{"a peer's token on /queue", RouteQueue, bearer(stripped(peer)), http.StatusForbidden},
	} {
		serve(t, s, c, i, "203.0.113.7:443")
	}
	if n := f.reads.Load(); n > 2 {
		t.Errorf("the JWKS was read %d times, want at most 2 (once, and once more for the unknown kid)", n)
	}
}

// Google's keys: kept as long as the JWKS's Cache-Control says, read again for a key ID they
// do not have (a rotation) but no more often than MinRefresh, and a JWKS that cannot be read
// is answered 503, never by admitting the caller.
func TestCloudRunKeyRotationAndOutage(t *testing.T) {
	f := newGoogleFixture(t)
	s := accountsServer(t, CloudRun, cloudRunVerifier(t, f))
	call := func(n int, token string, want int) {
		t.Helper()
		serve(t, s, authCase{"rotation", RouteSSF, bearer(token), want}, n, "203.0.113.7:443")
	}
	call(0, f.sign(t, f.claims(tellerSA, testAudience)), http.StatusOK)
	call(1, f.sign(t, f.claims(tellerSA, testAudience)), http.StatusOK)
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("the JWKS was read %d times for two tokens, want once (max-age)", n)
	}
	// Google publishes a new key and signs with it: one more read finds it.
	f.mu.Lock()
	f.keys["k2"], f.signer = testKeys(t)[2], "k2"
	f.mu.Unlock()
	f.now = f.now.Add(time.Minute)
	call(2, f.sign(t, f.claims(tellerSA, testAudience)), http.StatusOK)
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("the JWKS was read %d times after a rotation, want twice", n)
	}
	// Tokens naming made-up keys: no read within MinRefresh of the last.
	for i := range 20 {
		call(10+i, signWith(t, f.claims(tellerSA, testAudience), fmt.Sprintf("made-up-%d", i), testKeys(t)[1]), http.StatusUnauthorized)
	}
	if n := f.reads.Load(); n != 2 {
		t.Fatalf("made-up key IDs made %d reads of the JWKS, want none", n-2)
	}
	// The keys expire while Google's endpoint is down: 503, then fine again once it is back.
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	f.now = f.now.Add(2 * time.Hour)
	good := f.sign(t, f.claims(tellerSA, testAudience))
	call(40, good, http.StatusServiceUnavailable)
	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	call(41, good, http.StatusServiceUnavailable) // within MinRefresh of the failed read
	f.now = f.now.Add(time.Minute)
	call(42, good, http.StatusOK)
}

// A host whose verification settings are missing refuses to start, naming the setting.
func TestVerifierSettingsFailClosed(t *testing.T) {
	ctx := context.Background()
	full := map[string]string{SettingAudience: testAudience, SettingCallers: accountsSA + ", " + tellerSA, SettingPushCaller: accountsSA, SettingSchedulerCaller: schedulerSA}
	if v, err := PlatformVerifier(ctx, CloudRun, env(full)); err != nil || v == nil {
		t.Fatalf("the module's settings: %v", err)
	}
	for _, name := range []string{SettingAudience, SettingCallers, SettingPushCaller, SettingSchedulerCaller} {
		for _, value := range []string{"", " , "} {
			settings := map[string]string{}
			for k, v := range full {
				settings[k] = v
			}
			settings[name] = value
			if _, err := PlatformVerifier(ctx, CloudRun, env(settings)); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v, want a refusal naming it", name, value, err)
			}
		}
	}
	for name, value := range map[string]string{SettingAudience: "bank-accounts", SettingCallers: "not an email", SettingSchedulerCaller: "a@b, <c@d>"} {
		settings := map[string]string{}
		for k, v := range full {
			settings[k] = v
		}
		settings[name] = value
		if _, err := PlatformVerifier(ctx, CloudRun, env(settings)); err == nil {
			t.Errorf("%s=%q was accepted", name, value)
		}
	}
	if _, err := PlatformVerifier(ctx, Azure, env(map[string]string{})); err == nil || !strings.Contains(err.Error(), SettingAzureSite) {
		t.Errorf("Azure without %s: %v, want a refusal naming it", SettingAzureSite, err)
	}
	if _, err := NewAzureKeyVerifier(AzureKeyConfig{Credential: staticCredential("t"), Site: "bank-accounts"}); err == nil || !strings.Contains(err.Error(), SettingAzureSite) {
		t.Errorf("a site that is not an ARM ID: %v", err)
	}
	cfg := host.Config{SSF: bank.Accounts, Environment: "bank", Store: "mem://verify-none", Queue: "mem://verify-none-q"}
	if _, err := New(ctx, CloudRun, cfg, bank.Handlers(), Options{}); err == nil || !strings.Contains(err.Error(), "Verifier") {
		t.Errorf("a server without a verifier: %v, want a refusal", err)
	}
}

// fakeARM stands in for Resource Manager's listkeys on one function app: it answers the SSF's
// identity token only, and counts the reads.
type fakeARM struct {
	mu     sync.Mutex
	master string
	keys   map[string]string
	down   bool
	reads  atomic.Int64
	server *httptest.Server
}

const testSite = "/subscriptions/s/resourceGroups/bank/providers/Microsoft.Web/sites/bank-accounts-1a2b3c"

func newFakeARM(t *testing.T) *fakeARM {
	a := &fakeARM{master: "master-1", keys: map[string]string{"default": "default-1", "ops": "ops-1"}}
	a.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.reads.Add(1)
		a.mu.Lock()
		defer a.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != testSite+"/host/default/listkeys" || r.Header.Get("Authorization") != "Bearer identity-token" || r.URL.Query().Get("api-version") == "" {
			http.Error(w, `{"error":{"code":"AuthorizationFailed"}}`, http.StatusForbidden)
			return
		}
		if a.down {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"masterKey": a.master, "functionKeys": a.keys, "systemKeys": map[string]string{"durabletask_extension": "system-1"}})
	}))
	t.Cleanup(a.server.Close)
	return a
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func azureVerifier(t *testing.T, a *fakeARM, clock *testClock) *AzureKeyVerifier {
	v, err := NewAzureKeyVerifier(AzureKeyConfig{Credential: staticCredential("identity-token"), Site: testSite, Management: a.server.URL,
		Client: a.server.Client(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func functionKey(key string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("x-functions-key", key) }
}

// The Azure host checks the function key its callers present against its own app's keys,
// read through a Resource Manager on 127.0.0.1, and lets only the Functions host's own
// invocations on 127.0.0.1 reach the queue and collector routes.
func TestAzureVerifiesFunctionKeys(t *testing.T) {
	a, clock := newFakeARM(t), &testClock{now: time.Now()}
	v := azureVerifier(t, a, clock)
	s := accountsServer(t, Azure, v)
	const local, outside = "127.0.0.1:40123", "203.0.113.7:51000"
	forwarded := func(r *http.Request) { r.Header.Set("X-ARR-LOG-ID", "5a0e3c8b-0000-0000-0000-000000000000") }
	for i, c := range []authCase{
		{"the default key", RouteSSF, functionKey("default-1"), http.StatusOK},
		{"another function key", RouteSpawn, functionKey("ops-1"), http.StatusAccepted},
		{"the master key", RouteSSF, functionKey("master-1"), http.StatusOK},
		{"the key as the code parameter", RouteSSF, func(r *http.Request) { r.URL.RawQuery = "code=default-1" }, http.StatusOK},
		{"the default key, forwarded by the front end", RouteSSF, func(r *http.Request) { forwarded(r); functionKey("default-1")(r) }, http.StatusOK},
		{"the queue trigger's invocation", RouteQueue, nil, http.StatusOK},
		{"the timer's invocation", RouteIntentCollector, nil, http.StatusOK},
		{"the timer's invocation", RouteGarbageCollector, nil, http.StatusOK},

		{"no key", RouteSSF, nil, http.StatusUnauthorized},
		{"no key", RouteSpawn, nil, http.StatusUnauthorized},
		{"a wrong key", RouteSSF, functionKey("default-2"), http.StatusUnauthorized},
		{"a wrong code parameter", RouteSpawn, func(r *http.Request) { r.URL.RawQuery = "code=guess" }, http.StatusUnauthorized},
		{"a system key", RouteSSF, functionKey("system-1"), http.StatusUnauthorized},
		{"an empty key", RouteSSF, functionKey(""), http.StatusUnauthorized},
		{"a key that extends the real one", RouteSSF, functionKey("default-1x"), http.StatusUnauthorized},

		{"a valid key from outside the sandbox", RouteSSF, functionKey("default-1"), http.StatusForbidden},
		{"a forwarded request to the collector", RouteIntentCollector, forwarded, http.StatusForbidden},
		{"a forwarded request to the queue route", RouteQueue, forwarded, http.StatusForbidden},
		{"a proxied request to the collector", RouteGarbageCollector, func(r *http.Request) { r.Header.Set("X-Forwarded-For", "198.51.100.1") }, http.StatusForbidden},
		{"a valid key on the collector", RouteIntentCollector, functionKey("default-1"), http.StatusForbidden},
		{"the master key as code on the queue route", RouteQueue, func(r *http.Request) { r.URL.RawQuery = "code=master-1" }, http.StatusForbidden},
		{"a collector call from outside the sandbox", RouteGarbageCollector, nil, http.StatusForbidden},
	} {
		remote := local
		if strings.Contains(c.name, "outside") {
			remote = outside
		}
		serve(t, s, c, i, remote)
	}
	// One read: wrong keys within MinRefresh of it read nothing more.
	if n := a.reads.Load(); n != 1 {
		t.Errorf("Resource Manager was asked %d times, want once", n)
	}
}

// A rotated key works at once (the verifier reads the keys again when a key matches none), an
// old one stops working once the keys were read again, wrong keys cannot make the verifier
// flood Resource Manager, and keys that cannot be read are answered 503.
func TestAzureKeyRotation(t *testing.T) {
	a, clock := newFakeARM(t), &testClock{now: time.Now()}
	s := accountsServer(t, Azure, azureVerifier(t, a, clock))
	n := 0
	call := func(key string, want int) {
		t.Helper()
		n++
		serve(t, s, authCase{"key " + key, RouteSSF, functionKey(key), want}, n, "127.0.0.1:40123")
	}
	call("default-1", http.StatusOK)
	clock.Add(time.Minute)
	a.mu.Lock()
	a.keys["default"] = "default-2" // rotated
	a.mu.Unlock()
	call("default-2", http.StatusOK) // the new key: read again, found
	if r := a.reads.Load(); r != 2 {
		t.Fatalf("%d reads after a rotation, want 2", r)
	}
	call("default-1", http.StatusUnauthorized) // the old key, once the keys were read again
	for range 50 {
		call("guess", http.StatusUnauthorized)
	}
	if r := a.reads.Load(); r != 2 {
		t.Fatalf("51 wrong keys within MinRefresh made %d reads, want none", r-2)
	}
	clock.Add(31 * time.Second)
	for range 50 {
		call("guess", http.StatusUnauthorized)
	}
	if r := a.reads.Load(); r != 3 {
		t.Fatalf("50 wrong keys after MinRefresh made %d reads, want one", r-2)
	}
	// Resource Manager is down and the keys are older than MaxAge: refused with 503, not admitted.
	a.mu.Lock()
	a.down = true
	a.mu.Unlock()
	clock.Add(10 * time.Minute)
	call("default-2", http.StatusServiceUnavailable)
	// A new verifier whose first read fails.
	s2 := accountsServer(t, Azure, azureVerifier(t, a, clock))
	serve(t, s2, authCase{"first read fails", RouteSSF, functionKey("default-2"), http.StatusServiceUnavailable}, 1, "127.0.0.1:40123")
}

// Every route the server serves is guarded: a handler behind a refusing verifier never runs.
func TestEveryRouteIsGuarded(t *testing.T) {
	for _, platform := range []Platform{Azure, CloudRun} {
		var asked []Route
		s := accountsServer(t, platform, verifierFunc(func(r *http.Request, route Route) error {
			asked = append(asked, route)
			return fmt.Errorf("%w: test", ErrForbidden)
		}))
		for i, route := range Routes {
			for _, prefix := range []string{"", "/api"} {
				if prefix != "" && platformRoute(route) {
					continue
				}
				id := fmt.Sprintf("guard-%s-%d-%s", platform, i, prefix)
				r := httptest.NewRequest(http.MethodPost, prefix+string(route), bytes.NewReader(routeBody(t, platform, route, id)))
				w := httptest.NewRecorder()
				before := s.Runtime().Stats().Executions
				s.ServeHTTP(w, r)
				if w.Code != http.StatusForbidden {
					t.Errorf("%s %s%s: %d, want 403", platform, prefix, route, w.Code)
				}
				ranNothing(t, s, id, before)
			}
		}
		if len(asked) != len(Routes)+2 {
			t.Errorf("%s: the verifier was asked about %v", platform, asked)
		}
	}
}

type verifierFunc func(*http.Request, Route) error

func (f verifierFunc) Verify(r *http.Request, route Route) error { return f(r, route) }

// A triggered function on Cloud Run needs only the settings of its own routes' callers: the
// coordination writer the push subscription's, the heartbeat the scheduler's.
func TestTriggeredVerifierNeedsOnlyItsCallers(t *testing.T) {
	env := map[string]string{SettingAudience: "https://coord-writer.run.app", SettingPushCaller: "push@p.iam.gserviceaccount.com"}
	getenv := func(k string) string { return env[k] }
	if _, err := platformVerifier(context.Background(), CloudRun, getenv, []Route{RouteQueue}); err != nil {
		t.Fatalf("the writer's verifier: %v", err)
	}
	_, err := platformVerifier(context.Background(), CloudRun, getenv, []Route{RouteHeartbeat})
	if err == nil || !strings.Contains(err.Error(), SettingSchedulerCaller) {
		t.Fatalf("the heartbeat's verifier without %s: %v, want an error naming it", SettingSchedulerCaller, err)
	}
	if _, err := PlatformVerifier(context.Background(), CloudRun, getenv); err == nil || !strings.Contains(err.Error(), SettingCallers) {
		t.Fatalf("an SSF's verifier without %s: %v, want an error naming it", SettingCallers, err)
	}
}
