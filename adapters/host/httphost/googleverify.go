package httphost

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// GoogleCertsURL is where Google publishes the keys that sign its ID tokens (a JWKS).
const GoogleCertsURL = "https://www.googleapis.com/oauth2/v3/certs"

// googleIssuers are the issuers of Google ID tokens.
var googleIssuers = []string{"https://accounts.google.com", "accounts.google.com"}

// strippedSignature is what Cloud Run's front end puts in place of the signature of the ID
// token it checked for the service's IAM policy before it hands the request to the container.
const strippedSignature = "SIGNATURE_REMOVED_BY_GOOGLE"

// maxToken bounds the length of an ID token (Google's are about 1 KiB).
const maxToken = 16 << 10

// GoogleIDTokenConfig configures a GoogleIDTokenVerifier.
type GoogleIDTokenConfig struct {
	// Audience is the service's own URL: a token must name it as its audience (a trailing
	// slash is tolerated, as Cloud Run does).
	Audience string
	// Callers are the service accounts (emails) that may call each route. A route without
	// callers is refused to everyone.
	Callers map[Route][]string
	// FrontEndVerified are the routes on which a token whose signature Cloud Run's front end
	// removed (after checking it against the service's IAM policy) is accepted on its claims:
	// Pub/Sub push and Cloud Scheduler can present their token only in the Authorization
	// header, which Cloud Run strips. Every other route requires the signature.
	FrontEndVerified []Route
	// Keys are Google's signing keys (nil: Google's, from GoogleCertsURL).
	Keys *KeySet
	// Leeway is the clock skew tolerated on exp, iat and nbf (default 30 s).
	Leeway time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// GoogleIDTokenVerifier admits a request whose Authorization header carries a Google ID token
// (RS256, signed by one of Google's keys, issued by Google, for this service's URL, current,
// with a verified email) of a service account allowed on the route.
//
// On Cloud Run, peers present the token twice: in X-Serverless-Authorization, which Cloud Run's
// front end checks against the service's IAM policy (and strips of its signature), and in
// Authorization, which reaches the container intact and which this verifier checks with its
// signature. Pub/Sub push and Cloud Scheduler can only use Authorization, so on their routes
// (FrontEndVerified) a token stripped by Cloud Run is accepted on its claims alone.
type GoogleIDTokenVerifier struct {
	audiences []string
	callers   map[Route]map[string]bool
	frontEnd  map[Route]bool
	keys      *KeySet
	parser    *jwt.Parser
	validator *jwt.Validator
}

// NewGoogleIDTokenVerifier checks c: an audience that is a URL, and callers for every route.
func NewGoogleIDTokenVerifier(c GoogleIDTokenConfig) (*GoogleIDTokenVerifier, error) {
	if err := checkAudience(c.Audience); err != nil {
		return nil, err
	}
	aud := strings.TrimSuffix(c.Audience, "/")
	v := &GoogleIDTokenVerifier{audiences: []string{aud, aud + "/"}, callers: map[Route]map[string]bool{}, frontEnd: map[Route]bool{}, keys: c.Keys}
	if len(c.Callers) == 0 {
		return nil, errors.New("httphost: no route has callers: name them")
	}
	for r := range c.Callers {
		if len(c.Callers[r]) == 0 {
			return nil, fmt.Errorf("httphost: no caller may call %s: name its callers", r)
		}
		v.callers[r] = map[string]bool{}
		for _, e := range c.Callers[r] {
			v.callers[r][strings.ToLower(e)] = true
		}
	}
	for _, r := range c.FrontEndVerified {
		v.frontEnd[r] = true
	}
	if v.keys == nil {
		v.keys = &KeySet{URL: GoogleCertsURL}
	}
	leeway := c.Leeway
	if leeway == 0 {
		leeway = 30 * time.Second
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"RS256"}), jwt.WithAudience(v.audiences...), jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(), jwt.WithLeeway(leeway), jwt.WithTimeFunc(now), jwt.WithStrictDecoding()}
	v.parser = jwt.NewParser(opts...)
	v.validator = jwt.NewValidator(opts...)
	return v, nil
}

