// Package pubsubqueue is the Google Cloud Pub/Sub queue driver (pubsub/v2).
//
// URL: pubsub://PROJECT/TOPIC?subscription=SUB&emulator=HOST:PORT&create=true&max_message_bytes=N.
// Send publishes to TOPIC; Receive pulls from the subscription SUB (a name in PROJECT, or
// projects/P/subscriptions/S), so a URL without subscription= can only send. emulator= (or
// the PUBSUB_EMULATOR_HOST variable) talks to an emulator without credentials; otherwise
// credentials are Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, `gcloud
// auth application-default login`, or the service account of the Cloud Run service or VM).
//
// create=true (tests and `ssfkit dev`; production resources come from Terraform) creates a
// missing topic and subscription, and gives the subscription a dead-letter policy to the topic
// TOPIC-dead-letter (created with a subscription of the same name, so nothing sent there is
// dropped) after 100 deliveries, Pub/Sub's maximum. That policy matters beyond its backstop:
// Pub/Sub counts deliveries only for subscriptions that have one, so without it Attempts is 0
// and Serve cannot apply MaxAttempts.
//
// Receive polls with unary Pulls that return at once, backing off to one a second while the
// subscription is empty. Leases are ack deadlines: a Receive sets the pulled messages'
// deadlines to the lease (ModifyAckDeadline), Retry sets it to the delay (0 is a nack), and both
// are at most 600 s. An Ack after the lease expired is silently ignored by Pub/Sub; the message
// is then delivered again. Attributes are Pub/Sub's message attributes (a message the native
// dead-letter policy moved also carries Pub/Sub's CloudPubSubDeadLetter* ones); Sent is the
// publish time; Pub/Sub does not tell when a message was first delivered.
package pubsubqueue

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ssfkit/ssfkit/adapters/queue"
)

func init() { queue.Register("pubsub", open) }

// Pub/Sub limits.
const (
	// MaxMessageBytes is Pub/Sub's 10 MB limit on a publish request, less room for its envelope.
	MaxMessageBytes = 10_000_000 - 4096
	maxBatch        = 1000
	maxLease        = 600 * time.Second
	maxPollPause    = time.Second
	// deadLetterAttempts is the create=true dead-letter policy's limit: the largest Pub/Sub
	// accepts, so that Serve's own MaxAttempts applies first.
	deadLetterAttempts = 100
)

// Driver is a queue.Driver over one topic and, optionally, one subscription.
type Driver struct {
	c      *sharedClient
	topic  string // projects/P/topics/T
	sub    string // projects/P/subscriptions/S, or empty
	limits queue.Limits
	closed sync.Once
}

// Queues in one process share a client (its gRPC connections) per project and emulator.
var (
	clientsMu sync.Mutex
	clients   = map[clientKey]*sharedClient{}
)

type clientKey struct{ project, emulator string }

type sharedClient struct {
	*pubsub.Client
	key  clientKey
	refs int
}

