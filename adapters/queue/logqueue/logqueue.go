// Package logqueue is a queue on the shared log (FlexLog's Listing 1): messages are records of a
// color, consumed in order, so SSFs can take their asynchronous starts from any store the log
// runs on, with no queue service at all.
//
// URL: log://TENANT/COLOR?store=STORE_URL&create=true&max_message_bytes=N, where STORE_URL (query
// encoded) is the store the log lives in; create=true adds the color when missing.
//
// Send appends the body to the color; the message id is its SN. Receive walks the color from
// the consumers' cursor and takes a lease on each record it delivers with a conditional write
// to the record's lease row (in the log's table, partition q|TENANT|COLOR): lease end, attempts,
// the first delivery's time, and a handle that Ack, Retry and Extend must present. A message
// with attributes is stored as a queue.Envelope. Once a prefix of the color is
// acknowledged, the cursor moves past it and the log is trimmed behind it (the log's Collect
// deletes the records). Lease ends are this process's clock; consumers on machines whose clocks
// disagree by more than a lease may deliver a message twice, which the runtime tolerates (its
// instances are exactly-once).
package logqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ssfkit/ssfkit/adapters/queue"
	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

func init() { queue.Register("log", open) }

// MaxBatch is the most messages one Receive returns.
const MaxBatch = 10

// Driver is a queue over one color of a shared log.
type Driver struct {
	log   *sharedlog.Log
	tbl   *store.Table
	color string
	limit int
	owned bool // the table was opened from the URL and is closed with the driver
}

// New returns a queue over color of l (which must exist), with messages of at most maxBytes.
func New(l *sharedlog.Log, color string, maxBytes int) *Driver {
	return &Driver{log: l, tbl: l.Table(), color: color, limit: maxBytes}
}