// googleClaims are the claims of a Google ID token the verifier reads.
type googleClaims struct {
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	jwt.RegisteredClaims
}

func (v *GoogleIDTokenVerifier) Verify(r *http.Request, route Route) error {
	allowed, ok := v.callers[route]
	if !ok {
		return fmt.Errorf("%w: nobody may call %s", ErrForbidden, route)
	}
	raw, err := bearerToken(r.Header)
	if err != nil {
		return err
	}
	claims, err := v.claims(r.Context(), raw, v.frontEnd[route])
	if err != nil {
		return err
	}
	if !allowed[strings.ToLower(claims.Email)] {
		return fmt.Errorf("%w: %s may not call %s", ErrForbidden, claims.Email, route)
	}
	return nil
}

// bearerToken reads the ID token of the Authorization header.
func bearerToken(h http.Header) (string, error) {
	values := h.Values("Authorization")
	if len(values) == 0 {
		return "", fmt.Errorf("%w: no Authorization header: a Google ID token for this service's URL is required (Authorization: Bearer TOKEN)", ErrUnauthenticated)
	}
	if len(values) > 1 {
		return "", fmt.Errorf("%w: more than one Authorization header", ErrUnauthenticated)
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", fmt.Errorf("%w: the Authorization header is not \"Bearer TOKEN\"", ErrUnauthenticated)
	}
	if len(token) > maxToken {
		return "", fmt.Errorf("%w: the bearer token is longer than %d bytes", ErrUnauthenticated, maxToken)
	}
	return token, nil
}

// claims checks the token and returns its claims. frontEnd accepts a token whose signature
// Cloud Run's front end removed.
func (v *GoogleIDTokenVerifier) claims(ctx context.Context, raw string, frontEnd bool) (*googleClaims, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: the bearer token is not a JWT", ErrUnauthenticated)
	}
	claims := &googleClaims{}
	if parts[2] == strippedSignature {
		if !frontEnd {
			return nil, fmt.Errorf("%w: the ID token's signature was removed by Cloud Run's front end; send it in X-Serverless-Authorization for Cloud Run and in Authorization for the service", ErrUnauthenticated)
		}
		// Checked by Cloud Run's front end against the service's IAM policy: everything but the
		// signature is checked again here.
		tok, _, err := v.parser.ParseUnverified(raw, claims)
		if err != nil {
			return nil, fmt.Errorf("%w: the ID token: %v", ErrUnauthenticated, err)
		}
		if alg, _ := tok.Header["alg"].(string); alg != "RS256" {
			return nil, fmt.Errorf("%w: the ID token is signed with %q, not RS256", ErrUnauthenticated, alg)
		}
		if err := v.validator.Validate(claims); err != nil {
			return nil, fmt.Errorf("%w: the ID token: %v", ErrUnauthenticated, err)
		}
	} else {
		var keyErr error
		_, err := v.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
			kid, _ := t.Header["kid"].(string)
			if kid == "" {
				return nil, errors.New("the token names no key (kid)")
			}
			key, err := v.keys.Key(ctx, kid)
			if err != nil && !errors.Is(err, errUnknownKey) {
				keyErr = err
			}
			return key, err
		})
		if keyErr != nil {
			return nil, keyErr // Google's keys could not be read: neither admitted nor refused
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the ID token: %v", ErrUnauthenticated, err)
		}
	}
	if !slices.Contains(googleIssuers, claims.Issuer) {
		return nil, fmt.Errorf("%w: the ID token's issuer is %q, not Google", ErrUnauthenticated, claims.Issuer)
	}
	if claims.IssuedAt == nil {
		return nil, fmt.Errorf("%w: the ID token has no iat", ErrUnauthenticated)
	}
	if claims.Email == "" || !claims.EmailVerified {
		return nil, fmt.Errorf("%w: the ID token has no verified email (a service account's token carries one)", ErrUnauthenticated)
	}
	return claims, nil
}

