package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	"github.com/ssfkit/ssfkit/adapters/host/httphost"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// platformOnly admits the platform's own routes and refuses the rest, as the real verifiers do
// for callers other than the platform (their tests are httphost's).
type platformOnly struct{}

func (platformOnly) Verify(_ *http.Request, route httphost.Route) error {
	if route == httphost.RouteQueue || route == httphost.RouteHeartbeat {
		return nil
	}
	return httphost.ErrForbidden
}

// pushWaker delivers each wake-up to the writer's server as a Pub/Sub push.
type pushWaker struct{ url string }

func (w pushWaker) Wake(ctx context.Context, session int64) error {
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"data": []byte(fmt.Sprintf(`{"session":"%x"}`, session)), "messageId": "m"},
		"subscription": "projects/p/subscriptions/s", "deliveryAttempt": 1})
	resp, err := http.Post(w.url+"/queue", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("push answered %s", resp.Status)
	}
	return nil
}

// On Cloud Run, one service decides a proxy's requests from Pub/Sub pushes and expires a silent
// session on the heartbeat's timer route; with a role set, it serves only that role's route.
func TestWriterAndHeartbeatOnCloudRun(t *testing.T) {
	ctx := context.Background()
	fn, err := coordhost.Open(ctx, coordhost.Config{Environment: "t", Store: "mem://coord-http", Queue: "mem://q"})
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Close()
	s, err := httphost.NewTriggered(httphost.CloudRun, triggers(fn), platformOnly{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	tbl, err := store.Open(ctx, "mem://coord-http")
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	proxy, err := coord.New(ctx, tbl, coord.Config{Waker: pushWaker{srv.URL}, MinSessionTimeout: 100 * time.Millisecond, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	id, _, _, err := proxy.OpenSession(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := proxy.Write(ctx, coord.Caller{Session: id}, coord.Op{Kind: coord.OpCreate, Path: "/e", ACL: coord.OpenACLUnsafe, Mode: coord.Ephemeral}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	resp, err := http.Post(srv.URL+"/heartbeat", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	var report coordhost.HeartbeatReport
	err = json.NewDecoder(resp.Body).Decode(&report)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("heartbeat: %s, %v", resp.Status, err)
	}
	if _, err := proxy.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.View(func(v coord.View) {
		if _, err := v.Exists(coord.Caller{}, "/e", false); coord.CodeOf(err) != coord.NoNode || report.Zxid != v.Zxid() {
			t.Errorf("after the heartbeat (report %+v): exists /e: %v, want the expired session's ephemeral gone", report, err)
		}
	})

	for role, other := range map[string]string{coordhost.RoleWriter: "/heartbeat", coordhost.RoleHeartbeat: "/queue"} {
		fn.Config.Role = role
		s, err := httphost.NewTriggered(httphost.CloudRun, triggers(fn), platformOnly{})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, other, strings.NewReader("{}")))
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("the %s function answered %d on %s, which it does not serve", role, rec.Code, other)
		}
	}
}

func TestPlatformFromItsSettings(t *testing.T) {
	for env, want := range map[string]httphost.Platform{"FUNCTIONS_CUSTOMHANDLER_PORT": httphost.Azure, "K_SERVICE": httphost.CloudRun, "": ""} {
		got, err := platform(func(k string) string {
			if k == env {
				return "x"
			}
			return ""
		})
		if got != want || (want == "") != (err != nil) {
			t.Errorf("with %q set: %q, %v; want %q", env, got, err, want)
		}
	}
}
