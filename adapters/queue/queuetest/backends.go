package queuetest

import (
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	_ "github.com/ssfkit/ssfkit/adapters/queue/azurequeue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/logqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/memqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/pubsubqueue"
	_ "github.com/ssfkit/ssfkit/adapters/queue/sqsqueue"
	_ "github.com/ssfkit/ssfkit/adapters/store/memstore" // the log queue's store
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// Backends is the queue matrix: every queue backend the default test run covers, one row each.
// The runtime's queue tests (adapters/host/local) loop over it, one subtest per row named by
// the row's Name; each driver's own conformance test takes its row's URL function (SQSURL for
// sqsqueue, ...); cmd/ssfkit checks that its drivers.go links every row's driver in.
//
// A new queue driver is its package (adapters/queue/NAME, with its conformance test), a function
// returning the URL of a fresh queue here, and one row (whose blank import above links it in).
var Backends = []Backend{
	{Name: "mem", Scheme: "mem", URL: MemURL},
	{Name: "sqs", Scheme: "sqs", Server: testservers.Moto.Name, URL: SQSURL},
	{Name: "azure-queues", Scheme: "azqueue", Server: testservers.Azurite.Name, URL: AzureURL},
	{Name: "pubsub", Scheme: "pubsub", Server: pubsubEmulator.Name, URL: PubSubURL},
	{Name: "log", Scheme: "log", URL: LogURL}, // the shared log as the queue (adapters/queue/logqueue)
}

// Backend is one row of the queue matrix.
type Backend struct {
	// Name names the row's subtest (TestQueuedSpawnExactlyOnce/sqs).
	Name string
	// Scheme is the URL scheme the row's driver registers; cmd/ssfkit/drivers.go must link the
	// driver in (TestEveryBackendIsLinkedIn).
	Scheme string
	// Server names what serves the queues, which URL starts on 127.0.0.1 once per test binary
	// (an emulator, in process or not; "" for a queue in the test's memory). A server that is
	// not installed fails the test, saying how to install it: it never skips.
	Server string
	// URL returns the URL of a fresh, empty queue, created on first Open.
	URL func(testing.TB) string
}

// The functions below return the URL of a fresh, empty queue on each backend of the matrix,
// created on first Open. They start the emulators on first use (moto, Azurite: call
// testservers.StopAll from TestMain; Pub/Sub: pstest, in process) and fail the test, saying how
// to install them, if they are missing.

var names atomic.Int64

// Name returns a queue name unique within the test binary, valid on every backend.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

// MemURL returns a fresh in-process queue.
func MemURL(testing.TB) string { return "mem://" + Name("q") }

// SQSURL returns a fresh queue on moto, with its credentials in the URL.
func SQSURL(t testing.TB) string {
	endpoint := testservers.Moto.Addr(t)
	return fmt.Sprintf("sqs://%s:%s@%s?region=%s&endpoint=%s&create=true",
		testservers.MotoEnv["AWS_ACCESS_KEY_ID"], testservers.MotoEnv["AWS_SECRET_ACCESS_KEY"], Name("q"),
		testservers.MotoEnv["AWS_REGION"], url.QueryEscape(endpoint))
}

// AzureURL returns a fresh queue on Azurite, with the development account's key in the URL.
func AzureURL(t testing.TB) string {
	endpoint := testservers.AzuriteAddrs(t).Queue
	return fmt.Sprintf("azqueue://%s@%s?endpoint=%s&create=true",
		url.UserPassword(testservers.AzuriteAccount, testservers.AzuriteKey), Name("q"), url.QueryEscape(endpoint))
}

// PubSubMaxMessageBytes lowers the Pub/Sub limit in PubSubURL: pstest is a gRPC server with
// the default 4 MiB limit on requests, below Pub/Sub's 10 MB.
const PubSubMaxMessageBytes = 1 << 20

var pubsubEmulator = &testservers.Server{Name: "pstest (in-process Pub/Sub fake)", Start: func() (string, func(), error) {
	srv := pstest.NewServerWithAddress("127.0.0.1:0")
	return srv.Addr, func() { srv.Close() }, nil
}}

// PubSubURL returns a fresh topic and subscription on an in-process pstest server.
func PubSubURL(t testing.TB) string {
	topic := Name("t")
	return fmt.Sprintf("pubsub://test-project/%s?subscription=%s&emulator=%s&create=true&max_message_bytes=%d",
		topic, topic, pubsubEmulator.Addr(t), PubSubMaxMessageBytes)
}

var logQueues atomic.Int64

// LogURL returns a fresh color of a shared log on a fresh in-memory store.
func LogURL(testing.TB) string {
	n := logQueues.Add(1)
	return fmt.Sprintf("log://acme/jobs%d?create=true&store=%s", n, url.QueryEscape(fmt.Sprintf("mem://local-logqueue-%d", n)))
}
