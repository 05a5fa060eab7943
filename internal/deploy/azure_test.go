package deploy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/ssfkit/ssfkit/internal/azurearm"
)

type staticToken struct{}

func (staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "arm-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// After an Azure apply, each function app's triggers are synced through Resource Manager; a
// refusal is retried, and an app that stays unsynced fails `up` with the command to retry it.
func TestSyncTriggers(t *testing.T) {
	syncRetryWait = time.Millisecond
	const sites = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/"
	var mu sync.Mutex
	calls := map[string]int{}
	arm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer arm-token" || r.URL.Query().Get("api-version") != syncAPIVersion {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		app, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, sites), "/syncfunctiontriggers")
		if !ok {
			http.NotFound(w, r)
			return
		}
		calls[app]++
		switch {
		case app == "bank-teller" && calls[app] == 1:
			http.Error(w, "Encountered an error (ServiceUnavailable) from host runtime.", http.StatusBadRequest)
		case app == "bank-audit":
			http.Error(w, "AuthorizationFailed", http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer arm.Close()
	cfg := &Config{Cloud: "azure", SSFs: map[string]SSF{}, Coordination: map[string]Coordination{
		"zk": {FunctionIDs: []string{sites + "zk-writer", sites + "zk-heartbeat"}}}}
	for _, n := range []string{"accounts", "audit", "teller"} {
		cfg.SSFs[n] = SSF{Name: n, FunctionID: sites + "bank-" + n}
	}
	var progress bytes.Buffer
	o := Options{Cloud: "azure", Progress: &progress, Azure: &azurearm.Client{Credential: staticToken{}, Endpoint: arm.URL}}
	err := o.syncTriggers(context.Background(), cfg)
	if calls["bank-accounts"] != 1 || calls["bank-teller"] != 2 || calls["bank-audit"] != 3 || calls["zk-writer"] != 1 || calls["zk-heartbeat"] != 1 {
		t.Fatalf("sync calls %v, want accounts once, teller retried once, audit three times, the coordination apps once each", calls)
	}
	if err == nil || !strings.Contains(err.Error(), "1 function apps are not synced") ||
		!strings.Contains(err.Error(), "audit: 403 Forbidden") ||
		!strings.Contains(err.Error(), "az rest --method post --url '"+arm.URL+sites+"bank-audit/syncfunctiontriggers?api-version="+syncAPIVersion+"'") {
		t.Fatalf("error %v, want audit reported with the command that retries it", err)
	}
	for _, want := range []string{"accounts: triggers synced", "teller: 400 Bad Request", "teller: triggers synced",
		"coordination zk zk-writer: triggers synced", "coordination zk zk-heartbeat: triggers synced"} {
		if !strings.Contains(progress.String(), want) {
			t.Fatalf("progress %q lacks %q", progress.String(), want)
		}
	}

	cfg.Coordination["zk"] = Coordination{}
	if err := o.syncTriggers(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "coordination service zk: its coord_config has no function_ids") {
		t.Fatalf("a coordination service without function ids: %v", err)
	}
	delete(cfg.Coordination, "zk")
	delete(cfg.SSFs, "audit")
	cfg.SSFs["teller"] = SSF{Name: "teller"}
	if err := o.syncTriggers(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "SSF teller: the ssfkit_config output has no function_id") {
		t.Fatalf("a config without function ids: %v", err)
	}
}
