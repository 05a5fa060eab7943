package coord

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// The table's partitions.
const (
	txnPartition     = "zk/txn"     // one row per zxid, sort key its 20-digit decimal
	blobPartition    = "zk/blob"    // a large transaction's parts, written before its log row
	sessionPartition = "zk/session" // one heartbeat row per session, sort key its hex id
	metaPartition    = "zk/meta"    // the table's settings: "blobs", the id its objects go under
)

// Blobs is an object store for log entries too large for one row (FaaSKeeper keeps node data
// in S3): internal/coordblob opens one by URL (S3, Azure Blob, GCS, a directory, memory). Its
// objects are immutable once the log names them.
type Blobs interface {
	// Put writes an object whole.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads an object; an error wrapping fs.ErrNotExist when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes an object; deleting one that is not there is no error.
	Delete(ctx context.Context, key string) error
	// List calls fn with the key of every object under prefix.
	List(ctx context.Context, prefix string, fn func(key string) error) error
}

// Config tunes a Service; zero values take ZooKeeper's defaults for a 2 s tick.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a negotiated session timeout (4 s, 40 s).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// Tick is how often the Service reads other writers' transactions and looks for expired
	// sessions (200 ms; negative: never, for a function that calls Tend on a schedule).
	Tick time.Duration
	// SnapshotEvery is how many transactions pass between the snapshots a Service writes on
	// its tick; each is followed by a compaction that keeps SnapshotEvery log entries before
	// it, so a server lagging less than that never needs the snapshot (10000; negative: never).
	SnapshotEvery int64
	// OnWrite, when set, is called with the time each logged transaction spent in each stage
	// of the write path, before the write returns (benchmarks; nil costs nothing).
	OnWrite func(WriteStages)
	// Blobs, when set, holds each log entry too large for one row, as one object named by its
	// log row with its SHA-256; without it such an entry is split across rows of the table.
	// Every Service on a table must have the same Blobs.
	Blobs Blobs
	// BlobSweep is how often the Service deletes objects no log row can name any more: those of
	// appends that lost their zxid after an ambiguous failure or a crash (10 min; negative:
	// never).
	BlobSweep time.Duration
	// ContainerCheck is how often the Service deletes the containers that had children and have
	// none, and the TTL nodes without children not modified for their TTL (1 min, ZooKeeper's
	// znode.container.checkIntervalMs; negative: never). A proxy never deletes them: the
	// heartbeat does.
	ContainerCheck time.Duration
	// Waker, when set, makes the Service a proxy (the serverless path, requests.go): it never
	// appends to the log, but stores each write as a request of its session and wakes a writer
	// (a Service without a Waker, calling Decide) to decide it; its expirer fences expired
	// sessions and wakes a writer to close them; it writes no snapshot and sweeps no bucket.
	Waker Waker
	// DecideTimeout bounds how long a proxy waits for a writer's decision before the request's
	// outcome is reported unknown (30 s).
	DecideTimeout time.Duration
	// OnPropose, when set on a proxy, is called with the time each decided write spent in each
	// stage of the serverless write path (benchmarks; nil costs nothing).
	OnPropose func(ProposeStages)
}

// ProposeStages is where one write through a proxy spent its time (the last attempt's stages
// when another request took its number first; Attempts counts them).
type ProposeStages struct {
	// Store is the conditional create of the request's row (after a scan for the session's
	// last number when the proxy did not know it).
	Store time.Duration
	// Wake is the queue send that wakes a writer.
	Wake time.Duration
	// Await is from the wake-up to the decision in the proxy's replica: the queue's delivery,
	// the writer's decision, and the proxy's reads of the log's tail until it sees it.
	Await    time.Duration
	Attempts int
}

// WriteStages is where one logged transaction's write spent its time, stage by stage (the
// last attempt's stages when other writers took zxids first; Attempts counts them).
type WriteStages struct {
	// CatchUp reads the log's tail before validating: one Get that finds no row when this
	// Service is the only writer.
	CatchUp time.Duration
	// Validate runs the transaction on an overlay of the replica at zxid N-1.
	Validate time.Duration
	// Append is the conditional create of log row N: the lock and the commit in one request.
	Append time.Duration
	// Apply applies the transaction to the replica (without reading row N back) and fires the
	// watches it triggers (queueing their events on the watchers' connections).
	Apply time.Duration
	// Attempts is the number of zxids tried (1 when no other writer won one first).
	Attempts int
}

func (c Config) withDefaults() Config {
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 10000
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 4 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 40 * time.Second
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		c.MaxSessionTimeout = c.MinSessionTimeout
	}
	if c.Tick == 0 {
		c.Tick = 200 * time.Millisecond
	}
	if c.BlobSweep == 0 {
		c.BlobSweep = 10 * time.Minute
	}
	if c.ContainerCheck == 0 {
		c.ContainerCheck = time.Minute
	}
	if c.DecideTimeout <= 0 {
		c.DecideTimeout = 30 * time.Second
	}
	return c
}

// ErrClientAhead: a reconnecting client has seen a zxid this server has not, so serving it would
// let it see the past (ZooKeeper refuses such a connection; the client tries again).
var ErrClientAhead = errors.New("coord: the client has seen a later zxid than this server")

