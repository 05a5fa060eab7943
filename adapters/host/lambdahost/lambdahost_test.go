package lambdahost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ssfkit/ssfkit/adapters/host"
	"github.com/ssfkit/ssfkit/adapters/queue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore"
	"github.com/ssfkit/ssfkit/examples/bank"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog/logtest"
	"github.com/ssfkit/ssfkit/orchestrator/ssf"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	good := map[string]string{"_HANDLER": "ssf", "SSFKIT_SSF": "teller", "SSFKIT_ENVIRONMENT": "bank", "SSFKIT_STORE": "mem://t",
		"SSFKIT_QUEUE": "mem://q", "SSFKIT_LIFETIME_SECONDS": "59", "SSFKIT_GC_BOUND_SECONDS": "300"}
	c, err := ConfigFromEnv(env(good))
	if err != nil || c.Lifetime != 59*time.Second || c.GCBound != 300*time.Second || c.RelaunchDelay != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	for change, want := range map[string]string{
		"_HANDLER=bootstrap":         `handler setting (_HANDLER) is "bootstrap"`,
		"SSFKIT_STORE=":              "SSFKIT_STORE is not set",
		"SSFKIT_GC_BOUND_SECONDS=5m": `SSFKIT_GC_BOUND_SECONDS="5m" must be a positive whole number`,
		"SSFKIT_LIFETIME_SECONDS=-1": "SSFKIT_LIFETIME_SECONDS",
		"SSFKIT_ENVIRONMENT=":        "SSFKIT_ENVIRONMENT is not set",
	} {
		bad := map[string]string{}
		for k, v := range good {
			bad[k] = v
		}
		k, v, _ := strings.Cut(change, "=")
		bad[k] = v
		if _, err := ConfigFromEnv(env(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error saying %q", change, err, want)
		}
	}
}

// functions stands in for the Lambda service: Invoke runs the named function's handler in
// this process, with the payload and response marshalled as Lambda marshals them, and
// Event invocations in the background. (Moto, the AWS emulator the other tests use, cannot run
// a Go function without Docker.)
type functions struct {
	hosts map[string]*Host
	wg    sync.WaitGroup
	calls sync.Map // function name -> *int
}

func (f *functions) Invoke(ctx context.Context, in *awslambda.InvokeInput, _ ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	h, ok := f.hosts[aws.ToString(in.FunctionName)]
	if !ok {
		return nil, fmt.Errorf("ResourceNotFoundException: Function not found: %s", aws.ToString(in.FunctionName))
	}
	run := func(ctx context.Context) *awslambda.InvokeOutput {
		resp, err := h.Handle(ctx, in.Payload)
		if err != nil {
			b, _ := json.Marshal(map[string]string{"errorMessage": err.Error()})
			return &awslambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: b}
		}
		b, _ := json.Marshal(resp)
		return &awslambda.InvokeOutput{StatusCode: 200, Payload: b}
	}
	if in.InvocationType == types.InvocationTypeEvent {
		f.wg.Add(1)
		go func() { defer f.wg.Done(); run(context.Background()) }()
		return &awslambda.InvokeOutput{StatusCode: 202}, nil
	}
	return run(ctx), nil
}

