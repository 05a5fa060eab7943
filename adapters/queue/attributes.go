package queue

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Message attributes are string names and values sent with a message and delivered with it,
// without being part of its body. Queue checks them against one set of rules, the strictest of
// the clouds' (SQS's and Pub/Sub's), so an application whose attributes pass on one backend
// passes on every one:
//
//   - at most MaxAttributes attributes (SQS allows 10; the SQS driver keeps one for itself, to
//     flag base64-encoded bodies);
//   - a name is 1 to MaxAttributeNameBytes letters, digits, '-', '_' and '.', does not start or
//     end with '.', has no "..", and does not start with "AWS." or "Amazon." (reserved by SQS)
//     or "goog" (reserved by Pub/Sub), in any case; ReservedAttribute is the driver's own;
//   - a value is 1 to MaxAttributeValueBytes bytes of UTF-8 text without the control
//     characters XML forbids (SQS values have the body's character set, and may not be empty;
//     Pub/Sub caps values at 1024 bytes). AttributeValue makes any string a valid value.
//
// Attributes count against Limits().MaxMessageBytes as their envelope does (see Envelope): the
// body and its attributes must fit together.
const (
	MaxAttributes          = 9
	MaxAttributeNameBytes  = 256
	MaxAttributeValueBytes = 1024
	// ReservedAttribute is the SQS driver's attribute flagging a base64-encoded body; no message
	// may set it.
	ReservedAttribute = "ssfkit-encoding"
)

// CheckAttributes reports, as ErrInvalid naming the attribute and the rule, the first
// attribute (in name order) that breaks the rules above.
func CheckAttributes(attrs map[string]string) error {
	if len(attrs) > MaxAttributes {
		return fmt.Errorf("%w: %d message attributes (at most %d: SQS allows 10 and keeps one for the driver)", ErrInvalid, len(attrs), MaxAttributes)
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if problem := checkAttributeName(k); problem != "" {
			return fmt.Errorf("%w: message attribute name %.64q: %s", ErrInvalid, k, problem)
		}
		if problem := checkAttributeValue(attrs[k]); problem != "" {
			return fmt.Errorf("%w: message attribute %s: %s", ErrInvalid, k, problem)
		}
	}
	return nil
}

func checkAttributeName(k string) string {
	switch {
	case k == "":
		return "empty"
	case len(k) > MaxAttributeNameBytes:
		return fmt.Sprintf("%d bytes (at most %d)", len(k), MaxAttributeNameBytes)
	case k == ReservedAttribute:
		return "reserved for the SQS driver"
	case k[0] == '.' || k[len(k)-1] == '.' || strings.Contains(k, ".."):
		return "starts or ends with '.', or has \"..\" (SQS refuses them)"
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("has %q: names are ASCII letters, digits, '-', '_' and '.' (SQS's rule)", c)
		}
	}
	lower := strings.ToLower(k)
	switch {
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return "starts with AWS. or Amazon. (reserved by SQS)"
	case strings.HasPrefix(lower, "goog"):
		return "starts with goog (reserved by Pub/Sub)"
	}
	return ""
}

func checkAttributeValue(v string) string {
	switch {
	case v == "":
		return "empty value (SQS refuses empty values)"
	case len(v) > MaxAttributeValueBytes:
		return fmt.Sprintf("value of %d bytes (at most %d, Pub/Sub's limit; AttributeValue shortens one)", len(v), MaxAttributeValueBytes)
	}
	for i, r := range v {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(v[i:]); n <= 1 {
				return fmt.Sprintf("value is not UTF-8 at byte %d", i)
			}
		}
		if !xmlChar(r) {
			return fmt.Sprintf("value has the character %U at byte %d, which SQS refuses (AttributeValue replaces it)", r, i)
		}
	}
	return ""
}

// xmlChar reports whether SQS accepts r in a body or attribute value (the characters XML 1.0
// allows).
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// truncated ends a value AttributeValue shortened.
const truncated = "…"

// AttributeValue makes s a valid attribute value: characters SQS refuses (and bytes that are not
// UTF-8) become U+FFFD, a value longer than MaxAttributeValueBytes is cut at a character
// boundary and ends with "…", and an empty one becomes "-".
func AttributeValue(s string) string {
	var b strings.Builder
	for _, r := range s { // a byte that is not UTF-8 comes as utf8.RuneError
		if !xmlChar(r) {
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > MaxAttributeValueBytes {
			// Cut back until the marker fits.
			out := b.String()
			for len(out)+len(truncated) > MaxAttributeValueBytes {
				_, n := utf8.DecodeLastRuneInString(out)
				out = out[:len(out)-n]
			}
			return out + truncated
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// CloneAttributes copies attrs for a driver to keep; nil when there are none, so that a message
// without attributes has nil Attributes on every backend.
func CloneAttributes(attrs map[string]string) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]string, len(attrs))
	for k, v := range attrs {
		out[k] = v
	}
	return out
}
