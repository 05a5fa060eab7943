package azurequeue_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue {
		q, err := queue.Open(context.Background(), queuetest.AzureURL(t))
		if err != nil {
			t.Fatal(err)
		}
		return q
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	good := queuetest.AzureURL(t)
	endpoint := url.QueryEscape(testservers.AzuriteAddrs(t).Queue)
	wrongKey := url.UserPassword(testservers.AzuriteAccount, "d3Jvbmc=").String()
	for _, tc := range []struct {
		url  string
		want error
		msg  string
	}{
		{strings.Replace(good, "&create=true", "", 1), queue.ErrNotFound, "does not exist"},
		{good + "&colour=blue", queue.ErrInvalid, `unknown parameter "colour"`},
		{good + "&max_message_bytes=50000", queue.ErrInvalid, "max_message_bytes"},
		{good + "&message_ttl=0", queue.ErrInvalid, "message_ttl"},
		{strings.Replace(good, "@q-", "@Q_", 1), queue.ErrInvalid, "queue name"},
		{"azqueue://" + wrongKey + "@jobs?endpoint=" + endpoint, queue.ErrInvalid, "refused the credentials"},
		{"azqueue://jobs?account=Bad_Name", queue.ErrInvalid, "storage account name"},
		{"azqueue://devstoreaccount1:a2V5@jobs?endpoint=" + url.QueryEscape("http://127.0.0.1:1/devstoreaccount1"), queue.ErrUnavailable, ""},
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
		if strings.Contains(err.Error(), testservers.AzuriteKey[:20]) {
			t.Errorf("error reveals the key: %v", err)
		}
	}
}

func TestMissingCredentials(t *testing.T) {
	for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"} {
		t.Setenv(k, "")
	}
	_, err := queue.Open(context.Background(), "azqueue://jobs")
	if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "no storage account") {
		t.Errorf("without an account: %v", err)
	}
}

// The connection string in the environment supplies endpoint and key.
func TestConnectionString(t *testing.T) {
	name := queuetest.Name("cs")
	endpoint := testservers.AzuriteAddrs(t).Queue
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=http;AccountName="+testservers.AzuriteAccount+
		";AccountKey="+testservers.AzuriteKey+";QueueEndpoint="+endpoint+";")
	q, err := queue.Open(context.Background(), "azqueue://"+name+"?create=true")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Send(t.Context(), []byte("hi")); err != nil {
		t.Fatal(err)
	}
}

// message_ttl bounds how long a sent message can wait to be received: a start cannot be
// delivered later than the ssf module's bound.
func TestMessageTTL(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(context.Background(), queuetest.AzureURL(t)+"&message_ttl=1")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	if _, err := q.Send(ctx, []byte("start")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1, Lease: time.Minute})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("a message received after its time-to-live: %d messages, %v", len(msgs), err)
	}
}

// Storage Queues do not say when a message was first delivered: the driver knows it on the
// first delivery and records it in the message (its envelope) when Retry or Extend rewrites it,
// when it still fits in Azure's 64 KiB.
func TestFirstReceivedRecorded(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	ctx := t.Context()
	q, err := queue.Open(ctx, queuetest.AzureURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	receive := func() *queue.Message {
		t.Helper()
		ms, err := q.Receive(ctx, queue.ReceiveOptions{Wait: 10 * time.Second, Lease: time.Minute})
		if err != nil || len(ms) != 1 {
			t.Fatalf("Receive: %d messages, %v", len(ms), err)
		}
		return ms[0]
	}
	attrs := map[string]string{"k": "v"}
	if _, err := q.SendWithAttributes(ctx, []byte("small"), attrs); err != nil {
		t.Fatal(err)
	}
	m := receive()
	first := m.FirstReceived
	if first.IsZero() || m.Sent.IsZero() {
		t.Fatalf("first delivery: FirstReceived %v, Sent %v; want both", first, m.Sent)
	}
	if err := q.Extend(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := q.Retry(ctx, m, 0); err != nil { // the rewritten message's new receipt
		t.Fatal(err)
	}
	m = receive()
	if m.Attempts != 2 || !m.FirstReceived.Equal(first) || string(m.Body) != "small" || m.Attributes["k"] != "v" || len(m.Attributes) != 1 {
		t.Fatalf("second delivery: %+v; want FirstReceived %v and the message as sent", m, first)
	}
	if err := q.Ack(ctx, m); err != nil {
		t.Fatal(err)
	}
	// A message at the size limit has no room for the record: Retry still works.
	big := strings.Repeat("x", q.Limits().MaxMessageBytes)
	if _, err := q.Send(ctx, []byte(big)); err != nil {
		t.Fatal(err)
	}
	m = receive()
	if err := q.Retry(ctx, m, 0); err != nil {
		t.Fatalf("Retry of a message at the size limit: %v", err)
	}
	if m = receive(); m.Attempts != 2 || string(m.Body) != big || !m.FirstReceived.IsZero() {
		t.Fatalf("second delivery of a message at the limit: attempt %d, %d bytes, FirstReceived %v", m.Attempts, len(m.Body), m.FirstReceived)
	}
}