// Service is one server of the coordination service over a store table. Several Services (in
// several processes) may share a table; each serves from its own replica of the log.
type Service struct {
	tbl *store.Table
	cfg Config

	applyMu sync.Mutex   // one catch-up at a time
	writeMu sync.Mutex   // one append attempt at a time in this process
	mu      sync.RWMutex // the replica: applies write-lock it, reads read-lock it
	t       *tree
	broken  error // a log entry that did not apply: the Service refuses everything after it

	blobs     Blobs
	objPrefix string // this table's objects: zk/<the table's blobs id>/
	namedMu   sync.Mutex
	named     map[string]bool // the objects log rows name
	lastSweep time.Time
	lastReap  time.Time

	watchMu  sync.Mutex
	watches  [watchKinds]map[string]map[*Watcher]bool // by kind, then path
	attached map[int64]*Watcher

	snapshotAt int64 // the newest snapshot this Service wrote or started from (loop only)
	// base is the snapshot the replica was last loaded from (0: it replayed the log from the
	// start): it never read the entries up to it, so it cannot tell their objects (mu).
	base int64

	touchMu sync.Mutex
	touched map[int64]time.Time // when this Service last refreshed a session's heartbeat row

	reqMu      sync.Mutex // a proxy stores one request at a time
	seqMu      sync.Mutex
	nextSeq    map[int64]int64 // a proxy's next request number per session, while it knows it
	awaitGuess awaitGuess      // how long a proxy's requests take to be decided

	stop chan struct{}
	done chan struct{}
}

// Caller is who makes a request: its session (0 for none), its authenticated ids and, to set
// watches, its attachment.
type Caller struct {
	Session int64
	Auth    []ID
	W       *Watcher
}

// New replays tbl's log into a replica and starts the Service's tick (log tail and expirer).
func New(ctx context.Context, tbl *store.Table, cfg Config) (*Service, error) {
	if lim := tbl.Limits().MaxRowBytes; lim > 0 && lim < 8<<10 {
		return nil, fmt.Errorf("coord: store %s rows hold %d bytes; the log needs at least 8 KiB", tbl.Name(), lim)
	}
	s := &Service{
		tbl: tbl, cfg: cfg.withDefaults(), t: newTree(),
		attached: map[int64]*Watcher{}, touched: map[int64]time.Time{}, nextSeq: map[int64]int64{},
		stop: make(chan struct{}), done: make(chan struct{}),
		blobs: cfg.Blobs, named: map[string]bool{}, lastSweep: time.Now(),
	}
	for k := range s.watches {
		s.watches[k] = map[string]map[*Watcher]bool{}
	}
	// A proxy only reads objects, by the names log rows give, and never sweeps or compacts: it
	// needs no prefix of its own, so it never writes the table's meta row (its identity may not).
	if s.blobs != nil && cfg.Waker == nil {
		id, err := s.blobsID(ctx)
		if err != nil {
			return nil, err
		}
		s.objPrefix = "zk/" + id + "/"
	}
	latest, err := s.latestSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	if latest > 0 {
		if s.t, err = s.loadSnapshot(ctx, latest); err != nil {
			return nil, err
		}
		s.snapshotAt, s.base = latest, latest
	}
	if err := s.catchUp(ctx, 0); err != nil {
		return nil, err
	}
	if s.cfg.Tick > 0 {
		go s.loop()
	} else {
		close(s.done)
	}
	return s, nil
}

// Close stops the tick. Sessions live on in the table; another Service may serve them.
func (s *Service) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *Service) loop() {
	defer close(s.done)
	tk := time.NewTicker(s.cfg.Tick)
	defer tk.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tk.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*s.cfg.Tick+5*time.Second)
		// Retried next tick; a store outage shows in requests' errors.
		_ = s.Tend(ctx)
		cancel()
	}
}

// Tend is one pass of the Service's housekeeping, which its tick runs and a scheduled function
// (the serverless path's heartbeat) calls: read the log's tail, expire sessions whose heartbeat
// is older than their timeout, and, unless the Service is a proxy, delete emptied containers
// and expired TTL nodes, write a snapshot when one is due and sweep the bucket.
func (s *Service) Tend(ctx context.Context) error {
	if err := s.catchUp(ctx, 0); err != nil {
		return err
	}
	if err := s.expire(ctx); err != nil {
		return err
	}
	if s.cfg.Waker != nil {
		return nil
	}
	if s.cfg.ContainerCheck > 0 && time.Since(s.lastReap) >= s.cfg.ContainerCheck {
		if err := s.reap(ctx); err != nil {
			return err
		}
		s.lastReap = time.Now()
	}
	if err := s.maybeSnapshot(ctx); err != nil {
		return err
	}
	if s.blobs != nil && s.cfg.BlobSweep > 0 && time.Since(s.lastSweep) >= s.cfg.BlobSweep {
		if _, err := s.sweep(ctx); err != nil {
			return err
		}
		s.lastSweep = time.Now()
	}
	return nil
}

