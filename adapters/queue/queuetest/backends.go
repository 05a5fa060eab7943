package queuetest

import (
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/ssfkit/ssfkit/internal/testservers"
)

// The functions below return the URL of a fresh, empty queue on each backend the default test
// run covers, created on first Open. Each driver's conformance test and the runtime's queue
// tests use them, so every suite reaches a backend the same way. They start the emulators on
// first use (moto, Azurite: call testservers.StopAll from TestMain; Pub/Sub: pstest, in
// process) and fail the test, saying how to install them, if they are missing.

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
