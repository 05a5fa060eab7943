// Package sqsqueue is the Amazon SQS queue driver (aws-sdk-go-v2).
//
// URL: sqs://QUEUE?region=REGION&endpoint=URL&create=true&max_message_bytes=N names a standard
// queue in the account of the credentials; sqs://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE is a
// queue URL with its scheme replaced (another account's queue, or no GetQueueUrl permission),
// its region taken from the host unless region= says otherwise. endpoint= points the client
// at an emulator such as moto; create=true creates a missing queue (tests and `ssfkit dev`;
// production queues come from Terraform, with their redrive policy).
//
// Credentials come from the SDK's default chain (environment, AWS_PROFILE and shared config,
// SSO, container and instance roles), or from the URL's user info, sqs://KEY_ID:SECRET@QUEUE,
// which Redacted hides. The region comes from region=, the queue URL's host, or the chain
// (AWS_REGION). Opening checks both, and that the queue exists.
//
// Leases are visibility timeouts, attempts are ApproximateReceiveCount, Receive long-polls (20 s
// at a time). Bodies that are text SQS accepts travel as they are; other bytes are base64
// encoded and flagged with a message attribute, so they fit in about 3/4 of the 256 KiB limit.
// Message attributes are String attributes; received ones of type Binary (from other senders)
// are left out. Sent and FirstReceived are SentTimestamp and ApproximateFirstReceiveTimestamp.
package sqsqueue

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

func init() { queue.Register("sqs", open) }

// SQS limits.
const (
	// MaxMessageBytes is SQS's limit on a message, body and attributes together.
	MaxMessageBytes = 256 << 10
	maxBatch        = 10
	maxLease        = 12 * time.Hour
	maxWait         = 20 * time.Second // the longest long poll
)

// EncodingAttribute is the message attribute that flags a base64-encoded body (value "base64");
// Lambda's SQS events carry it too (see Body).
const EncodingAttribute = "ssfkit-encoding"

// Body returns a message's body as it was sent, given the body SQS delivered and the value of
// its EncodingAttribute ("" if absent). A body flagged as base64 that does not decode is
// returned as it is: the handler sees it is malformed and dead-letters it, instead of the
// message cycling unseen.
func Body(delivered, encoding string) []byte {
	if encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(delivered); err == nil {
			return b
		}
	}
	return []byte(delivered)
}

// Driver is a queue.Driver over one SQS queue.
type Driver struct {
	c      *sqs.Client
	url    string
	limits queue.Limits
}

// Queues in one process share a client per configuration: an application opens a queue per
// SSF, and each client would load the configuration and keep its own connection pool.
var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*sqs.Client{}
)

type clientKey struct{ region, endpoint, keyID, secret string }

