package httphost

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/ssfkit/ssfkit/internal/azurearm"
)

// AzureKeyConfig configures an AzureKeyVerifier.
type AzureKeyConfig struct {
	// Credential reads the app's keys through Resource Manager (the SSF's identity, which the
	// module lets list its own app's keys).
	Credential azcore.TokenCredential
	// Site is the Resource Manager ID of the SSF's own function app
	// (/subscriptions/S/resourceGroups/RG/providers/Microsoft.Web/sites/APP).
	Site string
	// Management is the Resource Manager endpoint (default azurearm.DefaultEndpoint).
	Management string
	Client     *http.Client
	// MinRefresh is the least time between two reads of the keys (default 30 s): a presented
	// key that matches none makes the verifier read them again, in case they were rotated, but
	// no more often than that, so that wrong keys cannot make it flood Resource Manager.
	MinRefresh time.Duration
	// MaxAge is how long keys are used before they are read again (default 5 min), so that a
	// key revoked on the app stops working here too.
	MaxAge time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// AzureKeyVerifier checks the callers of an Azure Functions custom handler.
//
// HTTP routes (/api/ssf, /api/spawn, which the Functions host forwards with the caller's
// headers and query): the caller's function key, in the x-functions-key header or the code
// parameter, must be one of the app's own host keys (its function keys or its master key),
// which the verifier reads through Resource Manager (listkeys on its own site) and compares in
// constant time. Keys are the only credential Azure Functions gives HTTP callers; the
// platform's other headers (x-ms-client-principal of App Service authentication) are not
// signed, so the handler cannot check them and does not accept them.
//
// Platform routes (/queue, /intent-collector, /garbage-collector): the Functions host invokes
// them itself, for its queue and timer triggers, with a request it builds on 127.0.0.1 (its
// custom-handler invocation) and that carries nothing of any caller. No HTTP trigger forwards
// to them (the app's HTTP functions are ssf and spawn, under /api). So such a request must come
// from the loopback interface (Main listens on 127.0.0.1 only, on Azure) and carry none of
// the marks of a request forwarded from outside: the X-ARR-LOG-ID header that App Service's
// front end adds to every external request (the Functions host itself tells internal requests
// by its absence), the proxy headers (Forwarded, X-Forwarded-For, X-Original-URL), or a
// function key. A forwarded request to a collector route is refused with 403.
type AzureKeyVerifier struct {
	arm        azurearm.Client
	site       string
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	mu        sync.Mutex
	keys      [][sha256.Size]byte // the hashes of the app's keys
	read      time.Time           // when keys were read
	attempted time.Time           // the last read, successful or not
	err       error               // the last read's error
	reads     int
}

// NewAzureKeyVerifier checks c.
func NewAzureKeyVerifier(c AzureKeyConfig) (*AzureKeyVerifier, error) {
	if c.Credential == nil {
		return nil, errors.New("httphost: the Azure key verifier needs a credential to read the app's keys")
	}
	if !strings.HasPrefix(c.Site, "/subscriptions/") || !strings.Contains(strings.ToLower(c.Site), "/providers/microsoft.web/sites/") {
		return nil, fmt.Errorf("httphost: %s=%q is not a function app's Resource Manager ID (/subscriptions/S/resourceGroups/RG/providers/Microsoft.Web/sites/APP)", SettingAzureSite, c.Site)
	}
	v := &AzureKeyVerifier{arm: azurearm.Client{Credential: c.Credential, Endpoint: c.Management, HTTP: c.Client},
		site: strings.TrimSuffix(c.Site, "/"), minRefresh: c.MinRefresh, maxAge: c.MaxAge, now: c.Now}
	if v.minRefresh == 0 {
		v.minRefresh = 30 * time.Second
	}
	if v.maxAge == 0 {
		v.maxAge = 5 * time.Minute
	}
	if v.now == nil {
		v.now = time.Now
	}
	return v, nil
}

// forwardedMarks are headers a request forwarded from outside the app carries, and a
// custom-handler invocation by the Functions host never does.
var forwardedMarks = []string{"X-Arr-Log-Id", "X-Forwarded-For", "X-Original-Url", "Forwarded", "X-Forwarded-Host", "X-Functions-Key"}

func (v *AzureKeyVerifier) Verify(r *http.Request, route Route) error {
	if !fromLoopback(r.RemoteAddr) {
		return fmt.Errorf("%w: the Functions host calls its custom handler on 127.0.0.1, and this request came from %s", ErrForbidden, r.RemoteAddr)
	}
	if platformRoute(route) {
		for _, h := range forwardedMarks {
			if len(r.Header.Values(h)) > 0 {
				return fmt.Errorf("%w: %s is called only by the Functions host's own trigger, and this request was forwarded from outside (it carries %s)", ErrForbidden, route, h)
			}
		}
		if r.URL.Query().Has("code") {
			return fmt.Errorf("%w: %s is called only by the Functions host's own trigger, and this request carries a function key", ErrForbidden, route)
		}
		return nil
	}
	key := r.Header.Get("X-Functions-Key")
	if key == "" {
		key = r.URL.Query().Get("code")
	}
	if key == "" {
		return fmt.Errorf("%w: no function key (the x-functions-key header or the code parameter)", ErrUnauthenticated)
	}
	return v.check(r.Context(), key)
}

// fromLoopback tells whether a remote address is on the loopback interface.
func fromLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// check admits key if it is one of the app's keys.
func (v *AzureKeyVerifier) check(ctx context.Context, key string) error {
	presented := sha256.Sum256([]byte(key))
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	mayRead := v.attempted.IsZero() || now.Sub(v.attempted) >= v.minRefresh
	if (v.keys == nil || now.Sub(v.read) >= v.maxAge) && mayRead {
		v.readKeys(ctx, now)
		mayRead = false
	}
	if v.keys == nil || (v.err != nil && now.Sub(v.read) >= v.maxAge) {
		return fmt.Errorf("reading the keys of %s: %w", v.site, v.err)
	}
	if matchKey(v.keys, presented) {
		return nil
	}
	// Perhaps rotated since they were read.
	if mayRead {
		v.readKeys(ctx, now)
		if v.err == nil && matchKey(v.keys, presented) {
			return nil
		}
	}
	return fmt.Errorf("%w: the function key is not one of this app's keys", ErrUnauthenticated)
}

// matchKey compares presented with every key, in time independent of where (or whether) it
// matches.
func matchKey(keys [][sha256.Size]byte, presented [sha256.Size]byte) bool {
	match := 0
	for i := range keys {
		match |= subtle.ConstantTimeCompare(keys[i][:], presented[:])
	}
	return match == 1
}

// Reads is how often the keys were read.
func (v *AzureKeyVerifier) Reads() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.reads
}

// readKeys lists the app's host keys: its function keys (the default one, which peers read,
// and any other) and its master key. The read outlives a cancelled request.
func (v *AzureKeyVerifier) readKeys(ctx context.Context, now time.Time) {
	v.attempted, v.reads = now, v.reads+1
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	body, err := v.arm.Post(ctx, v.site+"/host/default", "listkeys", listKeysAPIVersion)
	if err != nil {
		v.err = fmt.Errorf("listkeys (may the SSF's identity list its own app's keys?): %w", err)
		return
	}
	var answer struct {
		MasterKey    string            `json:"masterKey"`
		FunctionKeys map[string]string `json:"functionKeys"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		v.err = fmt.Errorf("listkeys answered something else than keys: %v", err)
		return
	}
	var keys [][sha256.Size]byte
	for _, k := range append([]string{answer.MasterKey}, mapValues(answer.FunctionKeys)...) {
		if k != "" {
			keys = append(keys, sha256.Sum256([]byte(k)))
		}
	}
	if len(keys) == 0 {
		v.err = errors.New("listkeys answered no key")
		return
	}
	v.keys, v.read, v.err = keys, now, nil
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
