package sqsqueue_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

func open(t *testing.T, rawURL string) *queue.Queue {
	q, err := queue.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestConformance(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue { return open(t, queuetest.SQSURL(t)) })
}

func TestOpenErrors(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	good := queuetest.SQSURL(t)
	missing := strings.Replace(good, "&create=true", "", 1)
	for _, tc := range []struct {
		url  string
		want error
		msg  string
	}{
		{missing, queue.ErrNotFound, "does not exist in region us-east-1"},
		{good + "&colour=blue", queue.ErrInvalid, `unknown parameter "colour"`},
		{good + "&max_message_bytes=300000", queue.ErrInvalid, "max_message_bytes"},
		{strings.Replace(good, "@q-", "@orders.fifo-", 1), queue.ErrInvalid, "must be 1 to 80 letters"},
		{strings.Replace(good, "create=true", "create=maybe", 1), queue.ErrInvalid, "create"},
		{"sqs://k:s@127.0.0.1/123456789012/q?region=us-east-1&create=true", queue.ErrInvalid, "create=true needs the queue's name"},
		{"sqs://k:s@q?region=us-east-1&endpoint=" + url.QueryEscape("http://127.0.0.1:1"), queue.ErrUnavailable, ""},
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
		if strings.Contains(err.Error(), ":testing@") {
			t.Errorf("error reveals the secret: %v", err)
		}
	}
}

// The queue URL form reaches the queue the name form created.
func TestQueueURLForm(t *testing.T) {
	t.Parallel() // after the tests that set environment variables
	endpoint := url.QueryEscape(testservers.Moto.Addr(t))
	name := queuetest.Name("byurl")
	byName := open(t, "sqs://testing:testing@"+name+"?region=us-east-1&create=true&endpoint="+endpoint)
	defer byName.Close()
	byURL := open(t, "sqs://testing:testing@sqs.us-east-1.amazonaws.com/123456789012/"+name+"?endpoint="+endpoint)
	defer byURL.Close()
	id, err := byURL.Send(t.Context(), []byte("via url"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := byName.Receive(t.Context(), queue.ReceiveOptions{Wait: 5 * time.Second})
	if err != nil || len(ms) != 1 || ms[0].ID != id {
		t.Fatalf("got %v, %v; want message %s", ms, err, id)
	}
}

func TestMissingCredentials(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
	} {
		t.Setenv(k, v)
	}
	_, err := queue.Open(context.Background(), "sqs://orders")
	if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("without a region: %v", err)
	}
	_, err = queue.Open(context.Background(), "sqs://orders?region=eu-west-1")
	if !errors.Is(err, queue.ErrInvalid) || !strings.Contains(err.Error(), "no usable AWS credentials") {
		t.Errorf("without credentials: %v", err)
	}
}
