package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// DeadLetter is the record Serve, the cloud hosts and the runtime write to a dead-letter queue
// for a poison message or a failed instance. On the wire it is one JSON object:
//
//	{"source": "sqs://orders?region=eu-west-1", "message_id": "...", "attempts": 5,
//	 "error": "...", "first_failure": "2025-01-02T15:03:01Z", "last_failure": "2025-01-02T15:04:05.9Z",
//	 "time": "2025-01-02T15:04:05.999999999Z", "attributes": {...}, "body": "..."}
//
// The original body is "body" when it is UTF-8 text, else "body_base64". A body too large for
// the dead-letter queue is left out ("body_omitted_bytes": its length) and the message stays
// in its own queue. The record's message also carries the reason as message attributes
// (MessageAttributes), so it can be read without parsing the body.
type DeadLetter struct {
	// Source is the queue the message came from (its redacted URL).
	Source string `json:"source"`
	// MessageID is the message's id in Source.
	MessageID string `json:"message_id"`
	// Attempts is how many times it was delivered (0 if Source does not count).
	Attempts int `json:"attempts"`
	// Error is the last handler error, or why the message was not run.
	Error string `json:"error"`
	// FirstFailure is when it first failed, as closely as the source tells (see
	// NewDeadLetter); zero in records written before it was recorded.
	FirstFailure time.Time `json:"first_failure,omitzero"`
	// LastFailure is when it last failed.
	LastFailure time.Time `json:"last_failure,omitzero"`
	// Time is when it was dead-lettered.
	Time time.Time `json:"time"`
	// Attributes are the original message's attributes (Redrive sends them again).
	Attributes map[string]string `json:"attributes,omitempty"`
	// Body is the original message body; nil if omitted.
	Body []byte `json:"-"`
	// BodyOmittedBytes is the original body's length when it was too large to keep here.
	BodyOmittedBytes int `json:"body_omitted_bytes,omitempty"`
}

type deadLetterFields DeadLetter // without the methods, so encoding does not recurse

type deadLetterWire struct {
	deadLetterFields
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	w := deadLetterWire{deadLetterFields: deadLetterFields(d)}
	switch {
	case d.Body == nil && d.BodyOmittedBytes > 0:
	case utf8.Valid(d.Body):
		s := string(d.Body)
		w.Body = &s
	default:
		w.BodyBase64 = d.Body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // bodies stay readable: <, > and & are common in them
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	var w deadLetterWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = DeadLetter(w.deadLetterFields)
	switch {
	case w.Body != nil:
		d.Body = []byte(*w.Body)
	case w.BodyBase64 != nil:
		d.Body = w.BodyBase64
	}
	return nil
}

// Encode returns the record's JSON.
func (d DeadLetter) Encode() []byte {
	b, err := d.MarshalJSON()
	if err != nil {
		panic(err) // every field is a string, number, time or map of strings: encoding cannot fail
	}
	return b
}

// ParseDeadLetter decodes a dead-letter record.
func ParseDeadLetter(b []byte) (DeadLetter, error) {
	var d DeadLetter
	if err := json.Unmarshal(b, &d); err != nil {
		return DeadLetter{}, fmt.Errorf("%w: not a dead-letter record: %v", ErrInvalid, err)
	}
	if d.Source == "" || d.MessageID == "" {
		return DeadLetter{}, fmt.Errorf("%w: not a dead-letter record: no source or message_id", ErrInvalid)
	}
	return d, nil
}

// The message attributes of a dead-letter record (MessageAttributes): valid names on every
// cloud. Times are RFC 3339 in UTC; the error is cut to MaxAttributeValueBytes (the record's
// body has it in full, up to MaxErrorBytes).
const (
	AttrError        = "ssfkit-error"
	AttrAttempts     = "ssfkit-attempts"
	AttrFirstFailure = "ssfkit-first-failure"
	AttrLastFailure  = "ssfkit-last-failure"
	AttrSource       = "ssfkit-source"
	AttrMessageID    = "ssfkit-message-id"
)

// MaxErrorBytes bounds the error kept in a dead-letter record's body.
const MaxErrorBytes = 4096

// NewDeadLetter is the record of message m from source, dead-lettered at now because of cause.
// The last failure is now. The first failure is now too if this was the first delivery;
// otherwise it is when the backend first delivered the message (m.FirstReceived: the start of
// the first failed attempt), else when it was sent (m.Sent: earlier still), else now.
func NewDeadLetter(source string, m *Message, cause error, now time.Time) DeadLetter {
	now = now.UTC()
	first := now
	if m.Attempts != 1 {
		switch {
		case !m.FirstReceived.IsZero() && !m.FirstReceived.After(now):
			first = m.FirstReceived.UTC()
		case !m.Sent.IsZero() && !m.Sent.After(now):
			first = m.Sent.UTC()
		}
	}
	msg := "unknown"
	if cause != nil {
		msg = truncateUTF8(cause.Error(), MaxErrorBytes)
	}
	return DeadLetter{Source: source, MessageID: m.ID, Attempts: m.Attempts, Error: msg, FirstFailure: first,
		LastFailure: now, Time: now, Attributes: CloneAttributes(m.Attributes), Body: m.Body}
}

// truncateUTF8 cuts s to at most n bytes at a character boundary, marking the cut with "...".
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("...")]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1] // a character cut in two
	}
	return s + "..."
}

