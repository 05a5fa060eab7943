package sharedlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// sequencer aggregates one color's reservations within this process: while a reservation is in
// flight, the appends that arrive queue up and the next reservation serves them all.
type sequencer struct {
	mu      sync.Mutex
	waiting []*reservation
	leading bool
}

type reservation struct {
	n     uint64
	first uint64
	err   error
	done  chan struct{}
}

func (l *Log) sequencer(color string) *sequencer {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.seqs[color]
	if !ok {
		s = &sequencer{}
		l.seqs[color] = s
	}
	return s
}

// reserve hands out n consecutive SNs of color and returns the first.
func (l *Log) reserve(ctx context.Context, color string, n uint64) (uint64, error) {
	s := l.sequencer(color)
	r := &reservation{n: n, done: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, r)
	if s.leading {
		s.mu.Unlock()
		select {
		case <-r.done:
			return r.first, r.err
		case <-ctx.Done():
			return 0, ctx.Err() // its SNs, if any, become holes
		}
	}
	s.leading = true
	for len(s.waiting) > 0 {
		batch := s.waiting
		s.waiting = nil
		s.mu.Unlock()
		var total uint64
		for _, b := range batch {
			total += b.n
		}
		// The batch's reservation must not fail because this caller gave up.
		first, err := l.reserveRange(context.WithoutCancel(ctx), color, total)
		for _, b := range batch {
			b.first, b.err = first, err
			first += b.n
			close(b.done)
		}
		s.mu.Lock()
	}
	s.leading = false
	s.mu.Unlock()
	return r.first, r.err
}

// reserveRange adds n to the color's next SN, in one atomic update.
func (l *Log) reserveRange(ctx context.Context, color string, n uint64) (uint64, error) {
	res, err := l.tbl.Update(ctx, l.colorKey(color), store.RowExists(), store.Update{store.AddInt(store.Attr("next"), int64(n))})
	if err != nil {
		return 0, err
	}
	if !res.Applied {
		return 0, fmt.Errorf("%w: %s (tenant %s)", ErrNoColor, color, l.tenant)
	}
	l.count(func(s *Stats) { s.Reservations++ })
	next, _ := res.Attrs["next"].(int64)
	return uint64(next) - n, nil
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Append appends records to color, in order, and returns the SN of the last. Records of one
// call get consecutive SNs unless the writer stalled past HoleTimeout between reserving and
// writing, in which case the records whose SNs readers filled with holes are appended again
// after the others.
func (l *Log) Append(ctx context.Context, color string, records ...[]byte) (uint64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("%w: Append of no record", ErrInvalid)
	}
	if err := checkName("color", color); err != nil {
		return 0, err
	}
	token := newToken()
	var last uint64
	for len(records) > 0 {
		first, err := l.reserve(ctx, color, uint64(len(records)))
		if err != nil {
			return 0, err
		}
		if err := l.fault(FaultReserved); err != nil {
			return 0, err
		}
		ups := make([]store.BatchUpdate, len(records))
		for i, r := range records {
			ups[i] = l.recordWrite(color, first+uint64(i), r, token+"/"+strconv.Itoa(i), "")
		}
		results, err := l.tbl.UpdateBatch(ctx, ups)
		if err != nil {
			return 0, err
		}
		var again [][]byte
		for i, res := range results {
			if res.Applied || res.Attrs["w"] == ups[i].Update[1].Value {
				last = first + uint64(i)
				continue
			}
			again = append(again, records[i]) // a reader filled its SN with a hole
		}
		l.count(func(s *Stats) { s.Appends += int64(len(records) - len(again)) })
		records = again
	}
	return last, nil
}

// recordWrite creates the record at sn unless the SN is taken (written, or filled as a hole).
func (l *Log) recordWrite(color string, sn uint64, data []byte, writer, multi string) store.BatchUpdate {
	upd := store.Update{store.SetAttr(store.Attr("v"), data), store.SetAttr(store.Attr("w"), writer)}
	if multi != "" {
		upd = append(upd, store.SetAttr(store.Attr("m"), multi))
	}
	return store.BatchUpdate{Key: l.recordKey(color, sn), Cond: store.RowAbsent(), Update: upd}
}
