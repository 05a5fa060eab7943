// Package azurequeue is the Azure Storage Queues driver (azqueue).
//
// URL: azqueue://QUEUE?account=ACCOUNT&endpoint=URL&create=true&max_message_bytes=N&message_ttl=S.
// The service endpoint is endpoint= (Azurite: http://127.0.0.1:10001/devstoreaccount1), else
// https://ACCOUNT.queue.core.windows.net. create=true creates a missing queue (tests and
// `ssfkit dev`; production queues come from Terraform). message_ttl=S makes sent messages
// expire S seconds after they were sent (default: never); the hosts set it from
// SSFKIT_QUEUE_MESSAGE_TTL_SECONDS, which the ssf module keeps below T.
//
// Credentials, first match wins:
//  1. an account key in the URL's user info, azqueue://ACCOUNT:KEY@QUEUE (Redacted hides it);
//  2. the connection string in AZURE_STORAGE_CONNECTION_STRING, when the URL names no account
//     and no endpoint (the string supplies both);
//  3. AZURE_STORAGE_KEY, for the account AZURE_STORAGE_ACCOUNT (also the default account=);
//  4. Entra ID through azidentity's DefaultAzureCredential (environment, workload identity,
//     managed identity, Azure CLI): the identity needs the "Storage Queue Data Message
//     Sender" role to send, "Storage Queue Data Message Processor" to receive.
//
// Opening checks that the queue exists and the credentials work. Bodies are base64-encoded, the
// encoding Azure Functions' queue trigger expects, so the 64 KiB message limit leaves 48 KiB
// of body. Storage Queues have no message attributes: a message with attributes is a
// queue.Envelope (a line of JSON with the attributes, then the body) inside the base64, and
// shares the 48 KiB with its body. Sent is the insertion time; FirstReceived is known on a
// message's first delivery, and Retry and Extend record it in the envelope for later ones. Messages never expire (time-to-live -1): a dead-letter record must not vanish after
// the default 7 days. Storage Queues have no long polling, so Receive polls, backing off to
// one request a second. Attempts are the service's DequeueCount.
package azurequeue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

func init() { queue.Register("azqueue", open) }

// Storage Queue limits.
const (
	// MaxMessageBytes is the largest body whose base64 encoding fits Azure's 64 KiB message.
	MaxMessageBytes = 48 << 10
	maxBatch        = 32
	maxLease        = 7 * 24 * time.Hour
	maxPollPause    = time.Second
	// maxText is Azure's limit on a message's text.
	maxText = 64 << 10
)

// clientOptions shorten the SDK's retries (by default up to a minute between tries): Serve and
// the intent collector retry on their own, and an asynchronous start blocked in retries would
// hold up the execution that sends it.
func clientOptions() *azqueue.ClientOptions {
	return &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: 3, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second},
	}}
}

// Driver is a queue.Driver over one Storage Queue.
type Driver struct {
	q      *azqueue.QueueClient
	limits queue.Limits
	ttl    int32 // seconds a sent message lives (message_ttl), or -1: until received
}

// handle is a lease: Update and Delete need the pop receipt, which every update replaces, and
// Update rewrites the message's text. first is when the message was first delivered, if known;
// stamped says whether the text records it.
type handle struct {
	popReceipt, text string
	first            time.Time
	stamped          bool
}

var (
	queueName   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
)

// Queues in one process share a service client per endpoint and credential, and one
// DefaultAzureCredential, which caches tokens.
var (
	clientsMu   sync.Mutex
	clients     = map[clientKey]*azqueue.ServiceClient{}
	defaultCred azcore.TokenCredential
)

type clientKey struct{ endpoint, account, key, connectionString string }

func open(ctx context.Context, u *queue.URL) (queue.Driver, error) {
	if err := u.CheckParams("account", "endpoint", "create", "max_message_bytes", "message_ttl"); err != nil {
		return nil, err
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: want azqueue://QUEUE?account=ACCOUNT, got path %q", queue.ErrInvalid, u.Path)
	}
	if len(u.Host) < 3 || len(u.Host) > 63 || !queueName.MatchString(u.Host) {
		return nil, fmt.Errorf("%w: queue name %q must be 3 to 63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit", queue.ErrInvalid, u.Host)
	}
	limit, err := queue.MaxMessageBytes(u, MaxMessageBytes, MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	create, err := u.BoolParam("create")
	if err != nil {
		return nil, err
	}
	// A bounded time-to-live keeps a start from being delivered later than the runtime's T
	// (the ssf module sets it below T: docs/protocol.md, "Delivery windows"); without it a
	// message lives until it is received.
	ttl, err := u.IntParam("message_ttl", -1, 1, 7*24*3600)
	if err != nil {
		return nil, err
	}
	key, err := resolve(u)
	if err != nil {
		return nil, err
	}
	svc, err := client(key)
	if err != nil {
		return nil, err
	}
	d := &Driver{q: svc.NewQueueClient(u.Host), limits: queue.Limits{MaxMessageBytes: limit, MaxBatch: maxBatch, MaxLease: maxLease}, ttl: int32(ttl)}
	_, err = d.q.GetProperties(ctx, nil)
	if create && queueerror.HasCode(err, queueerror.QueueNotFound) {
		if _, err = d.q.Create(ctx, nil); queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
			err = nil // created concurrently
		}
	}
	if err = wrap(ctx, err); errors.Is(err, queue.ErrNotFound) {
		return nil, fmt.Errorf("%w: queue %q does not exist at %s (create it, e.g. with the Terraform module, or add create=true)", queue.ErrNotFound, u.Host, svc.URL())
	}
	return d, err
}

