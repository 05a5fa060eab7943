package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// ssfkit log lists, reads, trims and collects a log that an application wrote.
func TestLogCommand(t *testing.T) {
	ctx := context.Background()
	url := "sqlite://" + filepath.Join(t.TempDir(), "app.db") + "?table=log"
	tbl, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	l, err := sharedlog.New(tbl, "acme", sharedlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AddColor(ctx, "orders", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, "orders", []byte("first"), []byte{0xff, 0x00}, []byte("third")); err != nil {
		t.Fatal(err)
	}
	ssfkit := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append(args, "-store", url), &stdout, &stderr)
		return stdout.String(), err
	}
	if out, err := ssfkit("log", "colors", "-tenant", "acme"); err != nil || out != "orders\ttail 3\n" {
		t.Fatalf("colors: %q, %v", out, err)
	}
	if out, err := ssfkit("log", "read", "-tenant", "acme", "-color", "orders", "-limit", "2"); err != nil || out != "1\tfirst\n2\tbase64:/wA=\n" {
		t.Fatalf("read: %q, %v", out, err)
	}
	if out, err := ssfkit("log", "trim", "-tenant", "acme", "-color", "orders", "-upto", "2"); err != nil || !strings.Contains(out, "trimmed orders up to 2") {
		t.Fatalf("trim: %q, %v", out, err)
	}
	if _, err := ssfkit("log", "read", "-tenant", "acme", "-color", "orders"); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("read from a trimmed SN: %v", err)
	}
	if out, err := ssfkit("log", "read", "-tenant", "acme", "-color", "orders", "-from", "3"); err != nil || out != "3\tthird\n" {
		t.Fatalf("read after the trim: %q, %v", out, err)
	}
	if out, err := ssfkit("log", "collect"); err != nil || out != "collected 1 tenants: 2 records deleted, 0 unfinished appends finished, 0 append rows deleted\n" {
		t.Fatalf("collect: %q, %v", out, err)
	}
	if out, err := ssfkit("log", "colors", "-tenant", "globex"); err != nil || !strings.Contains(out, "tenant globex has no color") {
		t.Fatalf("another tenant's colors: %q, %v", out, err)
	}
	// A color that does not exist fails; one that exists with nothing to read says so, and
	// succeeds.
	if out, err := ssfkit("log", "read", "-tenant", "acme", "-color", "refunds"); err == nil || out != "" || !strings.Contains(err.Error(), `tenant acme has no color "refunds"`) {
		t.Fatalf("read of a missing color: %q, %v", out, err)
	}
	if err := l.AddColor(ctx, "refunds", ""); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"log", "read", "-store", url, "-tenant", "acme", "-color", "refunds"}, &stdout, &stderr); err != nil || stdout.Len() != 0 ||
		!strings.Contains(stderr.String(), "color refunds has no record from SN 1 on (its tail is 0)") {
		t.Fatalf("read of an empty color: %q, %q, %v", stdout.String(), stderr.String(), err)
	}
}