// MessageAttributes are the record's reason as message attributes, AttrError to AttrMessageID,
// each a valid value (AttributeValue): what an operator sees first in a console, and what a
// consumer can filter on. Times missing from the record are left out.
func (d DeadLetter) MessageAttributes() map[string]string {
	a := map[string]string{
		AttrError:     AttributeValue(d.Error),
		AttrAttempts:  strconv.Itoa(d.Attempts),
		AttrSource:    AttributeValue(d.Source),
		AttrMessageID: AttributeValue(d.MessageID),
	}
	for name, t := range map[string]time.Time{AttrFirstFailure: d.FirstFailure, AttrLastFailure: d.LastFailure} {
		if !t.IsZero() {
			a[name] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	return a
}

// WriteDeadLetter sends rec to dlq, with its MessageAttributes. If the record is too large for
// dlq, it sends the record without the body instead and reports bodyOmitted: the caller must
// then keep the original message (its body is nowhere else), for its queue's native
// dead-letter policy. err says whether the record (or the one without the body) was written.
func WriteDeadLetter(ctx context.Context, dlq *Queue, rec DeadLetter) (bodyOmitted bool, err error) {
	attrs := rec.MessageAttributes()
	_, err = dlq.SendWithAttributes(ctx, rec.Encode(), attrs)
	if errors.Is(err, ErrTooLarge) {
		bodyOmitted = true
		rec.BodyOmittedBytes, rec.Body, rec.Attributes = len(rec.Body), nil, nil
		_, err = dlq.SendWithAttributes(ctx, rec.Encode(), attrs)
	}
	if err == nil {
		countDeadLetter(ctx, rec.Source)
	}
	return bodyOmitted, err
}

// redriveLease hides a record Redrive leaves in the dead-letter queue for the rest of the run.
const redriveLease = 5 * time.Minute

// Redrive sends the original bodies (with their attributes) of up to max dead-letter records
// from dlq to target, as new messages (their attempts start again at 1), acknowledging each record once its body is sent.
// Records it cannot replay (not a record, or its body omitted) stay in dlq, hidden for a few
// minutes, and count as skipped. It stops early when dlq has no visible record left.
func Redrive(ctx context.Context, dlq, target *Queue, max int) (moved, skipped int, err error) {
	for moved+skipped < max {
		ms, err := dlq.Receive(ctx, ReceiveOptions{Max: max - moved - skipped, Wait: time.Second, Lease: redriveLease})
		if err != nil || len(ms) == 0 {
			return moved, skipped, err
		}
		for _, m := range ms {
			rec, err := ParseDeadLetter(m.Body)
			if err != nil || rec.Body == nil {
				skipped++
				continue
			}
			if _, err := target.SendWithAttributes(ctx, rec.Body, rec.Attributes); err != nil {
				return moved, skipped, err
			}
			// A failure here leaves the record in dlq: a later redrive sends the body again,
			// which consumers tolerate like any duplicate delivery.
			if err := dlq.Ack(ctx, m); err != nil {
				return moved, skipped, err
			}
			moved++
		}
	}
	return moved, skipped, nil
}
