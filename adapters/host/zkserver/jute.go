package zkserver

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// errShort: a record ended before its fields did.
var errShort = errors.New("zkserver: truncated record")

// reader decodes jute's big-endian records; the first error sticks and zero values follow it.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) bool() bool {
	if b := r.take(1); b != nil {
		return b[0] != 0
	}
	return false
}

// buffer reads a length-prefixed byte string; length -1 is null.
func (r *reader) buffer() []byte {
	n := r.int32()
	if n == -1 || r.err != nil {
		return nil
	}
	b := r.take(int(n))
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (r *reader) string() string { return string(r.buffer()) }

// count reads a vector's length, refusing one the rest of the record cannot hold.
func (r *reader) count(minEach int) int {
	n := r.int32()
	if n == -1 {
		return 0
	}
	if n < 0 || int(n)*minEach > len(r.b) {
		if r.err == nil {
			r.err = errShort
		}
		return 0
	}
	return int(n)
}

func (r *reader) strings() []string {
	n := r.count(4)
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.string())
	}
	return out
}

func (r *reader) acls() []coord.ACL {
	n := r.count(12)
	out := make([]coord.ACL, 0, n)
	for range n {
		perms := r.int32()
		scheme := r.string()
		out = append(out, coord.ACL{Perms: perms, ID: coord.ID{Scheme: scheme, ID: r.string()}})
	}
	return out
}

// writer encodes jute records.
type writer struct{ b []byte }

func (w *writer) int32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) int64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *writer) buffer(b []byte) {
	if b == nil {
		w.int32(-1)
		return
	}
	if len(b) > math.MaxInt32 {
		panic("zkserver: buffer beyond jute's int32 length")
	}
	w.int32(int32(len(b)))
	w.b = append(w.b, b...)
}

func (w *writer) string(s string) {
	w.int32(int32(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) strings(ss []string) {
	w.int32(int32(len(ss)))
	for _, s := range ss {
		w.string(s)
	}
}

func (w *writer) acls(acl []coord.ACL) {
	w.int32(int32(len(acl)))
	for _, a := range acl {
		w.int32(a.Perms)
		w.string(a.Scheme)
		w.string(a.ID.ID)
	}
}

func (w *writer) stat(s coord.Stat) {
	w.int64(s.Czxid)
	w.int64(s.Mzxid)
	w.int64(s.Ctime)
	w.int64(s.Mtime)
	w.int32(s.Version)
	w.int32(s.Cversion)
	w.int32(s.Aversion)
	w.int64(s.EphemeralOwner)
	w.int32(s.DataLength)
	w.int32(s.NumChildren)
	w.int64(s.Pzxid)
}

// eachMultiOp reads a multi request's op headers (MultiHeader) up to the done one, calling op
// with each op's type to read its record; it stops at op's error or a short request.
func (r *reader) eachMultiOp(op func(typ int32) error) error {
	for {
		typ, done := r.int32(), r.bool()
		r.int32() // err: unused in requests
		if r.err != nil || done {
			return r.err
		}
		if err := op(typ); err != nil {
			return err
		}
		if r.err != nil {
			return r.err
		}
	}
}

// multiResult writes a multi reply's header for an op's result of type typ (opError with its
// error, which ZooKeeper repeats as the body), and multiEnd the done header that ends the reply.
func (w *writer) multiResult(typ int32, err coord.Code) {
	w.int32(typ)
	w.bool(false)
	w.int32(int32(err))
	if typ == opError {
		w.int32(int32(err))
	}
}

func (w *writer) multiEnd() {
	w.int32(-1)
	w.bool(true)
	w.int32(-1)
}
