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