var queueHost = regexp.MustCompile(`^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

func open(ctx context.Context, u *queue.URL) (queue.Driver, error) {
	if err := u.CheckParams("region", "endpoint", "create", "max_message_bytes"); err != nil {
		return nil, err
	}
	limit, err := queue.MaxMessageBytes(u, MaxMessageBytes, MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	create, err := u.BoolParam("create")
	if err != nil {
		return nil, err
	}
	key := clientKey{region: u.Query.Get("region"), endpoint: u.Query.Get("endpoint")}
	if u.User != nil {
		key.keyID = u.User.Username()
		key.secret, _ = u.User.Password()
	}
	var name, queueURL string
	if path := strings.Trim(u.Path, "/"); path == "" {
		name = u.Host
	} else {
		// A queue URL: https://HOST/ACCOUNT/NAME, or the emulator's endpoint/ACCOUNT/NAME.
		account, n, ok := strings.Cut(path, "/")
		if !ok || strings.Contains(n, "/") {
			return nil, fmt.Errorf("%w: want sqs://QUEUE or sqs://HOST/ACCOUNT/QUEUE, got path %q", queue.ErrInvalid, u.Path)
		}
		name, queueURL = n, "https://"+u.Host+"/"+path
		if key.endpoint != "" {
			queueURL = strings.TrimSuffix(key.endpoint, "/") + "/" + account + "/" + n
		}
		if m := queueHost.FindStringSubmatch(u.Host); m != nil && key.region == "" {
			key.region = m[1]
		}
		if create {
			return nil, fmt.Errorf("%w: create=true needs the queue's name (sqs://QUEUE), not its URL", queue.ErrInvalid)
		}
	}
	if !validName(name) {
		return nil, fmt.Errorf("%w: queue name %q must be 1 to 80 letters, digits, hyphens or underscores", queue.ErrInvalid, name)
	}
	c, region, err := client(ctx, key)
	if err != nil {
		return nil, err
	}
	d := &Driver{c: c, url: queueURL, limits: queue.Limits{MaxMessageBytes: limit, MaxBatch: maxBatch, MaxLease: maxLease}}
	if queueURL != "" {
		return d, nil
	}
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	if err != nil && create && errors.Is(d.wrap(ctx, err), queue.ErrNotFound) {
		var created *sqs.CreateQueueOutput
		created, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
		if err == nil {
			out = &sqs.GetQueueUrlOutput{QueueUrl: created.QueueUrl}
		}
	}
	if err = d.wrap(ctx, err); errors.Is(err, queue.ErrNotFound) {
		return nil, fmt.Errorf("%w: queue %q does not exist in region %s (create it, e.g. with the Terraform module, or add create=true)", queue.ErrNotFound, name, region)
	} else if err != nil {
		return nil, err
	}
	d.url = aws.ToString(out.QueueUrl)
	return d, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false // including the dot of a FIFO queue's name: starts need no ordering
		}
	}
	return true
}

// client returns the shared client for key, checking that a region and credentials are set.
func client(ctx context.Context, key clientKey) (*sqs.Client, string, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[key]; ok {
		return c, c.Options().Region, nil
	}
	var opts []func(*config.LoadOptions) error
	if key.region != "" {
		opts = append(opts, config.WithRegion(key.region))
	}
	if key.keyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key.keyID, key.secret, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("%w: loading the AWS configuration: %v", queue.ErrInvalid, err)
	}
	if cfg.Region == "" {
		return nil, "", fmt.Errorf("%w: no AWS region: add region=REGION to the URL or set AWS_REGION", queue.ErrInvalid)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, "", fmt.Errorf("%w: no usable AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE, run with an IAM role, or write KEY_ID:SECRET@ into the URL): %v", queue.ErrInvalid, err)
	}
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if key.endpoint != "" {
			o.BaseEndpoint = aws.String(key.endpoint)
		}
	})
	clients[key] = c
	return c, cfg.Region, nil
}

// wrap maps SQS errors onto the queue sentinels.
func (d *Driver) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// No answer from SQS: the connection failed, or the SDK's retries ran out.
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	switch ae.ErrorCode() {
	case "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
		return fmt.Errorf("%w: %v", queue.ErrNotFound, err)
	case "ReceiptHandleIsInvalid", "MessageNotInflight":
		return fmt.Errorf("%w: the message's lease is no longer valid: %v", queue.ErrNotFound, err)
	case "InvalidMessageContents", "InvalidParameterValue", "InvalidAttributeValue":
		return fmt.Errorf("%w: %v", queue.ErrInvalid, err)
	case "RequestThrottled", "ThrottlingException", "KmsThrottled", "OverLimit":
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	if ae.ErrorFault() == smithy.FaultServer {
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	return err
}

// sqsText reports whether SQS accepts b as a message body as it is: UTF-8 without the control
// characters and code points XML forbids.
func sqsText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !(r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000) {
			return false
		}
		b = b[n:]
	}
	return true
}

// Send implements queue.Driver. Attributes are String message attributes.
func (d *Driver) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	in := &sqs.SendMessageInput{QueueUrl: &d.url, MessageBody: aws.String(string(body))}
	if len(attrs) > 0 {
		in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(attrs)+1)
		for k, v := range attrs {
			in.MessageAttributes[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	if !sqsText(body) {
		enc := base64.StdEncoding.EncodeToString(body)
		if in.MessageAttributes == nil {
			in.MessageAttributes = map[string]types.MessageAttributeValue{}
		}
		in.MessageAttributes[EncodingAttribute] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("base64")}
		// SQS counts attribute names, types and values against the limit.
		size := len(enc)
		for k, v := range in.MessageAttributes {
			size += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
		}
		if size > d.limits.MaxMessageBytes {
			return "", fmt.Errorf("%w: %d bytes of binary body are %d base64-encoded with the attributes (at most %d)", queue.ErrTooLarge, len(body), size, d.limits.MaxMessageBytes)
		}
		in.MessageBody = &enc
	}
	out, err := d.c.SendMessage(ctx, in)
	if err != nil {
		return "", d.wrap(ctx, err)
	}
	return aws.ToString(out.MessageId), nil
}

// Receive implements queue.Driver.
func (d *Driver) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	deadline := time.Now().Add(wait)
	for {
		poll := min(max(time.Until(deadline), 0), maxWait)
		out, err := d.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            &d.url,
			MaxNumberOfMessages: int32(n),
			WaitTimeSeconds:     int32((poll + time.Second - 1) / time.Second),
			VisibilityTimeout:   int32(lease / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount,
				types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp},
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			return nil, d.wrap(ctx, err)
		}
		if len(out.Messages) > 0 || !time.Now().Before(deadline) {
			ms := make([]*queue.Message, len(out.Messages))
			for i, m := range out.Messages {
				ms[i] = decode(m)
			}
			return ms, nil
		}
	}
}

func decode(m types.Message) *queue.Message {
	attrs := map[string]string{}
	for k, v := range m.MessageAttributes {
		if v.StringValue != nil { // String and Number attributes; Binary ones (other senders') are left out
			attrs[k] = *v.StringValue
		}
	}
	body, attrs := Decode(aws.ToString(m.Body), attrs)
	attempts, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return &queue.Message{ID: aws.ToString(m.MessageId), Body: body, Attributes: attrs, Attempts: attempts,
		Sent:          Timestamp(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)]),
		FirstReceived: Timestamp(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)]),
		Handle:        aws.ToString(m.ReceiptHandle)}
}

// Decode returns a message's body as it was sent and its attributes without EncodingAttribute
// (nil if none is left), given the body and String attributes SQS delivered (Lambda's SQS events
// carry both too).
func Decode(delivered string, attrs map[string]string) ([]byte, map[string]string) {
	body := Body(delivered, attrs[EncodingAttribute])
	delete(attrs, EncodingAttribute)
	return body, queue.CloneAttributes(attrs)
}

// Timestamp parses a system attribute that is a time in epoch milliseconds (SentTimestamp,
// ApproximateFirstReceiveTimestamp); zero if it is absent or malformed.
func Timestamp(ms string) time.Time {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func receipt(m *queue.Message) (*string, error) {
	h, ok := m.Handle.(string)
	if !ok {
		return nil, fmt.Errorf("%w: message %s was not received from SQS", queue.ErrInvalid, m.ID)
	}
	return &h, nil
}

// Ack implements queue.Driver.
func (d *Driver) Ack(ctx context.Context, m *queue.Message) error {
	h, err := receipt(m)
	if err != nil {
		return err
	}
	_, err = d.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &d.url, ReceiptHandle: h})
	return d.wrap(ctx, err)
}

// Retry implements queue.Driver.
func (d *Driver) Retry(ctx context.Context, m *queue.Message, delay time.Duration) error {
	return d.setVisibility(ctx, m, delay)
}

// Extend implements queue.Driver.
func (d *Driver) Extend(ctx context.Context, m *queue.Message, lease time.Duration) error {
	return d.setVisibility(ctx, m, lease)
}

func (d *Driver) setVisibility(ctx context.Context, m *queue.Message, v time.Duration) error {
	h, err := receipt(m)
	if err != nil {
		return err
	}
	_, err = d.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &d.url, ReceiptHandle: h, VisibilityTimeout: int32(v / time.Second)})
	return d.wrap(ctx, err)
}

// Limits implements queue.Driver.
func (d *Driver) Limits() queue.Limits { return d.limits }

// Depth is SQS's approximate count of visible, in-flight and delayed messages.
func (d *Driver) Depth(ctx context.Context) (int64, error) {
	out, err := d.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &d.url, AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, d.wrap(ctx, err)
	}
	var n int64
	for _, v := range out.Attributes {
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sqs: queue attribute %q is not a count", v)
		}
		n += c
	}
	return n, nil
}

// Close implements queue.Driver; the shared client has nothing to release.
func (d *Driver) Close() error { return nil }
