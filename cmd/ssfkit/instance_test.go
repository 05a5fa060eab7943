package main

import (
	"github.com/ssfkit/ssfkit/internal/apps"

	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/host/local"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

// ssfkit instance tells an operator what became of a key: done with its output, pending with
// the collector's launches and the last error, unknown; a given-up instance says so.
func TestInstanceCommand(t *testing.T) {
	ctx := context.Background()
	url := apps.SQLiteURL(t.TempDir()+"/app.db") + "?table=teller"
	tbl, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	h := local.NewHost()
	defer h.Close()
	if _, err := h.Add(ssf.Config{Name: "teller", Store: tbl, Handler: func(env *ssf.Env, in json.RawMessage) (any, error) {
		if string(in) == `"bad"` {
			_, err := env.SyncInvoke("nobody", nil)
			return nil, err
		}
		return "paid", nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Invoke(ctx, "teller", "k-ok", "good"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Invoke(ctx, "teller", "k-bad", "bad"); err == nil {
		t.Fatal("the bad request finished")
	}
	h.Close()
	tbl.Close()
	for id, want := range map[string][]string{
		"k-ok":  {"instance k-ok: done", `output: "paid"`},
		"k-bad": {"instance k-bad: pending", "launched 0 times", `last error: invoke nobody`},
		"k-new": {"instance k-new: unknown"},
	} {
		var out bytes.Buffer
		if err := run(ctx, []string{"instance", "-store", url, id}, &out, &out); err != nil {
			t.Fatalf("%s: %v\n%s", id, err, out.String())
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the output does not say %q:\n%s", id, w, out.String())
			}
		}
	}
	gaveUp := ssf.IntentStatus{Exists: true, Done: true, Result: ssf.Result{Error: ssf.ErrGaveUp.Error() + ": SSF teller, instance k: 10 launches"}}
	if s := instanceStatus(gaveUp); s != "given up" {
		t.Errorf("a given-up instance reads %q", s)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"instance", "-store", url}, &out, &out); err == nil {
		t.Error("no instance id: accepted")
	}
}