// resolve picks the endpoint and credentials (see the package documentation).
func resolve(u *queue.URL) (clientKey, error) {
	k := clientKey{endpoint: u.Query.Get("endpoint"), account: u.Query.Get("account")}
	if u.User != nil {
		k.account = u.User.Username()
		k.key, _ = u.User.Password()
		if k.key == "" {
			return k, fmt.Errorf("%w: the URL's user info must be ACCOUNT:KEY", queue.ErrInvalid)
		}
	} else if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" && k.endpoint == "" && k.account == "" {
		return clientKey{connectionString: cs}, nil
	} else if envAccount := os.Getenv("AZURE_STORAGE_ACCOUNT"); k.account == "" || k.account == envAccount {
		k.account = envAccount
		k.key = os.Getenv("AZURE_STORAGE_KEY")
	}
	if k.endpoint == "" {
		if k.account == "" {
			return k, fmt.Errorf("%w: no storage account: add account=ACCOUNT or endpoint=URL to the URL, or set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT", queue.ErrInvalid)
		}
		if !accountName.MatchString(k.account) {
			return k, fmt.Errorf("%w: storage account name %q must be 3 to 24 lowercase letters and digits", queue.ErrInvalid, k.account)
		}
		k.endpoint = "https://" + k.account + ".queue.core.windows.net/"
	}
	return k, nil
}

func client(k clientKey) (*azqueue.ServiceClient, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[k]; ok {
		return c, nil
	}
	var c *azqueue.ServiceClient
	var err error
	switch {
	case k.connectionString != "":
		c, err = azqueue.NewServiceClientFromConnectionString(k.connectionString, clientOptions())
	case k.key != "":
		var cred *azqueue.SharedKeyCredential
		if cred, err = azqueue.NewSharedKeyCredential(k.account, k.key); err == nil {
			c, err = azqueue.NewServiceClientWithSharedKeyCredential(k.endpoint, cred, clientOptions())
		}
	default:
		if defaultCred == nil {
			if defaultCred, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
				return nil, fmt.Errorf("%w: no usable Azure credentials: %v", queue.ErrInvalid, err)
			}
		}
		c, err = azqueue.NewServiceClient(k.endpoint, defaultCred, clientOptions())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", queue.ErrInvalid, err)
	}
	clients[k] = c
	return c, nil
}

// wrap maps Storage Queue errors onto the queue sentinels.
func wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		var nonRetriable interface{ NonRetriable() }
		if errors.As(err, &nonRetriable) {
			// azidentity's errors: no credential in the chain could get a token.
			return fmt.Errorf("%w: no usable Azure credentials (write ACCOUNT:KEY@ into the URL, set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, or give the identity a Storage Queue Data role): %v", queue.ErrInvalid, err)
		}
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	switch queueerror.Code(re.ErrorCode) {
	case queueerror.QueueNotFound, queueerror.QueueBeingDeleted:
		return fmt.Errorf("%w: %v", queue.ErrNotFound, err)
	case queueerror.MessageNotFound, queueerror.PopReceiptMismatch:
		return fmt.Errorf("%w: the message's lease is no longer valid: %v", queue.ErrNotFound, err)
	case queueerror.MessageTooLarge, queueerror.RequestBodyTooLarge:
		return fmt.Errorf("%w: %v", queue.ErrTooLarge, err)
	case queueerror.AuthenticationFailed, queueerror.AuthorizationFailure, queueerror.AuthorizationPermissionMismatch, queueerror.InvalidAuthenticationInfo:
		return fmt.Errorf("%w: the storage account refused the credentials: %v", queue.ErrInvalid, err)
	}
	if re.StatusCode == 429 || re.StatusCode >= 500 {
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	return err
}

