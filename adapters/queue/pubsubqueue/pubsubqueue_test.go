package pubsubqueue_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
)

func TestConformance(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue {
		q, err := queue.Open(context.Background(), queuetest.PubSubURL(t))
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	u, _ := url.Parse(queuetest.PubSubURL(t))
	emulator := "&emulator=" + u.Query().Get("emulator")
	topic := strings.Trim(u.Path, "/")
	created, err := queue.Open(context.Background(), u.String()) // creates the topic
	if err != nil {
		t.Fatal(err)
	}
	defer created.Close()
	for _, tc := range []struct {
		url  string
		want error
		msg  string
	}{
		{"pubsub://test-project/nope?create=false" + emulator, queue.ErrNotFound, "create=true"},
		{"pubsub://test-project/" + topic + "?subscription=nope" + emulator, queue.ErrNotFound, "create=true"},
		{"pubsub://test-project/" + topic + "?colour=blue" + emulator, queue.ErrInvalid, `unknown parameter "colour"`},
		{"pubsub://test-project/" + topic + "?max_message_bytes=20000000" + emulator, queue.ErrInvalid, "max_message_bytes"},
		{"pubsub://test-project?create=true" + emulator, queue.ErrInvalid, "want pubsub://PROJECT/TOPIC"},
		{"pubsub://test-project/googtopic?create=true" + emulator, queue.ErrInvalid, "want pubsub://PROJECT/TOPIC"},
		{"pubsub://Bad_Project/t1?create=true" + emulator, queue.ErrInvalid, "want pubsub://PROJECT/TOPIC"},
		{"pubsub://test-project/t1?subscription=a/b" + emulator, queue.ErrInvalid, "subscription"},
	} {
		q, err := queue.Open(context.Background(), tc.url)
		if err == nil {
			q.Close()
			t.Errorf("Open(%s) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Open(%s): %v, want %v mentioning %q", tc.url, err, tc.want, tc.msg)
		}
	}
}

// Without subscription= a queue can send, and says why it cannot receive.
func TestSendOnly(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	good := queuetest.PubSubURL(t)
	full, err := queue.Open(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	u, _ := url.Parse(good)
	q := u.Query()
	q.Del("subscription")
	q.Del("create")
	u.RawQuery = q.Encode()
	send, err := queue.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	if _, err := send.Send(t.Context(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := send.Receive(t.Context(), queue.ReceiveOptions{}); !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "only send") {
		t.Fatalf("Receive without a subscription: %v", err)
	}
	if ms, err := full.Receive(t.Context(), queue.ReceiveOptions{Wait: 5 * time.Second}); err != nil || len(ms) != 1 || string(ms[0].Body) != "x" {
		t.Fatalf("the subscription got %v, %v", ms, err)
	}
}

func TestMissingCredentials(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
	_, err := queue.Open(context.Background(), "pubsub://test-project/jobs")
	if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "no usable Google credentials") {
		t.Fatalf("without credentials: %v", err)
	}
}
