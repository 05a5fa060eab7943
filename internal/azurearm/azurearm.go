// Package azurearm calls Azure Resource Manager actions (POST RESOURCE_ID/ACTION) with an Entra
// ID token: what the Azure function hosts (reading peers' keys) and `ssfkit up` (syncing a
// function app's triggers) need of ARM, without a management SDK per resource provider.
package azurearm

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// DefaultEndpoint is Azure's public cloud Resource Manager.
const DefaultEndpoint = "https://management.azure.com"

// maxAnswer bounds the answer read from an action.
const maxAnswer = 1 << 20

// Client calls ARM actions.
type Client struct {
	Credential azcore.TokenCredential
	Endpoint   string       // default DefaultEndpoint
	HTTP       *http.Client // default http.DefaultClient
}

// StatusError is an action's answer other than 2xx.
type StatusError struct {
	Status string
	Body   string
}

func (e *StatusError) Error() string { return e.Status + ": " + e.Body }

func (c *Client) endpoint() string {
	return cmp.Or(strings.TrimSuffix(c.Endpoint, "/"), DefaultEndpoint)
}

// ActionURL is the URL Post calls (what `az rest --method post --url` takes).
func (c *Client) ActionURL(id, action, apiVersion string) string {
	return fmt.Sprintf("%s%s/%s?api-version=%s", c.endpoint(), id, action, apiVersion)
}

// Post calls action on the resource id (/subscriptions/...) at apiVersion and returns the
// answer's body.
func (c *Client) Post(ctx context.Context, id, action, apiVersion string) ([]byte, error) {
	tok, err := c.Credential.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{c.endpoint() + "/.default"}})
	if err != nil {
		return nil, fmt.Errorf("a Resource Manager token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ActionURL(id, action, apiVersion), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &StatusError{Status: resp.Status, Body: strings.TrimSpace(string(body))}
	}
	return body, nil
}