func open(ctx context.Context, u *queue.URL) (queue.Driver, error) {
	if err := u.CheckParams("store", "create", "max_message_bytes"); err != nil {
		return nil, err
	}
	tenant, color := u.Host, strings.TrimPrefix(u.Path, "/")
	if tenant == "" || color == "" || strings.Contains(color, "/") {
		return nil, fmt.Errorf("%w: want log://TENANT/COLOR?store=STORE_URL, got %s", queue.ErrInvalid, u.Redacted())
	}
	storeURL := u.Param("store", "")
	if storeURL == "" {
		return nil, fmt.Errorf("%w: %s needs store=STORE_URL (query encoded), the store the log lives in", queue.ErrInvalid, u.Redacted())
	}
	create, err := u.BoolParam("create")
	if err != nil {
		return nil, err
	}
	tbl, err := store.Open(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	limit := min(256*1024, tbl.Limits().MaxRowBytes-4096) // the record's own attributes fit in the rest
	if limit, err = queue.MaxMessageBytes(u, limit, limit); err != nil {
		tbl.Close()
		return nil, err
	}
	l, err := sharedlog.New(tbl, tenant, sharedlog.Options{})
	if err == nil && create {
		err = l.AddColor(ctx, color, "")
	}
	if err == nil {
		_, err = l.CheckTail(ctx, color) // the color exists
	}
	if err != nil {
		tbl.Close()
		return nil, err
	}
	d := New(l, color, limit)
	d.owned = true
	return d, nil
}

// handle is a delivery's lease: the record and the token its lease row holds.
type handle struct {
	sn    uint64
	token string
}

func (d *Driver) leaseKey(sn uint64) store.Key {
	return store.Key{Partition: "q|" + d.log.Tenant() + "|" + d.color, Sort: fmt.Sprintf("%020d", sn)}
}

func (d *Driver) cursorKey() store.Key {
	return store.Key{Partition: "q|" + d.log.Tenant() + "|" + d.color, Sort: "cursor"}
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func nowMillis() int64 { return time.Now().UnixMilli() }

// Log is the log the queue is a color of.
func (d *Driver) Log() *sharedlog.Log { return d.log }

// Send appends body to the color, in a queue.Envelope with its attributes.
func (d *Driver) Send(ctx context.Context, body []byte, attrs map[string]string) (string, error) {
	data := queue.Envelope{Attributes: attrs, Body: body}.Encode()
	if len(data) > d.limit {
		return "", fmt.Errorf("%w: %d bytes, limit %d", queue.ErrTooLarge, len(data), d.limit)
	}
	sn, err := d.log.Append(ctx, d.color, data)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(sn, 10), nil
}

// Receive leases up to max messages, waiting up to wait for one.
func (d *Driver) Receive(ctx context.Context, max int, wait, lease time.Duration) ([]*queue.Message, error) {
	deadline := time.Now().Add(wait)
	pause := 10 * time.Millisecond
	for {
		msgs, err := d.take(ctx, max, lease)
		if err != nil || len(msgs) > 0 || !time.Now().Before(deadline) {
			return msgs, err
		}
		select {
		case <-time.After(min(pause, time.Until(deadline))):
			pause = min(2*pause, 200*time.Millisecond)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// take walks the color from the cursor and leases the deliverable records.
func (d *Driver) take(ctx context.Context, max int, lease time.Duration) ([]*queue.Message, error) {
	c, _, err := d.tbl.Get(ctx, d.cursorKey())
	if err != nil {
		return nil, err
	}
	start, _ := c["next"].(int64)
	cursor := uint64(max64(start, 1))
	acked := true // whether every record below sn is acknowledged
	var out []*queue.Message
	for sn := cursor; len(out) < max; {
		rec, found, err := d.log.ReadNext(ctx, d.color, sn)
		if errors.Is(err, sharedlog.ErrTrimmed) {
			break // another consumer moved the cursor and trimmed: start over next time
		}
		if err != nil {
			return out, err
		}
		if !found {
			break
		}
		sn = rec.SN + 1
		row, exists, err := d.tbl.Get(ctx, d.leaseKey(rec.SN))
		if err != nil {
			return out, err
		}
		if done, _ := row["acked"].(bool); done {
			if acked {
				cursor = rec.SN + 1
			}
			continue
		}
		acked = false
		if until, _ := row["until"].(int64); exists && until >= nowMillis() {
			continue // leased by another receiver
		}
		cond, token := store.RowAbsent(), newToken()
		upd := store.Update{
			store.SetAttr(store.Attr("until"), nowMillis()+lease.Milliseconds()),
			store.SetAttr(store.Attr("token"), token),
			store.AddInt(store.Attr("attempts"), 1),
		}
		if exists {
			cond = store.Equal(store.Attr("token"), row["token"])
		} else {
			upd = append(upd, store.SetAttr(store.Attr("first"), nowMillis())) // the first delivery
		}
		res, err := d.tbl.Update(ctx, d.leaseKey(rec.SN), cond, upd)
		if err != nil {
			return out, err
		}
		if !res.Applied {
			continue // another receiver took it first
		}
		attempts, _ := res.Attrs["attempts"].(int64)
		env := queue.DecodeEnvelope(rec.Data)
		m := &queue.Message{ID: strconv.FormatUint(rec.SN, 10), Body: env.Body, Attributes: env.Attributes, Attempts: int(attempts), Handle: handle{rec.SN, token}}
		if first, ok := res.Attrs["first"].(int64); ok {
			m.FirstReceived = time.UnixMilli(first)
		}
		out = append(out, m)
	}
	if uint64(max64(start, 1)) < cursor {
		if err := d.advance(ctx, uint64(max64(start, 1)), cursor); err != nil {
			return out, err
		}
	}
	return out, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// advance moves the cursor from old to next (every record below next is acknowledged), trims
// the log behind it and deletes the lease rows it passed.
func (d *Driver) advance(ctx context.Context, old, next uint64) error {
	res, err := d.tbl.Update(ctx, d.cursorKey(), store.Or(store.RowAbsent(), store.Compare(store.Attr("next"), store.Lt, int64(next))),
		store.Update{store.SetAttr(store.Attr("next"), int64(next))})
	if err != nil || !res.Applied {
		return err // another consumer moved it further
	}
	if err := d.log.Trim(ctx, d.color, next-1); err != nil {
		return err
	}
	for sn := old; sn < next; sn++ {
		if _, err := d.tbl.Delete(ctx, d.leaseKey(sn), store.Always()); err != nil {
			return err
		}
	}
	return nil
}

// leased updates the message's lease row if the caller still holds its lease.
func (d *Driver) leased(ctx context.Context, m *queue.Message, upd store.Update) error {
	h, ok := m.Handle.(handle)
	if !ok {
		return fmt.Errorf("%w: the message was not received from this queue", queue.ErrInvalid)
	}
	res, err := d.tbl.Update(ctx, d.leaseKey(h.sn), store.And(store.Equal(store.Attr("token"), h.token),
		store.Compare(store.Attr("until"), store.Ge, nowMillis())), upd)
	if err != nil {
		return err
	}
	if !res.Applied {
		return fmt.Errorf("%w: message %s: the lease expired or ended", queue.ErrNotFound, m.ID)
	}
	return nil
}

// Ack acknowledges the message.
func (d *Driver) Ack(ctx context.Context, m *queue.Message) error {
	return d.leased(ctx, m, store.Update{store.SetAttr(store.Attr("acked"), true)})
}

// Retry ends the lease; the message is delivered again after delay.
func (d *Driver) Retry(ctx context.Context, m *queue.Message, delay time.Duration) error {
	return d.leased(ctx, m, store.Update{store.SetAttr(store.Attr("until"), nowMillis()+delay.Milliseconds()-1),
		store.SetAttr(store.Attr("token"), newToken())})
}

// Extend makes the lease end lease from now.
func (d *Driver) Extend(ctx context.Context, m *queue.Message, lease time.Duration) error {
	return d.leased(ctx, m, store.Update{store.SetAttr(store.Attr("until"), nowMillis()+lease.Milliseconds())})
}

// Limits reports the queue's limits.
func (d *Driver) Limits() queue.Limits {
	return queue.Limits{MaxMessageBytes: d.limit, MaxBatch: MaxBatch, MaxLease: 12 * time.Hour}
}

// Close closes the table if the driver opened it.
func (d *Driver) Close() error {
	if d.owned {
		return d.tbl.Close()
	}
	return nil
}
