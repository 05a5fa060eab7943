package httphost

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"

	"github.com/ssfkit/ssfkit/internal/azurearm"
)

// An Authorizer authenticates a call to a peer's function. refresh asks it to drop what it
// cached for the peer: the previous attempt was refused.
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request, peer, base string, refresh bool) error
}

// PlatformAuthorizer is the platform's way for functions to call each other: function keys
// read through Azure Resource Manager on Azure, Google ID tokens on Cloud Run.
func PlatformAuthorizer(ctx context.Context, platform Platform, getenv func(string) string) (Authorizer, error) {
	switch platform {
	case Azure:
		sites := getenv("SSFKIT_AZURE_SITES")
		if sites == "" {
			return nil, fmt.Errorf("httphost: SSFKIT_AZURE_SITES is not set (the ssf module sets it)")
		}
		// AZURE_CLIENT_ID, set by the module, selects the SSF's user-assigned identity.
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("httphost: Azure credentials: %w", err)
		}
		return &AzureFunctionKeys{Credential: cred, Sites: sites}, nil
	case CloudRun:
		return &GoogleIDTokens{NewSource: func(ctx context.Context, audience string) (oauth2.TokenSource, error) {
			return idtoken.NewTokenSource(ctx, audience)
		}}, nil
	}
	return nil, fmt.Errorf("httphost: unknown platform %q", platform)
}

// AzureFunctionKeys authorizes calls with the peer function app's default host key, which it
// reads through Azure Resource Manager (the listkeys action the peer grants to its peers'
// identities, and to no one else), so no key is ever stored in settings.
type AzureFunctionKeys struct {
	Credential azcore.TokenCredential
	// Sites is the ARM ID prefix of the environment's function apps:
	// /subscriptions/S/resourceGroups/RG/providers/Microsoft.Web/sites.
	Sites string
	// Management is the Resource Manager endpoint (default azurearm.DefaultEndpoint).
	Management string
	Client     *http.Client

	mu   sync.Mutex
	keys map[string]string // peer -> key
}

// listKeysAPIVersion is the Microsoft.Web API version of the listkeys call.
const listKeysAPIVersion = "2024-04-01"

func (a *AzureFunctionKeys) Authorize(ctx context.Context, r *http.Request, peer, base string, refresh bool) error {
	a.mu.Lock()
	key, ok := a.keys[peer]
	a.mu.Unlock()
	if !ok || refresh {
		var err error
		if key, err = a.listKey(ctx, base); err != nil {
			return err
		}
		a.mu.Lock()
		if a.keys == nil {
			a.keys = map[string]string{}
		}
		a.keys[peer] = key
		a.mu.Unlock()
	}
	r.Header.Set("x-functions-key", key)
	return nil
}

// listKey reads the default host key of the function app serving base (https://APP.azurewebsites.net).
func (a *AzureFunctionKeys) listKey(ctx context.Context, base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("peer URL %q names no function app", base)
	}
	app, _, _ := strings.Cut(u.Hostname(), ".")
	arm := azurearm.Client{Credential: a.Credential, Endpoint: a.Management, HTTP: a.Client}
	body, err := arm.Post(ctx, a.Sites+"/"+app+"/host/default", "listkeys", listKeysAPIVersion)
	if err != nil {
		return "", fmt.Errorf("listing the keys of %s (does %s grant this SSF's identity its peer invoker role?): %w", app, app, err)
	}
	var keys struct {
		FunctionKeys map[string]string `json:"functionKeys"`
	}
	if err := json.Unmarshal(body, &keys); err != nil || keys.FunctionKeys["default"] == "" {
		return "", fmt.Errorf("listing the keys of %s: no default function key in the answer", app)
	}
	return keys.FunctionKeys["default"], nil
}

// GoogleIDTokens authorizes calls with Google ID tokens whose audience is the peer's URL. The
// token goes twice: in X-Serverless-Authorization, which Cloud Run checks against the
// roles/run.invoker bindings of the peer's service (and strips of its signature before the
// request reaches the container), and in Authorization, which Cloud Run then leaves intact, so
// that the peer's host can check the token's signature itself (GoogleIDTokenVerifier).
type GoogleIDTokens struct {
	// NewSource returns a token source for an audience (idtoken.NewTokenSource in production:
	// the metadata server of the SSF's service account).
	NewSource func(ctx context.Context, audience string) (oauth2.TokenSource, error)

	mu      sync.Mutex
	sources map[string]oauth2.TokenSource // audience -> source, which caches its token
}

func (g *GoogleIDTokens) Authorize(ctx context.Context, r *http.Request, _, base string, refresh bool) error {
	g.mu.Lock()
	src, ok := g.sources[base]
	g.mu.Unlock()
	if !ok || refresh {
		// The source outlives this call, so it must not be bound to the call's context.
		s, err := g.NewSource(context.WithoutCancel(ctx), base)
		if err != nil {
			return fmt.Errorf("an ID token source for %s: %w", base, err)
		}
		src = oauth2.ReuseTokenSource(nil, s)
		g.mu.Lock()
		if g.sources == nil {
			g.sources = map[string]oauth2.TokenSource{}
		}
		g.sources[base] = src
		g.mu.Unlock()
	}
	tok, err := src.Token()
	if err != nil {
		return fmt.Errorf("an ID token for %s: %w", base, err)
	}
	tok.SetAuthHeader(r)
	r.Header.Set("X-Serverless-Authorization", r.Header.Get("Authorization"))
	return nil
}