var (
	// Project ids, optionally domain-scoped (example.com:project).
	projectID = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)
	// Topic and subscription names: 3 to 255 characters, starting with a letter.
	resourceName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._~+%-]{2,254}$`)
)

func open(ctx context.Context, u *queue.URL) (queue.Driver, error) {
	if err := u.CheckParams("subscription", "emulator", "create", "max_message_bytes"); err != nil {
		return nil, err
	}
	project, topic := u.Host, strings.Trim(u.Path, "/")
	if !projectID.MatchString(project) || !resourceName.MatchString(topic) || strings.HasPrefix(topic, "goog") {
		return nil, fmt.Errorf("%w: want pubsub://PROJECT/TOPIC (a topic name is 3 to 255 letters, digits and ._~+%%-, starting with a letter), got project %q, topic %q", queue.ErrInvalid, project, topic)
	}
	sub := u.Query.Get("subscription")
	if sub != "" && !strings.HasPrefix(sub, "projects/") {
		if !resourceName.MatchString(sub) {
			return nil, fmt.Errorf("%w: subscription %q must be a name or projects/PROJECT/subscriptions/NAME", queue.ErrInvalid, sub)
		}
		sub = "projects/" + project + "/subscriptions/" + sub
	}
	limit, err := queue.MaxMessageBytes(u, MaxMessageBytes, MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	create, err := u.BoolParam("create")
	if err != nil {
		return nil, err
	}
	c, err := acquire(ctx, clientKey{project: project, emulator: u.Query.Get("emulator")})
	if err != nil {
		return nil, err
	}
	d := &Driver{c: c, topic: "projects/" + project + "/topics/" + topic, sub: sub, limits: queue.Limits{MaxMessageBytes: limit, MaxBatch: maxBatch, MaxLease: maxLease}}
	if err := d.check(ctx, create); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func acquire(ctx context.Context, k clientKey) (*sharedClient, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[k]; ok {
		c.refs++
		return c, nil
	}
	var opts []option.ClientOption
	if k.emulator != "" {
		opts = append(opts, option.WithEndpoint(k.emulator), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	// The client outlives this Open (other queues share it): ctx must not end its credentials.
	c, err := pubsub.NewClient(context.WithoutCancel(ctx), k.project, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: no usable Google credentials (set GOOGLE_APPLICATION_CREDENTIALS, run `gcloud auth application-default login`, run as a service account, or use emulator=HOST:PORT): %v", queue.ErrInvalid, err)
	}
	sc := &sharedClient{Client: c, key: k, refs: 1}
	clients[k] = sc
	return sc, nil
}

// check makes sure the topic and subscription exist, creating them with create=true. An
// identity allowed only to publish or consume may not read them (PermissionDenied): then the
// first Send or Receive reports a missing one.
func (d *Driver) check(ctx context.Context, create bool) error {
	if create {
		return d.create(ctx)
	}
	_, err := d.c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: d.topic})
	if err == nil && d.sub != "" {
		_, err = d.c.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: d.sub})
	}
	switch status.Code(err) {
	case codes.OK, codes.PermissionDenied:
		return nil
	case codes.NotFound:
		return fmt.Errorf("%w: %v (create it, e.g. with the Terraform module, or add create=true)", queue.ErrNotFound, status.Convert(err).Message())
	}
	return wrap(ctx, err)
}

func (d *Driver) create(ctx context.Context) error {
	dead := d.topic + "-dead-letter"
	deadSub := strings.Replace(dead, "/topics/", "/subscriptions/", 1)
	for _, t := range []string{d.topic, dead} {
		if _, err := d.c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: t}); status.Code(err) != codes.AlreadyExists {
			if err := wrap(ctx, err); err != nil {
				return err
			}
		}
	}
	subs := []*pubsubpb.Subscription{{Name: deadSub, Topic: dead}}
	if d.sub != "" {
		subs = append(subs, &pubsubpb.Subscription{Name: d.sub, Topic: d.topic,
			DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dead, MaxDeliveryAttempts: deadLetterAttempts}})
	}
	for _, s := range subs {
		if _, err := d.c.SubscriptionAdminClient.CreateSubscription(ctx, s); status.Code(err) != codes.AlreadyExists {
			if err := wrap(ctx, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrap maps gRPC errors onto the queue sentinels.
func wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %v", queue.ErrNotFound, err)
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return fmt.Errorf("%w: %v", queue.ErrInvalid, err)
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%w: Pub/Sub refused the credentials (the identity needs roles/pubsub.publisher to send, roles/pubsub.subscriber to receive): %v", queue.ErrInvalid, err)
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown, codes.Canceled:
		return fmt.Errorf("%w: %v", queue.ErrUnavailable, err)
	}
	return err
}

// Send implements queue.Driver. Attributes are the message's attributes.
func (d *Driver) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	resp, err := d.c.TopicAdminClient.Publish(ctx, &pubsubpb.PublishRequest{Topic: d.topic, Messages: []*pubsubpb.PubsubMessage{{Data: body, Attributes: attrs}}})
	if err != nil {
		return "", wrap(ctx, err)
	}
	if len(resp.MessageIds) != 1 {
		return "", fmt.Errorf("publish answered with %d message ids, want 1", len(resp.MessageIds))
	}
	return resp.MessageIds[0], nil
}

func (d *Driver) subscription() error {
	if d.sub == "" {
		return fmt.Errorf("%w: the queue was opened without subscription=, so it can only send", queue.ErrInvalid)
	}
	return nil
}

// Receive implements queue.Driver.
func (d *Driver) Receive(ctx context.Context, n int, wait, lease time.Duration) ([]*queue.Message, error) {
	if err := d.subscription(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		// A Pull that waits for messages cannot be cut short at the end of the wait without
		// risk: messages the server handed out to it stay leased, unseen, until the
		// subscription's ack deadline, and count an attempt. So Receive polls with Pulls that
		// return at once, though the field asking for that is deprecated (for costing more
		// requests than waiting Pulls when a queue is often empty).
		resp, err := d.c.SubscriptionAdminClient.Pull(ctx, &pubsubpb.PullRequest{Subscription: d.sub, MaxMessages: int32(n), ReturnImmediately: true})
		if err != nil {
			return nil, wrap(ctx, err)
		}
		if len(resp.ReceivedMessages) > 0 {
			ms := make([]*queue.Message, len(resp.ReceivedMessages))
			ids := make([]string, len(ms))
			for i, r := range resp.ReceivedMessages {
				ids[i] = r.AckId
				ms[i] = &queue.Message{ID: r.Message.GetMessageId(), Body: r.Message.GetData(), Attributes: queue.CloneAttributes(r.Message.GetAttributes()),
					Attempts: int(r.DeliveryAttempt), Handle: r.AckId}
				if t := r.Message.GetPublishTime(); t != nil {
					ms[i].Sent = t.AsTime()
				}
			}
			// If this fails, the messages keep the subscription's ack deadline instead of
			// lease: still leased, and Serve's renewal sets the lease again.
			_ = d.modify(ctx, ids, lease)
			return ms, nil
		}
		if !time.Now().Before(deadline) {
			return nil, nil
		}
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

func (d *Driver) modify(ctx context.Context, ackIDs []string, deadline time.Duration) error {
	err := d.c.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: d.sub, AckIds: ackIDs, AckDeadlineSeconds: int32(deadline / time.Second)})
	return wrap(ctx, err)
}

func ackID(m *queue.Message) (string, error) {
	id, ok := m.Handle.(string)
	if !ok {
		return "", fmt.Errorf("%w: message %s was not received from Pub/Sub", queue.ErrInvalid, m.ID)
	}
	return id, nil
}

// Ack implements queue.Driver.
func (d *Driver) Ack(ctx context.Context, m *queue.Message) error {
	id, err := ackID(m)
	if err == nil {
		err = d.subscription()
	}
	if err != nil {
		return err
	}
	err = d.c.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: d.sub, AckIds: []string{id}})
	return wrap(ctx, err)
}

// Retry implements queue.Driver.
func (d *Driver) Retry(ctx context.Context, m *queue.Message, delay time.Duration) error {
	return d.setDeadline(ctx, m, delay)
}

// Extend implements queue.Driver.
func (d *Driver) Extend(ctx context.Context, m *queue.Message, lease time.Duration) error {
	return d.setDeadline(ctx, m, lease)
}

func (d *Driver) setDeadline(ctx context.Context, m *queue.Message, deadline time.Duration) error {
	id, err := ackID(m)
	if err == nil {
		err = d.subscription()
	}
	if err != nil {
		return err
	}
	return d.modify(ctx, []string{id}, deadline)
}

// Limits implements queue.Driver.
func (d *Driver) Limits() queue.Limits { return d.limits }

// Close implements queue.Driver; the shared client closes with its last queue.
func (d *Driver) Close() error {
	var err error
	d.closed.Do(func() {
		clientsMu.Lock()
		defer clientsMu.Unlock()
		if d.c.refs--; d.c.refs == 0 {
			delete(clients, d.c.key)
			err = d.c.Client.Close()
		}
	})
	return err
}
