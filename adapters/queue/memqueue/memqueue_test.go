package memqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.RunConformanceTests(t, func(*testing.T) *queue.Queue {
		return queue.New(memqueue.New(memqueue.DefaultMaxMessageBytes), "mem://")
	})
}

// Opens of one name share the queue; mem:// is private.
func TestSharedByName(t *testing.T) {
	ctx := context.Background()
	name := queuetest.MemURL(t)
	a, err := queue.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := queue.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	private, err := queue.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Send(ctx, []byte("shared"))
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := private.Receive(ctx, queue.ReceiveOptions{}); err != nil || len(ms) != 0 {
		t.Fatalf("a private queue received %v, %v", ms, err)
	}
	ms, err := b.Receive(ctx, queue.ReceiveOptions{})
	if err != nil || len(ms) != 1 || ms[0].ID != id {
		t.Fatalf("the second open received %v, %v; want message %s", ms, err, id)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, bad := range []string{"mem://q?max_message_bytes=0", "mem://q?colour=blue", "mem://q/path"} {
		if _, err := queue.Open(context.Background(), bad); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", bad, err)
		}
	}
	q, err := queue.Open(context.Background(), "mem://?max_message_bytes=100")
	if err != nil || q.Limits().MaxMessageBytes != 100 {
		t.Fatalf("max_message_bytes=100: %v, %+v", err, q)
	}
}
