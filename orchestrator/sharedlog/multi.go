package sharedlog

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Part is one record of a multi-color append.
type Part struct {
	Color string
	Data  []byte
}

// MultiAppend appends parts atomically (FlexLog Alg. 2): once it has recorded the parts in its
// row (keyed by id), every part will appear in its color, whoever finishes the job (this call, a
// retry with the same id, a reader that meets one of the parts, or Collect); before that, none
// will. A reader that meets a part of an unfinished multi-color append finishes it before
// returning the part, so a reader that saw one part then sees all of them. It returns each part's
// SN. Calling it again with the same id and parts returns the same SNs: that is how an append is
// made exactly-once (AppendOnce).
func (l *Log) MultiAppend(ctx context.Context, id string, parts []Part) ([]uint64, error) {
	if err := checkName("append id", id); err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: MultiAppend of no part", ErrInvalid)
	}
	colors, data := map[string]any{}, map[string]any{}
	distinct := map[string]bool{}
	for i, p := range parts {
		if err := checkName("color", p.Color); err != nil {
			return nil, err
		}
		if _, err := l.sequencerRow(ctx, p.Color); err != nil {
			return nil, err
		}
		colors[strconv.Itoa(i)], data[strconv.Itoa(i)] = p.Color, nonNil(p.Data)
		distinct[p.Color] = true
	}
	res, err := l.tbl.Update(ctx, l.multiKey(id), store.RowAbsent(), store.Update{
		store.SetAttr(store.Attr("colors"), colors), store.SetAttr(store.Attr("data"), data),
		store.SetAttr(store.Attr("sns"), map[string]any{}), store.SetAttr(store.Attr("n"), int64(len(parts))),
		// Only parts in several colors need their visibility tied together.
		store.SetAttr(store.Attr("atomic"), len(distinct) > 1),
		store.SetAttr(store.Attr("t"), time.Now().UnixMilli()),
	})
	if err != nil {
		return nil, err
	}
	row := res.Attrs
	if !res.Applied && !sameParts(row, parts) {
		return nil, fmt.Errorf("%w: append id %s was used for other records", ErrInvalid, id)
	}
	if err := l.fault(FaultMultiCreated); err != nil {
		return nil, err
	}
	return l.finish(ctx, id, row)
}

// AppendOnce appends records to color exactly once per token: a retry with the same token (after
// a crash, or by a re-executed SSF step) returns the first call's SN instead of appending again.
// It returns the SN of the last record.
func (l *Log) AppendOnce(ctx context.Context, token, color string, records ...[]byte) (uint64, error) {
	if len(records) == 0 {
		return 0, fmt.Errorf("%w: AppendOnce of no record", ErrInvalid)
	}
	parts := make([]Part, len(records))
	for i, r := range records {
		parts[i] = Part{Color: color, Data: r}
	}
	sns, err := l.MultiAppend(ctx, token, parts)
	if err != nil {
		return 0, err
	}
	return sns[len(sns)-1], nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func sameParts(row store.Attrs, parts []Part) bool {
	colors, _ := row["colors"].(map[string]any)
	data, _ := row["data"].(map[string]any)
	if n, _ := row["n"].(int64); int(n) != len(parts) {
		return false
	}
	for i, p := range parts {
		d, _ := data[strconv.Itoa(i)].([]byte)
		if colors[strconv.Itoa(i)] != p.Color || !bytes.Equal(d, p.Data) {
			return false
		}
	}
	return true
}

// finish writes every part of the multi-color append whose row is row, then marks it done. It
// is idempotent and may run concurrently with other finishers: each part's SN is chosen once
// (a conditional write to the row), each record is created at most once.
func (l *Log) finish(ctx context.Context, id string, row store.Attrs) ([]uint64, error) {
	n, _ := row["n"].(int64)
	colors, _ := row["colors"].(map[string]any)
	data, _ := row["data"].(map[string]any)
	sns, _ := row["sns"].(map[string]any)
	atomic, _ := row["atomic"].(bool)
	multi := ""
	if atomic {
		multi = id
	}
	out := make([]uint64, n)
	done, _ := row["done"].(bool)
	for i := range int(n) {
		part := strconv.Itoa(i)
		color, _ := colors[part].(string)
		d, _ := data[part].([]byte)
		snPath := store.Attr("sns").Entry(part)
		for {
			sn, ok := sns[part].(int64)
			if !ok {
				first, err := l.reserve(ctx, color, 1)
				if err != nil {
					return nil, err
				}
				res, err := l.tbl.Update(ctx, l.multiKey(id), store.NotExists(snPath), store.Update{store.SetAttr(snPath, int64(first))})
				if err != nil {
					return nil, err
				}
				sns, _ = res.Attrs["sns"].(map[string]any) // ours, or another finisher's choice
				if err := l.fault(FaultPartReserved); err != nil {
					return nil, err
				}
				continue
			}
			if done {
				out[i] = uint64(sn)
				break
			}
			w := l.recordWrite(color, uint64(sn), d, id+"/"+part, multi)
			res, err := l.tbl.Update(ctx, w.Key, w.Cond, w.Update)
			if err != nil {
				return nil, err
			}
			if res.Applied || res.Attrs["w"] == id+"/"+part {
				if res.Applied {
					l.count(func(s *Stats) { s.Appends++ })
				}
				if err := l.fault(FaultPartWritten); err != nil {
					return nil, err
				}
				out[i] = uint64(sn)
				break
			}
			// A reader filled the SN with a hole: choose another.
			res, err = l.tbl.Update(ctx, l.multiKey(id), store.Equal(snPath, sn), store.Update{store.RemoveAttr(snPath)})
			if err != nil {
				return nil, err
			}
			sns, _ = res.Attrs["sns"].(map[string]any)
		}
	}
	if !done {
		if _, err := l.tbl.Update(ctx, l.multiKey(id), store.RowExists(), store.Update{store.SetAttr(store.Attr("done"), true)}); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	l.done[id] = true
	l.mu.Unlock()
	return out, nil
}

// ensureFinished finishes the multi-color append id if it is not known to be done, so that a
// part is returned only once every part is in its color.
func (l *Log) ensureFinished(ctx context.Context, id string) error {
	l.mu.Lock()
	known := l.done[id]
	l.mu.Unlock()
	if known {
		return nil
	}
	row, found, err := l.tbl.Get(ctx, l.multiKey(id))
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("sharedlog: a record names multi-color append %s, which has no row", id)
	}
	_, err = l.finish(ctx, id, row)
	return err
}