// Send implements queue.Driver. The text is the base64 encoding of the body, or of its
// queue.Envelope when it has attributes.
func (d *Driver) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	text := base64.StdEncoding.EncodeToString(queue.Envelope{Attributes: attrs, Body: body}.Encode())
	if len(text) > maxText {
		return "", fmt.Errorf("%w: %d bytes with its attributes are %d base64-encoded (at most %d)", queue.ErrTooLarge, len(body), len(text), maxText)
	}
	resp, err := d.q.EnqueueMessage(ctx, text, &azqueue.EnqueueMessageOptions{TimeToLive: ptr(d.ttl)})
	if err != nil {
		return "", wrap(ctx, err)
	}
	if len(resp.Messages) != 1 {
		return "", fmt.Errorf("enqueue answered with %d messages, want 1", len(resp.Messages))
	}
	return deref(resp.Messages[0].MessageID), nil
}

// Receive implements queue.Driver.
func (d *Driver) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		resp, err := d.q.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{NumberOfMessages: ptr(int32(n)), VisibilityTimeout: ptr(int32(lease / time.Second))})
		if err != nil {
			return nil, wrap(ctx, err)
		}
		if len(resp.Messages) > 0 || !time.Now().Before(deadline) {
			now := time.Now()
			ms := make([]*queue.Message, len(resp.Messages))
			for i, m := range resp.Messages {
				ms[i] = decode(m, now)
			}
			return ms, nil
		}
		// Each poll is a billed transaction: back off while the queue stays empty.
		t := time.NewTimer(min(pause, time.Until(deadline)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		pause = min(2*pause, maxPollPause)
	}
}

// decode reads a dequeued message received at now.
func decode(m *azqueue.DequeuedMessage, now time.Time) *queue.Message {
	text := deref(m.MessageText)
	h := &handle{popReceipt: deref(m.PopReceipt), text: text}
	msg := &queue.Message{ID: deref(m.MessageID), Attempts: int(deref(m.DequeueCount)), Sent: deref(m.InsertionTime), Handle: h}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		// Not written by this driver: deliver the text, which the handler can judge.
		msg.Body = []byte(text)
		return msg
	}
	env := queue.DecodeEnvelope(raw)
	msg.Body, msg.Attributes = env.Body, env.Attributes
	switch {
	case !env.FirstReceived.IsZero():
		h.first, h.stamped = env.FirstReceived, true
	case msg.Attempts == 1:
		h.first = now // this is the first delivery: Retry and Extend record it in the message
	}
	msg.FirstReceived = h.first
	return msg
}

func leaseOf(m *queue.Message) (*handle, error) {
	h, ok := m.Handle.(*handle)
	if !ok {
		return nil, fmt.Errorf("%w: message %s was not received from a Storage Queue", queue.ErrInvalid, m.ID)
	}
	return h, nil
}

// Ack implements queue.Driver.
func (d *Driver) Ack(ctx context.Context, m *queue.Message) error {
	h, err := leaseOf(m)
	if err != nil {
		return err
	}
	_, err = d.q.DeleteMessage(ctx, m.ID, h.popReceipt, nil)
	return wrap(ctx, err)
}

// Retry implements queue.Driver.
func (d *Driver) Retry(ctx context.Context, m *queue.Message, delay time.Duration) error {
	return d.update(ctx, m, delay)
}

// Extend implements queue.Driver.
func (d *Driver) Extend(ctx context.Context, m *queue.Message, lease time.Duration) error {
	return d.update(ctx, m, lease)
}

// update sets the message's visibility and takes the new pop receipt into its handle. The first
// update of a message first delivered under this handle records that time in its text, if
// the text still fits.
func (d *Driver) update(ctx context.Context, m *queue.Message, visibility time.Duration) error {
	h, err := leaseOf(m)
	if err != nil {
		return err
	}
	next := *h
	if !h.stamped && !h.first.IsZero() {
		if raw, err := base64.StdEncoding.DecodeString(h.text); err == nil {
			env := queue.DecodeEnvelope(raw)
			env.FirstReceived = h.first
			if text := base64.StdEncoding.EncodeToString(env.Encode()); len(text) <= maxText {
				next.text, next.stamped = text, true
			}
		}
	}
	resp, err := d.q.UpdateMessage(ctx, m.ID, h.popReceipt, next.text, &azqueue.UpdateMessageOptions{VisibilityTimeout: ptr(int32(visibility / time.Second))})
	if err != nil {
		return wrap(ctx, err)
	}
	next.popReceipt = deref(resp.PopReceipt)
	m.Handle = &next
	return nil
}

// Limits implements queue.Driver.
func (d *Driver) Limits() queue.Limits { return d.limits }

// Depth is Azure Storage's approximate message count (visible and invisible).
func (d *Driver) Depth(ctx context.Context) (int64, error) {
	p, err := d.q.GetProperties(ctx, nil)
	if err != nil {
		return 0, wrap(ctx, err)
	}
	if p.ApproximateMessagesCount == nil {
		return 0, errors.New("azqueue: the service returned no message count")
	}
	return int64(*p.ApproximateMessagesCount), nil
}

// Close implements queue.Driver; the shared client has nothing to release.
func (d *Driver) Close() error { return nil }

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