// reap deletes the emptied containers and expired TTL nodes, each with a transaction that
// checks again, at its zxid, that the node still qualifies: a child created or a TTL node
// modified since the scan keeps the node.
func (s *Service) reap(ctx context.Context) error {
	now := time.Now().UnixMilli()
	var doomed []string
	s.mu.RLock()
	for p, n := range s.t.nodes {
		if reapable(n, now) {
			doomed = append(doomed, p)
		}
	}
	s.mu.RUnlock()
	sort.Strings(doomed)
	for _, p := range doomed {
		_, _, _, err := s.write(ctx, &txn{Ops: []Op{{Kind: opDeleteContainer, Path: p, Version: -1}}})
		switch CodeOf(err) {
		case OK, NoNode, NotEmpty, BadVersion: // deleted, or no longer to be
		default:
			return err
		}
	}
	return nil
}

// maybeSnapshot writes a snapshot and compacts the log behind it once SnapshotEvery
// transactions have passed since the last one.
func (s *Service) maybeSnapshot(ctx context.Context) error {
	every := s.cfg.SnapshotEvery
	if every < 0 || s.LastZxid()-s.snapshotAt < every {
		return nil
	}
	z, err := s.Snapshot(ctx)
	if err != nil {
		return err
	}
	s.snapshotAt = z
	_, err = s.Compact(ctx, every)
	return err
}

// LastZxid is the last transaction applied to this Service's replica.
func (s *Service) LastZxid() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.t.zxid
}

// Sync brings the replica up to the log's end (ZooKeeper's sync) and returns its zxid.
func (s *Service) Sync(ctx context.Context) (int64, error) {
	if err := s.catchUp(ctx, 0); err != nil {
		return 0, err
	}
	return s.LastZxid(), nil
}

func txnKey(zxid int64) store.Key {
	return store.Key{Partition: txnPartition, Sort: fmt.Sprintf("%020d", zxid)}
}

// catchUp applies the log's entries after the replica's zxid, up to until (0: to the end).
func (s *Service) catchUp(ctx context.Context, until int64) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	for until == 0 || s.t.zxid < until {
		next := s.t.zxid + 1
		t, found, err := s.readTxn(ctx, next)
		if errors.Is(err, errCompacted) {
			// This replica lags behind a compaction: the latest snapshot takes it past next.
			if err := s.jump(ctx, next); err != nil {
				return err
			}
			continue
		}
		var bad *badEntry
		if errors.As(err, &bad) {
			// Serving without the entry would diverge from replicas that have it.
			s.broken = fmt.Errorf("%w; refusing to serve", err)
			return s.broken
		}
		if err != nil {
			return err
		}
		if !found {
			if until != 0 {
				return fmt.Errorf("coord: log entry %d is missing", next)
			}
			return nil
		}
		if err := s.applyLocked(t, next); err != nil {
			return err
		}
	}
	return nil
}

// applyLocked applies log entry zxid, the replica's next, with applyMu held.
func (s *Service) applyLocked(t *txn, zxid int64) error {
	s.mu.Lock()
	_, events, _, xerr := exec(s.t, t, zxid)
	if xerr != nil {
		// Validation ran exec on the same state: a logged transaction cannot fail unless the
		// log was written by something else. Serving on would diverge from other replicas.
		s.broken = fmt.Errorf("coord: log entry %d does not apply (%v); refusing to serve", zxid, xerr)
		s.mu.Unlock()
		return s.broken
	}
	s.t.zxid = zxid
	s.fire(events, t)
	s.mu.Unlock()
	if t.Close {
		s.touchMu.Lock()
		delete(s.touched, t.Session)
		s.touchMu.Unlock()
		s.seqMu.Lock()
		delete(s.nextSeq, t.Session)
		s.seqMu.Unlock()
	}
	return nil
}

// applyOwn applies the transaction this Service has just logged at zxid without reading it
// back, unless a catch-up (the tick's) applied it first. It applies the entry as every other
// replica will, decoded from the same encoding, so no replica can differ from the writer's.
func (s *Service) applyOwn(ctx context.Context, zxid int64, t *txn) error {
	enc, err := json.Marshal(t)
	if err != nil {
		return err
	}
	var logged txn
	if err := json.Unmarshal(enc, &logged); err != nil {
		return err
	}
	s.applyMu.Lock()
	if s.broken == nil && s.t.zxid == zxid-1 {
		defer s.applyMu.Unlock()
		return s.applyLocked(&logged, zxid)
	}
	s.applyMu.Unlock()
	return s.catchUp(ctx, zxid)
}

// badEntry is a log entry that cannot be read back, for good: its object is missing or not the
// one it names. No retry helps, so the Service refuses to serve (catchUp).
type badEntry struct{ error }

// blobsID returns the table's id for its objects, choosing it on first use: objects of two tables
// sharing a bucket never mix, and one table's sweep cannot delete the other's.
func (s *Service) blobsID(ctx context.Context) (string, error) {
	k := store.Key{Partition: metaPartition, Sort: "blobs"}
	if a, found, err := s.tbl.Get(ctx, k); err != nil {
		return "", err
	} else if id, ok := a["id"].(string); found && ok {
		return id, nil
	}
	// The first writer of the row wins; a lost reply or a lost race reads the winner's id.
	_, err := s.tbl.Update(ctx, k, store.RowAbsent(), store.Update{store.SetAttr(store.Attr("id"), randomHex(8))})
	a, found, rerr := s.tbl.Get(ctx, k)
	id, ok := a["id"].(string)
	switch {
	case rerr != nil:
		return "", rerr
	case !found || !ok:
		if err == nil {
			err = errors.New("the row did not keep its id")
		}
		return "", fmt.Errorf("coord: choosing the table's object prefix: %w", err)
	}
	return id, nil
}

