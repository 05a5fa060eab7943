package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// DeadLetter is the record Serve writes to the dead-letter queue for a poison message. On the
// wire it is one JSON object:
//
//	{"source": "sqs://orders?region=eu-west-1", "message_id": "...", "attempts": 5,
//	 "error": "...", "time": "2025-01-02T15:04:05.999999999Z", "body": "..."}
//
// The original body is "body" when it is UTF-8 text, else "body_base64". A body too large for
// the dead-letter queue is left out ("body_omitted_bytes": its length) and the message stays
// in its own queue.
type DeadLetter struct {
	// Source is the queue the message came from (its redacted URL).
	Source string `json:"source"`
	// MessageID is the message's id in Source.
	MessageID string `json:"message_id"`
	// Attempts is how many times it was delivered (0 if Source does not count).
	Attempts int `json:"attempts"`
	// Error is the last handler error, or why the message was not run.
	Error string `json:"error"`
	// Time is when it was dead-lettered.
	Time time.Time `json:"time"`
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
		panic(err) // every field is a string, number or time: encoding cannot fail
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

// redriveLease hides a record Redrive leaves in the dead-letter queue for the rest of the run.
const redriveLease = 5 * time.Minute

// Redrive sends the original bodies of up to max dead-letter records from dlq to target, as new
// messages (their attempts start again at 1), acknowledging each record once its body is sent.
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
			if _, err := target.Send(ctx, rec.Body); err != nil {
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
