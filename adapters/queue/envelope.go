package queue

import (
	"bytes"
	"encoding/json"
	"time"
)

// EnvelopePrefix starts every envelope.
const EnvelopePrefix = `{"ssfkit-attributes":`

// Envelope is how a message carries its attributes on a backend that has none of its own (Azure
// Storage Queues, the log queue): a header of one line of JSON, then the body as it is.
//
//	{"ssfkit-attributes":{"ssfkit-attempts":"5","ssfkit-error":"..."}}
//	{"source":"azqueue://starts?...","message_id":"...",...}
//
// The header is a JSON object whose first member is "ssfkit-attributes" (the names and values),
// optionally followed by "ssfkit-first-received" (RFC 3339: when the message was first
// delivered, which the Azure driver records when it rewrites a message), so every header starts
// with EnvelopePrefix; JSON escapes line breaks, so the header ends at the first newline. To
// read one without ssfkit, split the message at its first newline. A message without
// attributes is stored as its body alone, unless the body itself starts with EnvelopePrefix:
// then it is enveloped too, so that decoding is never ambiguous.
//
// On Azure the envelope is inside the base64 encoding, like any body: decode the message text,
// then split it.
type Envelope struct {
	Attributes    map[string]string
	FirstReceived time.Time
	Body          []byte
}

type envelopeHeader struct {
	Attributes    map[string]string `json:"ssfkit-attributes"`
	FirstReceived string            `json:"ssfkit-first-received,omitempty"`
}

// header returns the header line with its newline, or nil when the body can stand alone.
func (e Envelope) header() []byte {
	if len(e.Attributes) == 0 && e.FirstReceived.IsZero() && !bytes.HasPrefix(e.Body, []byte(EnvelopePrefix)) {
		return nil
	}
	h := envelopeHeader{Attributes: e.Attributes}
	if h.Attributes == nil {
		h.Attributes = map[string]string{}
	}
	if !e.FirstReceived.IsZero() {
		h.FirstReceived = e.FirstReceived.UTC().Format(time.RFC3339Nano)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		panic(err) // strings only: encoding cannot fail
	}
	return buf.Bytes() // Encode ends it with the newline
}

// Encode returns the message to store.
func (e Envelope) Encode() []byte {
	h := e.header()
	if h == nil {
		return e.Body
	}
	return append(h, e.Body...)
}

// Size is len(e.Encode()).
func (e Envelope) Size() int { return len(e.header()) + len(e.Body) }

// DecodeEnvelope splits a stored message into its attributes and body. A message that is not an
// envelope is all body.
func DecodeEnvelope(b []byte) Envelope {
	if !bytes.HasPrefix(b, []byte(EnvelopePrefix)) {
		return Envelope{Body: b}
	}
	line, body, ok := bytes.Cut(b, []byte("\n"))
	var h envelopeHeader
	if !ok || json.Unmarshal(line, &h) != nil {
		return Envelope{Body: b}
	}
	e := Envelope{Attributes: CloneAttributes(h.Attributes), Body: body}
	if t, err := time.Parse(time.RFC3339Nano, h.FirstReceived); err == nil {
		e.FirstReceived = t
	}
	return e
}
