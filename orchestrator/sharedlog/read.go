package sharedlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// slot is what an SN of a color holds when a reader resolves it.
type slot int

const (
	slotRecord  slot = iota
	slotHole         // filled as a hole: no record will ever have this SN
	slotBeyond       // not handed out yet
	slotTrimmed      // trimmed
)

// resolver resolves SNs for one operation: the time it may spend waiting for pending SNs is
// shared by all the SNs it resolves.
type resolver struct {
	l        *Log
	color    string
	deadline time.Time
}

func (l *Log) resolver(color string) *resolver { return &resolver{l: l, color: color} }

// resolve returns what sn holds, waiting for a reserved SN's record until the operation's
// deadline and then filling it with a hole.
func (r *resolver) resolve(ctx context.Context, sn uint64) (Record, slot, error) {
	l := r.l
	id := recordID{r.color, sn}
	l.mu.Lock()
	rec, cached := l.cache[id]
	l.mu.Unlock()
	if cached {
		return rec, slotRecord, nil
	}
	key := l.recordKey(r.color, sn)
	for {
		a, found, err := l.tbl.Get(ctx, key)
		if err != nil {
			return Record{}, 0, err
		}
		if found {
			if hole, _ := a["hole"].(bool); hole {
				return Record{}, slotHole, nil
			}
			if m, _ := a["m"].(string); m != "" {
				if err := l.ensureFinished(ctx, m); err != nil {
					return Record{}, 0, err
				}
			}
			data, _ := a["v"].([]byte)
			rec := Record{Color: r.color, SN: sn, Data: data}
			l.remember(rec)
			return rec, slotRecord, nil
		}
		row, err := l.sequencerRow(ctx, r.color)
		if err != nil {
			return Record{}, 0, err
		}
		switch {
		case sn <= row.trim:
			return Record{}, slotTrimmed, nil // and perhaps collected already
		case sn >= row.next:
			return Record{}, slotBeyond, nil
		}
		// Reserved but not written yet: its writer is slow, or dead.
		if r.deadline.IsZero() {
			r.deadline = time.Now().Add(l.opts.HoleTimeout)
		}
		if time.Now().Before(r.deadline) {
			select {
			case <-time.After(l.opts.Poll):
				continue
			case <-ctx.Done():
				return Record{}, 0, ctx.Err()
			}
		}
		res, err := l.tbl.Update(ctx, key, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("hole"), true)})
		if err != nil {
			return Record{}, 0, err
		}
		if res.Applied {
			l.count(func(s *Stats) { s.HolesFilled++ })
			return Record{}, slotHole, nil
		}
		// The writer got there first: read what it wrote.
	}
}

func (l *Log) remember(rec Record) {
	if l.opts.CachedRecords < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cache) >= l.opts.CachedRecords {
		for k := range l.cache { // evict one at random: records are immutable, any may go
			delete(l.cache, k)
			break
		}
	}
	l.cache[recordID{rec.Color, rec.SN}] = rec
}

// untrimmed checks, after a record was read, that a Trim has not covered from since: reads
// never contradict a completed Trim.
func (l *Log) untrimmed(ctx context.Context, color string, from uint64) error {
	row, err := l.sequencerRow(ctx, color)
	if err != nil {
		return err
	}
	if from <= row.trim {
		return fmt.Errorf("%w: %s up to %d", ErrTrimmed, color, row.trim)
	}
	return nil
}