// objectKey names the object of an append attempt: zxid first, so a sweep reads it from the key.
func (s *Service) objectKey(zxid int64, nonce string) string {
	return fmt.Sprintf("%s%020d-%s", s.objPrefix, zxid, nonce)
}

// readTxn reads log entry zxid, from its object or its parts when it was too large for one row.
func (s *Service) readTxn(ctx context.Context, zxid int64) (*txn, bool, error) {
	a, found, err := s.tbl.Get(ctx, txnKey(zxid))
	if err != nil || !found {
		return nil, found, err
	}
	if compacted, _ := a["compacted"].(bool); compacted {
		return nil, true, errCompacted
	}
	enc, _ := a["t"].([]byte)
	if key, ok := a["obj"].(string); ok {
		if s.blobs == nil {
			return nil, false, &badEntry{fmt.Errorf("coord: log entry %d is in object %s, and this server has no bucket (Config.Blobs, --blobs)", zxid, key)}
		}
		b, err := s.blobs.Get(ctx, key)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, &badEntry{fmt.Errorf("coord: log entry %d: its object %s is missing from the bucket", zxid, key)}
		}
		if err != nil {
			return nil, false, fmt.Errorf("coord: log entry %d: reading object %s: %w", zxid, key, err)
		}
		sum := sha256.Sum256(b)
		if want, _ := a["sha256"].(string); hex.EncodeToString(sum[:]) != want {
			return nil, false, &badEntry{fmt.Errorf("coord: log entry %d: object %s is not the one logged (SHA-256 %x, logged %s)", zxid, key, sum, want)}
		}
		s.markNamed(key)
		enc = b
	} else if blob, ok := a["blob"].(string); ok {
		parts, _ := a["parts"].(int64)
		if enc, err = s.getParts(ctx, blobPartition, blob, parts); err != nil {
			return nil, false, fmt.Errorf("coord: log entry %d: %w", zxid, err)
		}
	}
	var t txn
	if err := json.Unmarshal(enc, &t); err != nil {
		return nil, false, fmt.Errorf("coord: log entry %d: %w", zxid, err)
	}
	return &t, true, nil
}

// rowRoom is how many bytes of a value fit in one row of the table.
func (s *Service) rowRoom() int {
	if lim := s.tbl.Limits().MaxRowBytes; lim > 0 {
		return lim - 4<<10 // keys and attribute names
	}
	return 1 << 30
}

// appendTxn claims zxid for t: true if t is now the log's entry zxid, false if another writer's
// entry is. The conditional create is what orders all writers.
func (s *Service) appendTxn(ctx context.Context, zxid int64, t *txn) (bool, error) {
	enc, err := json.Marshal(t)
	if err != nil {
		return false, err
	}
	upd := store.Update{store.SetAttr(store.Attr("t"), enc)}
	room := s.rowRoom()
	var object, blob string // where a large entry went: an object, or parts of the table
	var parts int64
	if len(enc) > room && s.blobs != nil {
		// The object goes first, so the entry is whole once its row exists; the row names it and
		// its hash, so a reader notices a missing or different object.
		object = s.objectKey(zxid, t.Nonce)
		if err := s.blobs.Put(ctx, object, enc); err != nil {
			return false, err // it may exist: a sweep deletes it once zxid is another entry's
		}
		sum := sha256.Sum256(enc)
		upd = store.Update{store.SetAttr(store.Attr("obj"), object), store.SetAttr(store.Attr("sha256"), hex.EncodeToString(sum[:]))}
	} else if len(enc) > room {
		// The parts go first, under an id of this attempt, so the entry is whole once it exists.
		blob = fmt.Sprintf("%s-%d", t.Nonce, zxid)
		if parts, err = s.putParts(ctx, blobPartition, blob, enc); err != nil {
			return false, err
		}
		upd = store.Update{store.SetAttr(store.Attr("blob"), blob), store.SetAttr(store.Attr("parts"), parts)}
	}
	lost := func() (bool, error) {
		// Certainly not ours: nothing will ever read these parts or this object. (After an
		// ambiguous failure they stay: the entry may yet name them. Such an object costs storage
		// until a sweep; such parts stay.)
		if object != "" {
			// Not deleted now, it is an orphan of a zxid the log has passed: the next sweep's.
			_ = s.blobs.Delete(ctx, object)
		}
		return false, s.deleteParts(ctx, blobPartition, blob, parts)
	}
	r, err := s.tbl.Update(ctx, txnKey(zxid), store.RowAbsent(), upd)
	if err != nil {
		// Ambiguous (a lost reply): the entry tells whose it is.
		got, found, rerr := s.readTxn(ctx, zxid)
		if rerr != nil || !found {
			return false, err
		}
		if got.Nonce != t.Nonce {
			return lost()
		}
		s.markNamed(object)
		return true, nil
	}
	if !r.Applied {
		return lost()
	}
	// The writer applies its entry without reading it back (applyOwn), and the sweep counts an
	// applied entry's object as live only if it is named: before the entry is applied.
	s.markNamed(object)
	return true, nil
}

