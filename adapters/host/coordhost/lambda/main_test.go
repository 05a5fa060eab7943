package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ssfkit/ssfkit/adapters/host/coordhost"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	"github.com/ssfkit/ssfkit/adapters/store"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// sqsWaker hands each wake-up to the writer function as SQS would: one record in an event.
type sqsWaker struct {
	t *testing.T
	h handler
	n int
}

func (w *sqsWaker) Wake(ctx context.Context, session int64) error {
	w.n++
	body := fmt.Sprintf(`{"session":"%x"}`, session)
	event, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: fmt.Sprint("m", w.n), Body: body, EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": "1"}},
		{MessageId: "junk", Body: `{"session":"not hex"}`, EventSource: "aws:sqs"},
	}})
	resp, err := w.h.handle(ctx, event)
	if err != nil {
		return err
	}
	failed := resp.(events.SQSEventResponse).BatchItemFailures
	if len(failed) != 1 || failed[0].ItemIdentifier != "junk" {
		w.t.Errorf("batch failures %+v, want only the record that names no session", failed)
	}
	return nil
}

// The bootstrap's writer decides a proxy's requests from SQS events, and its heartbeat expires
// a silent session.
func TestWriterAndHeartbeatFunctions(t *testing.T) {
	ctx := context.Background()
	env := map[string]string{"SSFKIT_COORD_ROLE": "writer", "SSFKIT_ENVIRONMENT": "test",
		"SSFKIT_COORD_STORE": "mem://coord-lambda", "SSFKIT_COORD_QUEUE": "mem://coord-lambda"}
	cfg, err := coordhost.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	writer, err := coordhost.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	cfg.Role = coordhost.RoleHeartbeat
	heartbeat, err := coordhost.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer heartbeat.Close()

	tbl, err := store.Open(ctx, cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	waker := &sqsWaker{t: t, h: handler{writer}}
	proxy, err := coord.New(ctx, tbl, coord.Config{Waker: waker, MinSessionTimeout: 100 * time.Millisecond, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	id, _, _, err := proxy.OpenSession(ctx, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c := coord.Caller{Session: id}
	res, _, err := proxy.Write(ctx, c, coord.Op{Kind: coord.OpCreate, Path: "/e", Data: []byte("x"), ACL: coord.OpenACLUnsafe, Mode: coord.Ephemeral})
	if err != nil || res.Path != "/e" {
		t.Fatalf("create through the writer function: %+v, %v", res, err)
	}
	time.Sleep(200 * time.Millisecond) // past the session's timeout, without a heartbeat
	report, err := handler{heartbeat}.handle(ctx, json.RawMessage(`{"source":"aws.scheduler"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proxy.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var gone bool
	proxy.View(func(v coord.View) {
		_, err := v.Exists(coord.Caller{}, "/e", false)
		gone = coord.CodeOf(err) == coord.NoNode
	})
	if r, ok := report.(coordhost.HeartbeatReport); !gone || !ok || r.Zxid != proxy.LastZxid() {
		t.Fatalf("after the heartbeat (%+v): the expired session's ephemeral is still there", report)
	}
}
