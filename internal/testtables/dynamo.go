package testtables

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/adapters/store/dynamostore"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/internal/testservers"
)

// DynamoClient returns a DynamoDB client for the moto server testservers starts once per test
// binary. Its credentials are static, so no test reads or changes the process environment;
// opts adjust it (an HTTP client that loses responses, quicker retries).
func DynamoClient(t suite.T, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	env := testservers.MotoEnv
	return dynamodb.New(dynamodb.Options{
		Region:       env["AWS_REGION"],
		Credentials:  credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], ""),
		BaseEndpoint: aws.String(testservers.Moto.Addr(t)),
		HTTPClient:   &http.Client{Transport: motoTransport{}},
	}, opts...)
}

// motoMu serialises requests to moto. Moto serves requests on concurrent threads without
// locking its tables, so two concurrent conditional updates of one item can both read the old
// item and one of the writes is lost (the conformance suite's ConcurrentAdd loses a few of 200
// additions). DynamoDB applies each request to an item atomically; one request at a time makes
// moto do the same.
var motoMu sync.Mutex

const motoTimeout = 30 * time.Second

type motoTransport struct{}

func (motoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	motoMu.Lock()
	defer motoMu.Unlock()
	// Moto occasionally never finishes a response; a deadline turns that into a timeout,
	// which the SDK retries as it would DynamoDB's.
	ctx, cancel := context.WithTimeout(req.Context(), motoTimeout)
	defer cancel()
	resp, err := http.DefaultTransport.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	// Read the whole response under the lock (and the deadline).
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

var (
	dynamoMu     sync.Mutex
	dynamoShared *dynamodb.Client
)

// Dynamo returns a fresh table on moto: created for the call, dropped when t ends. Tables
// share one client, as tables opened by URL do.
func Dynamo(t suite.T, ssf string) *store.Table {
	t.Helper()
	return DynamoOn(t, sharedDynamoClient(t), ssf)
}

func sharedDynamoClient(t suite.T) *dynamodb.Client {
	dynamoMu.Lock()
	defer dynamoMu.Unlock()
	if dynamoShared == nil {
		dynamoShared = DynamoClient(t)
	}
	return dynamoShared
}

// DynamoOn returns a fresh table reached through client, dropped when t ends.
func DynamoOn(t suite.T, client *dynamodb.Client, ssf string) *store.Table {
	t.Helper()
	name := Name(ssf)
	d, err := dynamostore.New(context.Background(), client, name, dynamostore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	tbl := store.NewTable(d, "dynamodb://"+name)
	t.Cleanup(func() {
		tbl.Close()
		if err := d.Drop(context.Background()); err != nil {
			t.Errorf("dropping table %s: %v", name, err)
		}
	})
	return tbl
}
