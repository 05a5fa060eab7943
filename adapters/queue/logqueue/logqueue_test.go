package logqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/queue/logqueue"
	"github.com/ssfkit/ssfkit/adapters/queue/queuetest"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/internal/testtables"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

var queues atomic.Int64

func TestConformanceMem(t *testing.T) {
	queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue {
		return openQueue(t, fmt.Sprintf("mem://logqueue-%d", queues.Add(1)))
	})
}

func TestConformanceSQLite(t *testing.T) {
	tables := testtables.SQLite(t)
	queuetest.RunConformanceTests(t, func(t *testing.T) *queue.Queue {
		tbl := tables(t, "logqueue")
		return openQueue(t, tbl.Name())
	})
}

func openQueue(t *testing.T, storeURL string) *queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), "log://acme/jobs?create=true&store="+url.QueryEscape(storeURL))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Acknowledged messages are trimmed from the log behind the consumers' cursor.
func TestAckedPrefixIsTrimmed(t *testing.T) {
	ctx := context.Background()
	storeURL := fmt.Sprintf("mem://logqueue-trim-%d", queues.Add(1))
	q := openQueue(t, storeURL)
	for i := range 3 {
		if _, err := q.Send(ctx, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 2})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	for _, m := range msgs {
		if err := q.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if msgs, err = q.Receive(ctx, queue.ReceiveOptions{Max: 10}); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "2" {
		t.Fatalf("after two acks: %+v %v", msgs, err)
	}
	l := q.Driver().(*logqueue.Driver).Log()
	if _, err := l.Read(ctx, "jobs", 2); !errors.Is(err, sharedlog.ErrTrimmed) {
		t.Fatalf("an acknowledged record is still readable: %v", err)
	}
}

func TestBadURLs(t *testing.T) {
	for raw, want := range map[string]string{
		"log://acme?store=mem%3A%2F%2Fx":          "want log://TENANT/COLOR",
		"log://acme/jobs":                         "needs store=STORE_URL",
		"log://acme/jobs?store=mem%3A%2F%2Fy":     "no such color",
		"log://acme/jobs?store=nope%3A%2F%2Fy":    "nope",
		"log://acme/jobs?store=mem%3A%2F%2Fz&x=1": "x",
	} {
		if _, err := queue.Open(context.Background(), raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error saying %q", raw, err, want)
		}
	}
}