// The bank example's three SSFs as Lambda functions: sync calls, callbacks and asynchronous
// starts cross functions through the Lambda API; the money is conserved; the collectors run
// as their own functions; queued starts arrive as SQS events.
func TestBankOnLambdaHosts(t *testing.T) {
	ctx := context.Background()
	f := &functions{hosts: map[string]*Host{}}
	runtimes := map[string]*ssf.Runtime{}
	newHost := func(name, role string) *Host {
		t.Helper()
		cfg, err := ConfigFromEnv(env(map[string]string{"_HANDLER": role, "SSFKIT_SSF": name, "SSFKIT_ENVIRONMENT": "bank",
			"SSFKIT_STORE": fmt.Sprintf("mem://%s-%s", t.Name(), name), "SSFKIT_QUEUE": fmt.Sprintf("mem://%s-%s", t.Name(), name)}))
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(ctx, cfg, bank.Handlers(), f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	for _, name := range []string{bank.Teller, bank.Accounts, bank.Audit} {
		h := newHost(name, RoleSSF)
		f.hosts["bank-"+name] = h
		runtimes[name] = h.Runtime()
	}
	invoke := func(fn string, payload any) json.RawMessage {
		t.Helper()
		b, _ := json.Marshal(payload)
		out, err := f.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: b})
		if err != nil || out.FunctionError != nil {
			t.Fatalf("invoking %s: %v %s", fn, err, out.Payload)
		}
		return out.Payload
	}
	opening := map[string]int64{"alice": 100, "bob": 100}
	for name, amount := range opening {
		invoke("bank-accounts", ssf.Request{InstanceID: "open-" + name, Input: json.RawMessage(fmt.Sprintf(`{"op":"open","account":%q,"amount":%d}`, name, amount))})
	}
	transfers := map[string]bank.Transfer{"t1": {From: "alice", To: "bob", Amount: 30}, "t2": {From: "bob", To: "alice", Amount: 500}}
	receipts := map[string]bank.Receipt{}
	for id, tr := range transfers {
		in, _ := json.Marshal(tr)
		var res ssf.Result
		if err := json.Unmarshal(invoke("bank-teller", ssf.Request{InstanceID: id, Input: in}), &res); err != nil || res.Err() != nil {
			t.Fatalf("transfer %s: %v %v", id, err, res.Err())
		}
		var r bank.Receipt
		if err := json.Unmarshal(res.Output, &r); err != nil {
			t.Fatal(err)
		}
		receipts[id] = r
	}
	// A repeated request (a client's retry) is answered from the intent, not run again.
	again, _ := json.Marshal(transfers["t1"])
	invoke("bank-teller", ssf.Request{InstanceID: "t1", Input: again})
	f.wg.Wait()
	// Audit's starts wait on its queue: deliver them as the event source mapping would.
	if n := deliverQueued(t, f.hosts["bank-audit"]); n != 2 {
		t.Fatalf("audit's queue delivered %d starts, want 2", n)
	}

	// An asynchronous start delivered by SQS, and a message that is not a request: the
	// second is reported failed so SQS dead-letters it after its retries.
	start, _ := json.Marshal(ssf.Request{Kind: ssf.KindInvoke, InstanceID: "open-carol", Input: json.RawMessage(`{"op":"open","account":"carol","amount":5}`), Async: true})
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", EventSource: "aws:sqs", Body: string(start)},
		{MessageId: "m2", EventSource: "aws:sqs", Body: "not a request"},
	}}
	raw, _ := json.Marshal(batch)
	resp, err := f.hosts["bank-accounts"].Handle(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(events.SQSEventResponse); len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Fatalf("batch response %+v, want only m2 failed", r)
	}
	opening["carol"] = 5

	items, err := bank.Snapshot(ctx, runtimes)
	if err != nil {
		t.Fatal(err)
	}
	if err := bank.Check(opening, receipts, transfers, items); err != nil {
		t.Fatal(err)
	}

	// The collectors are functions of their own, on the same table.
	ic, gc := newHost(bank.Teller, RoleIntentCollector), newHost(bank.Teller, RoleGarbageCollector)
	if r, err := ic.Handle(ctx, json.RawMessage(`{"collector":"intent-collector"}`)); err != nil || r.(ssf.ICReport).Pending != 0 {
		t.Fatalf("intent collector: %+v %v", r, err)
	}
	trimmed := logtest.LeaveTrimmed(t, gc.Runtime().Config().Store)
	if r, err := gc.Handle(ctx, json.RawMessage(`{"collector":"garbage-collector"}`)); err != nil || r.(host.GarbageReport).Stamped == 0 || r.(host.GarbageReport).Logs.RecordsDeleted != trimmed {
		t.Fatalf("garbage collector: %+v %v, want the finished instances stamped and %d log records deleted", r, err, trimmed)
	}
}