// Read returns the record of color with SN sn: ErrNotFound if there is none (a hole, or an SN not
// handed out yet), ErrTrimmed if it was trimmed.
func (l *Log) Read(ctx context.Context, color string, sn uint64) (Record, error) {
	if sn == 0 {
		return Record{}, fmt.Errorf("%w: SNs start at 1", ErrInvalid)
	}
	if err := checkName("color", color); err != nil {
		return Record{}, err
	}
	rec, s, err := l.resolver(color).resolve(ctx, sn)
	switch {
	case err != nil:
		return Record{}, err
	case s == slotTrimmed:
		return Record{}, fmt.Errorf("%w: %s %d", ErrTrimmed, color, sn)
	case s != slotRecord:
		return Record{}, fmt.Errorf("%w: %s %d", ErrNotFound, color, sn)
	}
	if err := l.untrimmed(ctx, color, sn); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// ReadNext returns the first record of color with an SN of at least from; found is false when
// there is none yet. ErrTrimmed if from was trimmed.
func (l *Log) ReadNext(ctx context.Context, color string, from uint64) (rec Record, found bool, err error) {
	if err := checkName("color", color); err != nil {
		return Record{}, false, err
	}
	from = max(from, 1)
	r := l.resolver(color)
	for sn := from; ; sn++ {
		rec, s, err := r.resolve(ctx, sn)
		switch {
		case err != nil:
			return Record{}, false, err
		case s == slotTrimmed:
			return Record{}, false, fmt.Errorf("%w: %s %d", ErrTrimmed, color, sn)
		case s == slotBeyond:
			return Record{}, false, l.untrimmed(ctx, color, from)
		case s == slotRecord:
			return rec, true, l.untrimmed(ctx, color, from)
		}
	}
}

// ReadPrev returns the last record of color with an SN of at most from (clamped to the tail);
// found is false when there is none. ErrTrimmed if from was trimmed.
func (l *Log) ReadPrev(ctx context.Context, color string, from uint64) (rec Record, found bool, err error) {
	row, err := l.sequencerRow(ctx, color)
	if err != nil {
		return Record{}, false, err
	}
	from = min(from, row.next-1)
	if from == 0 {
		return Record{}, false, nil
	}
	if from <= row.trim {
		return Record{}, false, fmt.Errorf("%w: %s %d", ErrTrimmed, color, from)
	}
	r := l.resolver(color)
	for sn := from; sn > 0; sn-- {
		rec, s, err := r.resolve(ctx, sn)
		switch {
		case err != nil:
			return Record{}, false, err
		case s == slotTrimmed:
			return Record{}, false, nil // nothing untrimmed below from
		case s == slotRecord:
			if err := l.untrimmed(ctx, color, sn); err != nil {
				return Record{}, false, err
			}
			return rec, true, nil
		}
	}
	return Record{}, false, nil
}

// CheckTail returns the SN of color's last record, or the trim point if that is later (0 for an
// empty color). The answer holds at one instant: the search down from the last SN handed out
// counts only if the sequencer row shows no SN handed out and no trim during it (then every SN
// above the record found is a hole, and no record can be above them); otherwise it starts over.
// A trim or an append that lands mid-search used to make it answer a trim point below a
// record already written.
func (l *Log) CheckTail(ctx context.Context, color string) (uint64, error) {
	for range maxTailSearches {
		before, err := l.sequencerRow(ctx, color)
		if err != nil {
			return 0, err
		}
		rec, found, err := l.ReadPrev(ctx, color, before.next-1)
		if err != nil && !errors.Is(err, ErrTrimmed) {
			return 0, err
		}
		after, err := l.sequencerRow(ctx, color)
		if err != nil {
			return 0, err
		}
		if after.next != before.next || after.trim != before.trim {
			continue
		}
		if found && rec.SN > after.trim {
			return rec.SN, nil
		}
		return after.trim, nil
	}
	return 0, fmt.Errorf("%w: CheckTail(%s): the tail moved during each of %d searches; try again", ErrBusy, color, maxTailSearches)
}

// maxTailSearches bounds CheckTail's searches on a color whose tail keeps moving.
const maxTailSearches = 100

// Trim discards color's records up to upTo: reads of them fail with ErrTrimmed at once, and
// Collect deletes them. upTo must not be beyond the SNs handed out.
func (l *Log) Trim(ctx context.Context, color string, upTo uint64) error {
	row, err := l.sequencerRow(ctx, color)
	if err != nil {
		return err
	}
	if upTo >= row.next {
		return fmt.Errorf("%w: Trim(%s, %d) is beyond the tail (next SN %d)", ErrInvalid, color, upTo, row.next)
	}
	_, err = l.tbl.Update(ctx, l.colorKey(color), store.Compare(store.Attr("trim"), store.Lt, int64(upTo)),
		store.Update{store.SetAttr(store.Attr("trim"), int64(upTo))})
	return err
}

// Subscribe calls fn with color's records in order from SN from on, waiting for new ones, until
// ctx ends or fn fails. To resume after a stop, subscribe from the last SN seen plus one.
func (l *Log) Subscribe(ctx context.Context, color string, from uint64, fn func(Record) error) error {
	wait := l.opts.Poll
	for {
		rec, found, err := l.ReadNext(ctx, color, from)
		if err != nil {
			return err
		}
		if found {
			if err := fn(rec); err != nil {
				return err
			}
			from, wait = rec.SN+1, l.opts.Poll
			continue
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 500*time.Millisecond)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