// markNamed records that a log row names object ("": none), so the sweep keeps it.
func (s *Service) markNamed(object string) {
	if object == "" {
		return
	}
	s.namedMu.Lock()
	s.named[object] = true
	s.namedMu.Unlock()
}

// write validates t against the replica, claims the next zxid for it and applies it.
func (s *Service) write(ctx context.Context, t *txn) ([]Result, int64, int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	t.Nonce = randomHex(12)
	var st WriteStages
	var mark time.Time
	lap := func(d *time.Duration) { // only when timed: OnWrite nil costs a nil check
		if s.cfg.OnWrite != nil {
			now := time.Now()
			*d = now.Sub(mark)
			mark = now
		}
	}
	for {
		st.Attempts++
		if s.cfg.OnWrite != nil {
			mark = time.Now()
		}
		if err := s.catchUp(ctx, 0); err != nil {
			return nil, 0, 0, err
		}
		lap(&st.CatchUp)
		s.mu.RLock()
		zxid := s.t.zxid + 1
		t.Time = time.Now().UnixMilli()
		res, _, failed, xerr := exec(newOverlay(s.t), t, zxid)
		s.mu.RUnlock()
		if xerr != nil {
			return nil, 0, failed, xerr
		}
		lap(&st.Validate)
		won, err := s.appendTxn(ctx, zxid, t)
		if err != nil {
			return nil, 0, 0, err
		}
		lap(&st.Append)
		if !won {
			continue // another writer took zxid: validate again on the state it made
		}
		if err := s.applyOwn(ctx, zxid, t); err != nil {
			return nil, 0, 0, err
		}
		if s.cfg.OnWrite != nil {
			lap(&st.Apply)
			s.cfg.OnWrite(st)
		}
		return res, zxid, 0, nil
	}
}

// Submit decides a session's sequenced request exactly once: request seq (1, 2, ... per
// session) is applied as one all-or-nothing transaction, or its failure is logged, only after
// seq-1 was decided, and a redelivery of a decided request, on any server, returns the outcome
// its first decision recorded without deciding again. So a client, or a queue, that retries a
// request after a lost reply or a crashed writer never applies it twice, and never sees two
// different answers; a request that arrives before its predecessor is refused with
// ErrOutOfOrder. This is the writer of FaaSKeeper's serverless path (docs/coordination.md).
func (s *Service) Submit(ctx context.Context, c Caller, seq int64, id string, ops []Op) (Outcome, error) {
	if c.Session == 0 || seq <= 0 || len(ops) == 0 {
		return Outcome{}, errf(BadArguments, "", "a sequenced request needs a session, a sequence number from 1 and ops")
	}
	if s.cfg.Waker != nil {
		return Outcome{}, errProxy
	}
	t := &txn{Session: c.Session, Auth: c.Auth, Ops: ops, Seq: seq, Request: id}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	t.Nonce = randomHex(12)
	for {
		if err := s.catchUp(ctx, 0); err != nil {
			return Outcome{}, err
		}
		s.mu.RLock()
		sess := s.t.sessions[c.Session]
		switch {
		case sess == nil:
			s.mu.RUnlock()
			return Outcome{}, errf(SessionExpired, "", "session %#x", c.Session)
		case seq <= sess.seq:
			out, kept := sess.outcomes[seq]
			s.mu.RUnlock()
			if !kept {
				return Outcome{}, errf(BadArguments, "", "request %d was decided before the last %d the session keeps", seq, keptOutcomes)
			}
			return out, nil
		case seq > sess.seq+1:
			last := sess.seq
			s.mu.RUnlock()
			return Outcome{}, fmt.Errorf("%w: request %d, last decided %d", ErrOutOfOrder, seq, last)
		}
		zxid := s.t.zxid + 1
		t.Time, t.Ops, t.Failed = time.Now().UnixMilli(), ops, nil
		_, _, failed, xerr := exec(newOverlay(s.t), t, zxid)
		s.mu.RUnlock()
		if xerr != nil {
			// The failure is the decision: logged without the ops, it changes nothing else.
			t.Ops, t.Failed = nil, &Outcome{Failed: failed, Code: xerr.Code, Path: xerr.Path, Message: xerr.Msg, Request: id}
		}
		won, err := s.appendTxn(ctx, zxid, t)
		if err != nil {
			return Outcome{}, err // unknown: submitting seq again answers with its decision
		}
		if !won {
			continue
		}
		if err := s.applyOwn(ctx, zxid, t); err != nil {
			return Outcome{}, err
		}
		s.mu.RLock()
		out := s.t.sessions[c.Session].outcomes[seq]
		s.mu.RUnlock()
		return out, nil
	}
}

// commit applies ops as one transaction: logged by this Service, or, on a proxy, stored as a
// request that a writer decides.
func (s *Service) commit(ctx context.Context, c Caller, ops []Op) ([]Result, int64, int, error) {
	if s.cfg.Waker == nil {
		return s.write(ctx, &txn{Session: c.Session, Auth: c.Auth, Ops: ops})
	}
	out, err := s.propose(ctx, c, ops)
	if err != nil {
		return nil, 0, 0, err
	}
	return out.Results, out.Zxid, out.Failed, out.Err()
}