// deliverQueued hands the host's queued messages to it as SQS events, the way Lambda's event
// source mapping does, and acknowledges those it did not report failed.
func deliverQueued(t *testing.T, h *Host) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for {
		msgs, err := h.fn.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return n
		}
		var e events.SQSEvent
		for _, m := range msgs {
			e.Records = append(e.Records, events.SQSMessage{MessageId: m.ID, EventSource: "aws:sqs", Body: string(m.Body)})
		}
		raw, _ := json.Marshal(e)
		resp, err := h.Handle(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if failed := resp.(events.SQSEventResponse).BatchItemFailures; len(failed) > 0 {
			t.Fatalf("queued starts failed: %+v", failed)
		}
		for _, m := range msgs {
			if err := h.fn.Queue.Ack(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		n += len(msgs)
	}
}

func TestWrongSSF(t *testing.T) {
	cfg := Config{Role: RoleSSF, Config: host.Config{SSF: "nobody", Environment: "bank", Store: "mem://", Queue: "mem://"}}
	if _, err := New(context.Background(), cfg, bank.Handlers(), &functions{}); err == nil || !strings.Contains(err.Error(), `no SSF named "nobody"`) {
		t.Fatalf("got %v", err)
	}
}

// SQS records the host dead-letters itself, with the reason: a poison start, and one that fails
// on the queue's last delivery (SSFKIT_MAX_RECEIVE_COUNT); neither is reported failed, so SQS
// deletes them instead of redriving them without a reason. Earlier failures are reported.
func TestQueuedStartsDeadLettered(t *testing.T) {
	ctx := context.Background()
	cfg, err := ConfigFromEnv(env(map[string]string{"_HANDLER": RoleSSF, "SSFKIT_SSF": bank.Teller, "SSFKIT_ENVIRONMENT": "bank",
		"SSFKIT_STORE": "mem://" + t.Name(), "SSFKIT_QUEUE": "mem://" + t.Name(), "SSFKIT_DEAD_LETTER_QUEUE": "mem://" + t.Name() + "-dlq",
		"SSFKIT_MAX_RECEIVE_COUNT": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(ctx, cfg, bank.Handlers(), &functions{}) // no accounts function: every transfer fails
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	transfer := func(id string) string {
		in, _ := json.Marshal(bank.Transfer{From: "a", To: "b", Amount: 1})
		b, _ := json.Marshal(ssf.Request{Kind: ssf.KindInvoke, InstanceID: id, Input: in, Async: true})
		return string(b)
	}
	sent, firstReceived := time.UnixMilli(1_750_000_000_000).UTC(), time.UnixMilli(1_750_000_001_000).UTC()
	record := func(id, body string, receives int, attrs map[string]string) events.SQSMessage {
		r := events.SQSMessage{MessageId: id, EventSource: "aws:sqs", Body: body, MessageAttributes: map[string]events.SQSMessageAttribute{},
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(receives), "SentTimestamp": fmt.Sprint(sent.UnixMilli()),
				"ApproximateFirstReceiveTimestamp": fmt.Sprint(firstReceived.UnixMilli())}}
		for k, v := range attrs {
			r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(v)}
		}
		return r
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		record("poison", "bm90IGEgcmVxdWVzdA==", 1, map[string]string{"ssfkit-encoding": "base64", "trace": "t-1"}), // "not a request", base64
		record("early", transfer("t-early"), 2, nil),
		record("last", transfer("t-last"), 3, nil),
	}}
	raw, _ := json.Marshal(batch)
	resp, err := h.Handle(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(events.SQSEventResponse); len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "early" {
		t.Fatalf("batch response %+v, want only the early delivery failed", r)
	}
	ms, err := h.fn.DeadLetter.Receive(ctx, queue.ReceiveOptions{Max: 10, Wait: time.Second})
	if err != nil || len(ms) != 2 {
		t.Fatalf("dead letters: %d, %v; want 2", len(ms), err)
	}
	for _, m := range ms {
		rec, err := queue.ParseDeadLetter(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		a := m.Attributes
		if a[queue.AttrSource] != h.fn.Queue.Name() || a[queue.AttrMessageID] != rec.MessageID || a[queue.AttrAttempts] != fmt.Sprint(rec.Attempts) ||
			a[queue.AttrError] != queue.AttributeValue(rec.Error) || a[queue.AttrLastFailure] != rec.LastFailure.Format(time.RFC3339Nano) {
			t.Errorf("record %+v has attributes %q", rec, a)
		}
		switch rec.MessageID {
		case "poison":
			if string(rec.Body) != "not a request" || rec.Attempts != 1 || !strings.Contains(rec.Error, "not a JSON request") ||
				rec.Attributes["trace"] != "t-1" || len(rec.Attributes) != 1 || !rec.FirstFailure.Equal(rec.LastFailure) {
				t.Errorf("poison record %+v", rec)
			}
		case "last":
			// The first failure is SQS's first receive: the start of the first failed delivery.
			if rec.Attempts != 3 || !strings.Contains(rec.Error, "bank-accounts") || !rec.FirstFailure.Equal(firstReceived) ||
				a[queue.AttrFirstFailure] != "2025-06-15T15:06:41Z" {
				t.Errorf("record of the last delivery %+v, attributes %q; want first failure %v", rec, a, firstReceived)
			}
		default:
			t.Errorf("unexpected record %+v", rec)
		}
	}
}