// errUnknownKey: the key set has no key of that ID.
var errUnknownKey = errors.New("no key of that ID")

// KeySet is a JWKS of RSA keys read from URL, kept as long as its Cache-Control allows, and
// read again for a key ID it does not know, at most every MinRefresh (so that tokens naming
// made-up keys cannot make it hammer the URL).
type KeySet struct {
	URL    string
	Client *http.Client // default http.DefaultClient
	// MinRefresh is the least time between two reads (default 30 s).
	MinRefresh time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu        sync.Mutex
	keys      map[string]*rsa.PublicKey
	expires   time.Time // the keys may be used until then
	attempted time.Time // the last read, successful or not
	err       error     // the last read's error
	reads     int
}

// defaultKeyAge is how long keys are kept when the answer has no max-age.
const defaultKeyAge = 5 * time.Minute

// Key returns the key of ID kid. Its error wraps errUnknownKey for an ID the set does not
// have; any other error means the set could not be read.
func (k *KeySet) Key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.Now != nil {
		now = k.Now()
	}
	key, known := k.keys[kid]
	if known && now.Before(k.expires) {
		return key, nil
	}
	minRefresh := k.MinRefresh
	if minRefresh == 0 {
		minRefresh = 30 * time.Second
	}
	if k.attempted.IsZero() || now.Sub(k.attempted) >= minRefresh {
		k.read(ctx, now)
	}
	if k.err != nil && !now.Before(k.expires) {
		return nil, fmt.Errorf("reading the signing keys at %s: %w", k.URL, k.err)
	}
	if key, ok := k.keys[kid]; ok {
		return key, nil
	}
	return nil, fmt.Errorf("%w: %q is not one of the signing keys at %s", errUnknownKey, kid, k.URL)
}

// Reads is how often the set was read.
func (k *KeySet) Reads() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

// read fetches the set. The read outlives a cancelled request, so that a caller that hangs
// up cannot make it fail for everyone until the next read.
func (k *KeySet) read(ctx context.Context, now time.Time) {
	k.attempted, k.reads = now, k.reads+1
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	keys, age, err := fetchJWKS(ctx, k.Client, k.URL)
	if k.err = err; err != nil {
		return
	}
	k.keys, k.expires = keys, now.Add(age)
}

func fetchJWKS(ctx context.Context, client *http.Client, url string) (map[string]*rsa.PublicKey, time.Duration, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("%s", resp.Status)
	}
	var set struct {
		Keys []struct {
			Kty, Use, Alg, Kid, N, E string
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&set); err != nil {
		return nil, 0, fmt.Errorf("not a JWKS: %v", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, j := range set.Keys {
		if j.Kty != "RSA" || j.Kid == "" || (j.Use != "" && j.Use != "sig") || (j.Alg != "" && j.Alg != "RS256") {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(j.N)
		e, errE := base64.RawURLEncoding.DecodeString(j.E)
		if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 || len(n) < 256 {
			continue // malformed, or shorter than 2048 bits
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 {
			continue
		}
		keys[j.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	}
	if len(keys) == 0 {
		return nil, 0, errors.New("the JWKS has no RS256 signing key")
	}
	return keys, maxAge(resp.Header.Get("Cache-Control")), nil
}

// maxAge reads a Cache-Control header's max-age; no-store or no-cache keep nothing.
func maxAge(cc string) time.Duration {
	for _, d := range strings.Split(cc, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-store", "no-cache":
			return 0
		case "max-age":
			if s, err := strconv.Atoi(strings.Trim(value, `"`)); err == nil && s >= 0 {
				return time.Duration(s) * time.Second
			}
		}
	}
	return defaultKeyAge
}
