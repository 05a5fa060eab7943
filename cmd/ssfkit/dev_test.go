package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCheckListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:0", false, true},
		{"[::1]:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.168.1.5:80", false, false},
		{"0.0.0.0:8080", true, true},
		{"8080", false, false},
	} {
		err := checkListenAddr(tc.addr, tc.public)
		if (err == nil) != tc.ok {
			t.Errorf("checkListenAddr(%q, public=%v) = %v, want ok=%v", tc.addr, tc.public, err, tc.ok)
		}
	}
}

func TestTablePerSSF(t *testing.T) {
	for _, tc := range []struct{ base, want, err string }{
		{base: "sqlite:///tmp/dev.db", want: "sqlite:///tmp/dev.db?table=teller"},
		{base: "sqlite:///tmp/dev.db?max_row_bytes=1000", want: "sqlite:///tmp/dev.db?max_row_bytes=1000&table=teller"},
		{base: "sqlite:///tmp/dev.db?table=x", err: "names a table"},
		{base: "mem://", want: "mem://"},
		{base: "mem://dev", want: "mem://dev_teller"},
		{base: "dynamodb://t", err: "embedded stores only"},
	} {
		f, err := tablePerSSF(tc.base)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("tablePerSSF(%q): error %v, want one containing %q", tc.base, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("tablePerSSF(%q): %v", tc.base, err)
		}
		if got, _ := f("teller"); got != tc.want {
			t.Errorf("tablePerSSF(%q)(teller) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

// syncBuffer is a bytes buffer safe for the server's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDevServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, []string{"--addr", "127.0.0.1:0", "--store", "sqlite://" + t.TempDir() + "/dev.db"}, &out, io.Discard)
	}()
	listening := regexp.MustCompile(`listening\s+(http://127\.0\.0\.1:\d+)`)
	base := ""
	for deadline := time.Now().Add(5 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("dev exited early: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev printed no address:\n%s", out.String())
		}
	}
	req, _ := http.NewRequest("POST", base+"/v1/ssf/accounts", strings.NewReader(`{"op":"open","account":"alice","amount":100}`))
	req.Header.Set("Idempotency-Key", "open-alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"output": true`) {
		t.Fatalf("open account: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("dev did not shut down")
	}
	if !strings.Contains(out.String(), "POST /v1/ssf/accounts 200") {
		t.Errorf("request not logged:\n%s", out.String())
	}
}