// Write applies one op as one transaction.
func (s *Service) Write(ctx context.Context, c Caller, op Op) (Result, int64, error) {
	res, zxid, _, err := s.commit(ctx, c, []Op{op})
	if err != nil {
		return Result{}, 0, err
	}
	return res[0], zxid, nil
}

// Multi applies ops as one transaction, all or nothing. When an op fails it returns that op's
// error and a result per op: OK before it, its code, RuntimeInconsistency after it.
func (s *Service) Multi(ctx context.Context, c Caller, ops []Op) ([]Result, int64, error) {
	if len(ops) == 0 {
		// ZooKeeper answers an empty multi with no results and no transaction.
		return nil, s.LastZxid(), nil
	}
	for _, op := range ops {
		switch op.Kind {
		case OpCreate, OpDelete, OpSetData, OpCheck:
		default:
			return nil, 0, errf(BadArguments, op.Path, "operation %d in a multi", op.Kind)
		}
	}
	res, zxid, failed, err := s.commit(ctx, c, ops)
	var e *Error
	if errors.As(err, &e) && e.Code != SessionExpired {
		res = make([]Result, len(ops))
		for i := range res {
			switch {
			case i < failed:
				res[i].Err = OK
			case i == failed:
				res[i].Err = e.Code
			default:
				res[i].Err = RuntimeInconsistency
			}
		}
		return res, s.LastZxid(), err
	}
	return res, zxid, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// View is a consistent read of the replica: no transaction applies while it is in use.
type View struct{ s *Service }

// View runs fn on the replica. A reply fn queues is ordered after every watch event of the
// state it shows and before any event of a later state.
func (s *Service) View(fn func(v View)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(View{s})
}

// Zxid is the last transaction the view shows.
func (v View) Zxid() int64 { return v.s.t.zxid }

func (v View) check(c Caller) error {
	if v.s.broken != nil {
		return v.s.broken
	}
	if c.Session != 0 && v.s.t.sessions[c.Session] == nil {
		return errf(SessionExpired, "", "session %#x", c.Session)
	}
	return nil
}

func (v View) lookup(c Caller, p string, perm int32) (*znode, error) {
	if err := v.check(c); err != nil {
		return nil, err
	}
	if err := validatePath(p, false); err != nil {
		return nil, err
	}
	n := v.s.t.nodes[p]
	if n == nil {
		return nil, errf(NoNode, p, "")
	}
	if perm != 0 && !allowed(n.acl, c.Auth, perm) {
		return nil, errf(NoAuth, p, "")
	}
	return n, nil
}

// Get returns a node's data and Stat; watch sets a data watch when the node exists.
func (v View) Get(c Caller, p string, watch bool) ([]byte, Stat, error) {
	n, err := v.lookup(c, p, PermRead)
	if err != nil {
		return nil, Stat{}, err
	}
	if watch {
		v.watch(dataWatch, c.W, p)
	}
	return n.data, n.fullStat(), nil
}

// Exists returns a node's Stat or NoNode; watch sets a watch either way (NodeCreated fires it
// when the node did not exist).
func (v View) Exists(c Caller, p string, watch bool) (Stat, error) {
	if err := v.check(c); err != nil {
		return Stat{}, err
	}
	if err := validatePath(p, false); err != nil {
		return Stat{}, err
	}
	n := v.s.t.nodes[p]
	// ZooKeeper needs READ on a node that exists, and sets no watch when it is refused.
	if n != nil && !allowed(n.acl, c.Auth, PermRead) {
		return Stat{}, errf(NoAuth, p, "")
	}
	if watch {
		v.watch(dataWatch, c.W, p)
	}
	if n == nil {
		return Stat{}, errf(NoNode, p, "")
	}
	return n.fullStat(), nil
}

// Children returns a node's children, sorted, and its Stat; watch sets a child watch when the
// node exists.
func (v View) Children(c Caller, p string, watch bool) ([]string, Stat, error) {
	n, err := v.lookup(c, p, PermRead)
	if err != nil {
		return nil, Stat{}, err
	}
	if watch {
		v.watch(childWatch, c.W, p)
	}
	out := make([]string, 0, len(n.children))
	for k := range n.children {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, n.fullStat(), nil
}

// ACL returns a node's ACL and Stat; it needs READ or ADMIN, as ZooKeeper 3.9's getACL does.
func (v View) ACL(c Caller, p string) ([]ACL, Stat, error) {
	n, err := v.lookup(c, p, 0)
	if err != nil {
		return nil, Stat{}, err
	}
	if !allowed(n.acl, c.Auth, PermRead) && !allowed(n.acl, c.Auth, PermAdmin) {
		return nil, Stat{}, errf(NoAuth, p, "")
	}
	return append([]ACL(nil), n.acl...), n.fullStat(), nil
}

// Ephemerals lists the caller's session's ephemeral nodes under prefix, sorted.
func (v View) Ephemerals(c Caller, prefix string) ([]string, error) {
	if err := v.check(c); err != nil {
		return nil, err
	}
	var out []string
	if sess := v.s.t.sessions[c.Session]; sess != nil {
		for p := range sess.ephemerals {
			if strings.HasPrefix(p, prefix) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Descendants counts the nodes under p (ZooKeeper's getAllChildrenNumber); it needs READ on p.
func (v View) Descendants(c Caller, p string) (int, error) {
	n, err := v.lookup(c, p, PermRead)
	if err != nil {
		return 0, err
	}
	count := 0
	var walk func(p string, n *znode)
	walk = func(p string, n *znode) {
		for k := range n.children {
			cp := strings.TrimSuffix(p, "/") + "/" + k
			count++
			walk(cp, v.s.t.nodes[cp])
		}
	}
	walk(p, n)
	return count, nil
}

// Attach binds a connection to a live session (verifying its password, and that the client has
// not seen later state than this replica), replacing any earlier connection of the session.
// notify receives the session's watch events; closed is called when the session ends or another
// connection attaches. It returns the session's timeout.
func (s *Service) Attach(ctx context.Context, id int64, passwd []byte, lastZxidSeen int64, notify func(Event), closed func()) (*Watcher, time.Duration, error) {
	if err := s.catchUp(ctx, 0); err != nil {
		return nil, 0, err
	}
	s.mu.RLock()
	sess := s.t.sessions[id]
	zxid := s.t.zxid
	s.mu.RUnlock()
	if sess == nil || !bytes.Equal(sess.passwd, passwd) {
		return nil, 0, errf(SessionExpired, "", "session %#x", id)
	}
	if lastZxidSeen > zxid {
		return nil, 0, fmt.Errorf("%w: client at zxid %d, server at %d", ErrClientAhead, lastZxidSeen, zxid)
	}
	if s.cfg.Waker != nil {
		if err := s.settle(ctx, id); err != nil {
			return nil, 0, err
		}
	}
	if err := s.Touch(ctx, id); err != nil {
		return nil, 0, err
	}
	w := newWatcher(id, notify, closed)
	s.watchMu.Lock()
	old := s.attached[id]
	if old != nil {
		s.detachLocked(old)
	}
	s.attached[id] = w
	s.watchMu.Unlock()
	if old != nil {
		old.closed()
	}
	return w, time.Duration(sess.timeoutMs) * time.Millisecond, nil
}

func sessionKey(id int64) store.Key {
	return store.Key{Partition: sessionPartition, Sort: fmt.Sprintf("%016x", uint64(id))}
}

// Negotiate clamps a requested session timeout into the configured bounds.
func (s *Service) Negotiate(requested time.Duration) time.Duration {
	return min(max(requested, s.cfg.MinSessionTimeout), s.cfg.MaxSessionTimeout)
}

// OpenSession starts a session with a negotiated timeout: its heartbeat row first, then its
// open transaction (a row left by a crash in between expires like any other).
func (s *Service) OpenSession(ctx context.Context, requested time.Duration) (int64, []byte, time.Duration, error) {
	timeout := s.Negotiate(requested)
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return 0, nil, 0, err
	}
	id := int64(binary.BigEndian.Uint64(idb[:]) &^ (1 << 63))
	if id == 0 {
		id = 1
	}
	passwd := make([]byte, 16)
	if _, err := rand.Read(passwd); err != nil {
		return 0, nil, 0, err
	}
	now := time.Now()
	r, err := s.tbl.Update(ctx, sessionKey(id), store.RowAbsent(), store.Update{
		store.SetAttr(store.Attr("hb"), now.UnixMilli()),
		store.SetAttr(store.Attr("to"), timeout.Milliseconds()),
	})
	if err != nil {
		return 0, nil, 0, err
	}
	if !r.Applied {
		return 0, nil, 0, fmt.Errorf("coord: session id %#x is taken", id)
	}
	if s.cfg.Waker != nil {
		r, err := s.tbl.Update(ctx, store.Key{Partition: requestPartition(id), Sort: openRequest}, store.RowAbsent(), store.Update{
			store.SetAttr(store.Attr("p"), passwd), store.SetAttr(store.Attr("t"), timeout.Milliseconds())})
		if err == nil && !r.Applied {
			err = fmt.Errorf("coord: session id %#x is taken", id)
		}
		if err == nil {
			err = s.cfg.Waker.Wake(ctx, id)
		}
		if err == nil {
			err = s.awaitSession(ctx, id, true)
		}
		if err != nil {
			return 0, nil, 0, err // the session expires unused if it was opened after all
		}
	} else {
		t := &txn{Session: id, Open: &openTxn{Passwd: passwd, TimeoutMs: int32(timeout.Milliseconds())}}
		if _, _, _, err := s.write(ctx, t); err != nil {
			return 0, nil, 0, err
		}
	}
	s.touchMu.Lock()
	s.touched[id] = now
	s.touchMu.Unlock()
	return id, passwd, timeout, nil
}

// Touch records that the session's client is alive. It refreshes the heartbeat row at most every
// quarter timeout, and fails with SessionExpired once an expirer has fenced the session.
func (s *Service) Touch(ctx context.Context, id int64) error {
	s.mu.RLock()
	sess := s.t.sessions[id]
	s.mu.RUnlock()
	if sess == nil {
		return errf(SessionExpired, "", "session %#x", id)
	}
	now := time.Now()
	s.touchMu.Lock()
	last, ok := s.touched[id]
	s.touchMu.Unlock()
	if ok && now.Sub(last) < time.Duration(sess.timeoutMs)*time.Millisecond/4 {
		return nil
	}
	r, err := s.tbl.Update(ctx, sessionKey(id), store.And(store.RowExists(), store.NotExists(store.Attr("dead"))),
		store.Update{store.SetAttr(store.Attr("hb"), now.UnixMilli())})
	if err != nil {
		return err
	}
	if !r.Applied {
		return errf(SessionExpired, "", "session %#x", id)
	}
	s.touchMu.Lock()
	s.touched[id] = now
	s.touchMu.Unlock()
	return nil
}

// CloseSession ends a session: fence it, log its close (which removes its ephemerals), drop its
// heartbeat row.
func (s *Service) CloseSession(ctx context.Context, id int64) error {
	if _, err := s.tbl.Update(ctx, sessionKey(id), store.RowExists(), store.Update{store.SetAttr(store.Attr("dead"), true)}); err != nil {
		return err
	}
	if s.cfg.Waker != nil {
		if err := s.cfg.Waker.Wake(ctx, id); err != nil {
			return err
		}
		return s.awaitSession(ctx, id, false)
	}
	return s.finishClose(ctx, id)
}

// finishClose logs a fenced session's close unless the log already has it, then drops its
// stored requests and its row. A proxy wakes a writer to do it.
func (s *Service) finishClose(ctx context.Context, id int64) error {
	if s.cfg.Waker != nil {
		return s.cfg.Waker.Wake(ctx, id)
	}
	_, _, _, err := s.write(ctx, &txn{Session: id, Close: true})
	if err != nil && CodeOf(err) != SessionExpired {
		return err
	}
	if err := s.dropRequests(ctx, id); err != nil {
		return err
	}
	_, err = s.tbl.Delete(ctx, sessionKey(id), store.Always())
	return err
}

// expire fences and closes every session whose heartbeat is older than its timeout, finishes
// closes a crashed closer left fenced, and closes sessions the log has open without a heartbeat
// row (opened after their close by a writer paused across their whole life).
func (s *Service) expire(ctx context.Context) error {
	s.mu.RLock()
	orphans := make(map[int64]bool, len(s.t.sessions))
	for id := range s.t.sessions {
		orphans[id] = true // unless the scan below finds its row: rows are written before opens
	}
	s.mu.RUnlock()
	rows, err := s.tbl.Scan(ctx, sessionPartition, store.ScanOptions{})
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for _, row := range rows {
		u, err := strconv.ParseUint(row.Key.Sort, 16, 64)
		if err != nil {
			continue // not a session row
		}
		id := int64(u)
		delete(orphans, id)
		if dead, _ := row.Attrs["dead"].(bool); dead {
			if err := s.finishClose(ctx, id); err != nil {
				return err
			}
			continue
		}
		hb, _ := row.Attrs["hb"].(int64)
		to, _ := row.Attrs["to"].(int64)
		if now-hb <= to {
			continue
		}
		r, err := s.tbl.Update(ctx, row.Key, store.And(store.Equal(store.Attr("hb"), hb), store.NotExists(store.Attr("dead"))),
			store.Update{store.SetAttr(store.Attr("dead"), true)})
		if err != nil {
			return err
		}
		if r.Applied {
			if err := s.finishClose(ctx, id); err != nil {
				return err
			}
		}
	}
	for id := range orphans {
		if err := s.finishClose(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// objectZxid reads the zxid an object's key was written for.
func objectZxid(prefix, key string) (int64, bool) {
	zs, _, ok := strings.Cut(strings.TrimPrefix(key, prefix), "-")
	zxid, err := strconv.ParseInt(zs, 10, 64)
	return zxid, ok && err == nil
}

// sweep deletes this table's objects that no log row names and none ever will: an object's key
// holds the zxid its append tried, and once the replica has applied entry zxid (the log is
// immutable) an object the entry does not name can never be named. Objects of zxids beyond the
// replica stay: their append may still be under way. It returns how many it deleted.
func (s *Service) sweep(ctx context.Context) (int, error) {
	s.mu.RLock()
	base, last := s.base, s.t.zxid
	s.mu.RUnlock()
	// Every entry after base up to last was read (so its object named) before the replica
	// reached it. Objects up to base are compaction's (Compact).
	var dead []string
	err := s.blobs.List(ctx, s.objPrefix, func(key string) error {
		zxid, ok := objectZxid(s.objPrefix, key)
		if !ok || zxid <= base || zxid > last {
			return nil
		}
		s.namedMu.Lock()
		named := s.named[key]
		s.namedMu.Unlock()
		if !named {
			dead = append(dead, key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, key := range dead {
		if err := s.blobs.Delete(ctx, key); err != nil {
			return i, err
		}
	}
	return len(dead), nil
}

// Check answers a standalone check op: the node exists, is readable and has version (-1: any).
func (v View) Check(c Caller, p string, version int32) error {
	n, err := v.lookup(c, p, PermRead)
	if err != nil {
		return err
	}
	if version != -1 && version != n.stat.Version {
		return errf(BadVersion, p, "version %d, expected %d", n.stat.Version, version)
	}
	return nil
}
