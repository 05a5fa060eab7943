package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-zookeeper/zk"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/examples/travel"
	"github.com/ssfkit/ssfkit/internal/apps"
	"github.com/ssfkit/ssfkit/internal/testservers"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
	"github.com/ssfkit/ssfkit/orchestrator/ssftemporal"
)

// The console and the Temporal UI, in a real headless Chromium (Debian's, `make tools`), show
// what a scripted workload did, without a console error. SSFKIT_SCREENSHOTS=DIR also saves the
// main pages there (docs/console/ holds them).
func TestConsoleInAHeadlessBrowser(t *testing.T) {
	chromium, err := testservers.Chromium()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	base, out, stop, ports := startDevOnPorts(t, 3, func(ports []int) []string {
		os.RemoveAll(dir + "/temporal.db")
		return []string{"--app", "travel", "--store", "sqlite://" + dir + "/dev.db", "--temporal", temporalEmbedded,
			"--temporal-port", fmt.Sprint(ports[0]), "--temporal-db", dir + "/temporal.db", "--ui-addr", addr(ports[1]), "--zk-addr", addr(ports[2]),
			"--provenance", "full"}
	})
	defer stop()
	temporalAddr, uiAddr, zkAddr := addr(ports[0]), addr(ports[1]), addr(ports[2])
	if !strings.Contains(out.String(), "console     "+base+"/console/") || !strings.Contains(out.String(), "Temporal UI http://"+uiAddr) {
		t.Fatalf("the banner does not give the console and the Temporal UI:\n%s", out.String())
	}

	// The workload: a reservation as a workflow, one as SSF calls, a znode, a shared log.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(client.Options{HostPort: temporalAddr, Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	users := apps.TravelDevData().Users
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "res-console-1", TaskQueue: ssftemporal.DefaultTaskQueue}, travel.ReserveWorkflowName,
		travel.Request{Op: travel.OpReserve, User: users[1].Name, Password: users[1].Password, Hotel: "h10", Flight: "f10"})
	if err != nil {
		t.Fatal(err)
	}
	var conf travel.Confirmation
	if err := run.Get(ctx, &conf); err != nil || !conf.Booked {
		t.Fatalf("reservation workflow: %+v, %v", conf, err)
	}
	post(t, base, "frontend", "reserve-console-2", fmt.Sprintf(`{"op":"reserve","user":%q,"password":%q,"hotel":"h20","flight":"f20"}`, users[2].Name, users[2].Password))
	conn, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/console-demo", []byte("znode data from the test"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	tbl, err := store.Open(ctx, "sqlite://"+dir+"/dev.db?table=frontend")
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	l, err := sharedlog.New(tbl, "console-demo", sharedlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddColor(ctx, "orders", ""); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{"first record", "second record"} {
		if _, err := l.Append(ctx, "orders", []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}

	// A browser, failing the test on any console error or uncaught exception.
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil { // starts the browser; no timeout on this first call
		t.Fatal(err)
	}
	var mu sync.Mutex
	var consoleErrors []string
	go func() {
		for m, err := range chromedp.Console(browser) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				consoleErrors = append(consoleErrors, m.String())
				mu.Unlock()
			}
		}
	}()
	shots := os.Getenv("SSFKIT_SCREENSHOTS")
	visit := func(name, url string, wants ...string) {
		t.Helper()
		pageCtx, cancel := context.WithTimeout(browser, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(pageCtx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("%s (%s): %v", name, url, err)
		}
		for _, w := range wants {
			if text, err := waitForText(pageCtx, w); err != nil {
				t.Fatalf("%s (%s): %v; the page says:\n%s", name, url, err, text)
			}
		}
		if shots != "" {
			png, err := chromedp.Run(pageCtx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	visit("overview", base+"/console/", "frontend", "hotel", "Counts refreshed at")
	visit("ssf", base+"/console/ssf/frontend", "reserve-console-2", "done")
	visit("instance", base+"/console/ssf/frontend/instances/reserve-console-2", "call", "From the instance's logs")
	visit("trace", base+"/console/trace/frontend/reserve-console-2", "hotel", "flight", "write")
	visit("item", base+"/console/ssf/hotel/items/rooms/h20", "linked", "stored")
	visit("logs", base+"/console/logs", "console-demo", "orders", "second record")
	visit("coord", base+"/console/coord", "/console-demo", "znode data from the test")
	visit("temporal-ui", "http://"+uiAddr+"/namespaces/default/workflows", "res-console-1")
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Fatalf("the browser reported errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
}

// waitForText waits until the page's text contains s, and returns the text it saw last.
func waitForText(ctx context.Context, s string) (string, error) {
	var text string
	for {
		if t, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); err == nil {
			if text = t; strings.Contains(text, s) {
				return text, nil
			}
		}
		select {
		case <-ctx.Done():
			return text, fmt.Errorf("waiting for %q: %w", s, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
