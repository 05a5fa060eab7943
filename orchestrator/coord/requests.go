package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// The serverless write path (docs/coordination.md, "The serverless path"). A proxy, a Service
// with a Waker, never appends to the log: it stores each write of a session as a request row,
// numbered by the session's sequence, wakes a writer (a queue message naming the session), and
// learns the decision from the log it tails. A writer, a Service without one, decides a
// session's stored requests in order through Submit (Decide), so a wake-up that is lost,
// repeated, reordered or late changes nothing: the next one decides whatever is stored, and a
// decided request is never decided again. ACLs are checked by the writer, against the ids the
// proxy authenticated.

// Waker wakes a writer for a session that has requests to decide: one queue message, whose
// consumer calls Service.Decide(session). It may be lost or delivered many times.
type Waker interface {
	Wake(ctx context.Context, session int64) error
}

// errProxy: a proxy does not append to the log; its writes are decided by a writer.
var errProxy = errors.New("coord: this Service is a proxy (Config.Waker): writers decide its requests")

const (
	requestPrefix = "zk/req/"    // + the session's hex id: one row per stored request
	requestParts  = "zk/reqpart" // a request too large for one row, in parts
	openRequest   = "open"       // the sort key of a session's open request
	// A proxy waiting for a decision reads the log's tail first after about the time recent
	// decisions took (awaitGuess, learned: a fraction of a millisecond with a local queue, tens
	// of milliseconds with a cloud's), then at a tenth of it, doubling up to awaitLongestPoll:
	// few reads per write on any queue, and little added latency.
	awaitFirstGuess  = 2 * time.Millisecond
	awaitShortest    = 50 * time.Microsecond
	awaitLongestPoll = 100 * time.Millisecond
)

// awaitGuess is a running estimate of how long decisions take to appear. A decision found at
// the first read only says it took less than that wait (which a timer overshoots), so the guess
// shrinks by a quarter; one found later moves it an eighth of the way to the time it took.
type awaitGuess struct{ ns atomic.Int64 }

func (g *awaitGuess) get() time.Duration {
	if d := time.Duration(g.ns.Load()); d > 0 {
		return d
	}
	return awaitFirstGuess
}

func (g *awaitGuess) observe(d time.Duration, firstRead bool) {
	old := g.get()
	if firstRead {
		g.ns.Store(int64(max(old-old/4, awaitShortest)))
		return
	}
	g.ns.Store(int64(old - old/8 + d/8))
}

func requestPartition(session int64) string {
	return fmt.Sprintf("%s%016x", requestPrefix, uint64(session))
}

// requestPartsName names the parts of a request too large for one row: its session, its number
// and its id, so a proxy that lost the number to another request never shares its parts.
func requestPartsName(session, seq int64, id string) string {
	return fmt.Sprintf("%016x/%d/%s", uint64(session), seq, id)
}

func requestKey(session, seq int64) store.Key {
	return store.Key{Partition: requestPartition(session), Sort: fmt.Sprintf("%020d", seq)}
}

// request is a stored write request.
type request struct {
	ID   string `json:"id"`
	Auth []ID   `json:"a,omitempty"`
	Ops  []Op   `json:"o"`
}

// propose stores ops as the session's next request, wakes a writer and waits for the decision.
// The outcome is unknown when it fails with anything but an *Error (a store or queue failure, a
// writer that does not decide in time): the request may still be decided later, as ZooKeeper's
// requests may after a lost connection.
func (s *Service) propose(ctx context.Context, c Caller, ops []Op) (Outcome, error) {
	if c.Session == 0 {
		return Outcome{}, errf(BadArguments, "", "a proxy's writes need a session")
	}
	id := randomHex(12)
	enc, err := json.Marshal(request{ID: id, Auth: c.Auth, Ops: ops})
	if err != nil {
		return Outcome{}, err
	}
	var st ProposeStages
	for {
		st.Attempts++
		mark := time.Now()
		seq, err := s.storeRequest(ctx, c.Session, enc, id)
		if err != nil {
			return Outcome{}, err
		}
		st.Store, mark = time.Since(mark), time.Now()
		if err := s.cfg.Waker.Wake(ctx, c.Session); err != nil {
			return Outcome{}, fmt.Errorf("coord: waking a writer for request %d of session %#x: %w", seq, c.Session, err)
		}
		st.Wake, mark = time.Since(mark), time.Now()
		out, err := s.await(ctx, c.Session, seq)
		if err != nil {
			return Outcome{}, err
		}
		st.Await = time.Since(mark)
		if out.Request == id {
			if s.cfg.OnPropose != nil {
				s.cfg.OnPropose(st)
			}
			return out, nil
		}
		// Another request of the session took this number (this proxy's view of the session
		// was stale): this one is not decided and never will be under that number. Store it
		// again under the next.
	}
}

// storeRequest writes enc as the session's next request and returns its number: one past both
// the last decided and the last stored, claimed with a conditional create so that two proxies
// of one session never share a number.
func (s *Service) storeRequest(ctx context.Context, session int64, enc []byte, id string) (int64, error) {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	forget := func() {
		s.seqMu.Lock()
		delete(s.nextSeq, session)
		s.seqMu.Unlock()
	}
	for {
		s.seqMu.Lock()
		seq, ok := s.nextSeq[session]
		s.seqMu.Unlock()
		if !ok {
			if err := s.catchUp(ctx, 0); err != nil {
				return 0, err
			}
			s.mu.RLock()
			sess := s.t.sessions[session]
			s.mu.RUnlock()
			if sess == nil {
				return 0, errf(SessionExpired, "", "session %#x", session)
			}
			last, err := s.lastStored(ctx, session)
			if err != nil {
				return 0, err
			}
			seq = max(sess.seq, last) + 1
		}
		row := store.Update{store.SetAttr(store.Attr("id"), id), store.SetAttr(store.Attr("b"), enc)}
		var parts int64
		if len(enc) > s.rowRoom() {
			n, err := s.putParts(ctx, requestParts, requestPartsName(session, seq, id), enc)
			if err != nil {
				forget()
				return 0, err
			}
			parts, row = n, store.Update{store.SetAttr(store.Attr("id"), id), store.SetAttr(store.Attr("n"), n)}
		}
		r, err := s.tbl.Update(ctx, requestKey(session, seq), store.RowAbsent(), row)
		if err != nil {
			forget() // stored or not: count again next time
			return 0, err
		}
		if !r.Applied {
			// Another request has the number: these parts are nobody's (their name has this
			// request's id, so no row can name them).
			forget()
			if err := s.deleteParts(ctx, requestParts, requestPartsName(session, seq, id), parts); err != nil {
				return 0, err
			}
			continue
		}
		s.seqMu.Lock()
		s.nextSeq[session] = seq + 1
		s.seqMu.Unlock()
		return seq, nil
	}
}

// settle has a proxy's re-attaching session's stored requests decided before it is served: a
// request whose proxy died before waking a writer, or before the decision, would otherwise wait
// for the session's next wake-up and apply after the client, reconnected, had read the state
// without it. So every request a client sent before it reconnected is decided first, in order,
// as ZooKeeper's pipeline processes a session's requests.
func (s *Service) settle(ctx context.Context, session int64) error {
	last, err := s.lastStored(ctx, session)
	if err != nil {
		return err
	}
	s.mu.RLock()
	sess := s.t.sessions[session]
	s.mu.RUnlock()
	if sess == nil || last <= sess.seq {
		return nil
	}
	if err := s.cfg.Waker.Wake(ctx, session); err != nil {
		return err
	}
	return s.awaitLog(ctx, fmt.Sprintf("request %d of session %#x (stored before it reconnected)", last, session), func() (bool, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		sess := s.t.sessions[session]
		if sess == nil {
			return false, errf(SessionExpired, "", "session %#x", session)
		}
		return sess.seq >= last, nil
	})
}

// lastStored is the highest request number stored for the session (0: none): the last row
// but for the open request, which sorts after every number.
func (s *Service) lastStored(ctx context.Context, session int64) (int64, error) {
	rows, err := s.tbl.Scan(ctx, requestPartition(session), store.ScanOptions{Projection: []store.Path{store.Attr("n")}, Reverse: true, Limit: 2})
	if err != nil {
		return 0, err
	}
	var last int64
	for _, r := range rows {
		if seq, err := strconv.ParseInt(r.Key.Sort, 10, 64); err == nil {
			last = max(last, seq)
		}
	}
	return last, nil
}

// await tails the log until the session's request seq is decided and returns its outcome.
func (s *Service) await(ctx context.Context, session, seq int64) (Outcome, error) {
	var out Outcome
	err := s.awaitLog(ctx, fmt.Sprintf("request %d of session %#x", seq, session), func() (bool, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		sess := s.t.sessions[session]
		switch {
		case sess == nil:
			return false, errf(SessionExpired, "", "session %#x", session)
		case sess.seq < seq:
			return false, nil
		}
		var kept bool
		if out, kept = sess.outcomes[seq]; !kept {
			return false, fmt.Errorf("coord: request %d of session %#x was decided before the last %d the session keeps", seq, session, keptOutcomes)
		}
		return true, nil
	})
	return out, err
}

// awaitSession tails the log until the session is open (want true) or closed (want false).
func (s *Service) awaitSession(ctx context.Context, session int64, want bool) error {
	what := fmt.Sprintf("the %s of session %#x", map[bool]string{true: "open", false: "close"}[want], session)
	return s.awaitLog(ctx, what, func() (bool, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return (s.t.sessions[session] != nil) == want, nil
	})
}

// awaitLog reads the log's tail on the learned schedule (awaitGuess) until decided says the
// awaited decision is in the replica, or fails, or DecideTimeout passes.
func (s *Service) awaitLog(ctx context.Context, what string, decided func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DecideTimeout)
	defer cancel()
	start, guess := time.Now(), s.awaitGuess.get()
	wait, poll := max(guess*4/5, awaitShortest), max(guess/10, awaitShortest)
	for reads := 1; ; reads++ {
		select {
		case <-ctx.Done():
			return fmt.Errorf("coord: %s not decided within %v (is a writer consuming the queue?): %w", what, s.cfg.DecideTimeout, ctx.Err())
		case <-time.After(wait):
		}
		wait, poll = poll, min(2*poll, awaitLongestPoll)
		if err := s.catchUp(ctx, 0); err != nil {
			return err
		}
		done, err := decided()
		if done {
			s.awaitGuess.observe(time.Since(start), reads == 1)
		}
		if done || err != nil {
			return err
		}
	}
}

// Decide is the writer: it decides the session's stored requests in order, each once (its
// open, then requests 1, 2, ...), closes it if it was fenced (closed, or expired), and deletes
// what it decided. Any number of writers may run it for one session at once, after any delay.
func (s *Service) Decide(ctx context.Context, session int64) error {
	if s.cfg.Waker != nil {
		return errProxy
	}
	rows, err := s.tbl.Scan(ctx, requestPartition(session), store.ScanOptions{})
	if err != nil {
		return err
	}
	s.mu.RLock()
	open := s.t.sessions[session] != nil
	s.mu.RUnlock()
	if open && slices.ContainsFunc(rows, func(r store.Row) bool { return r.Key.Sort != openRequest }) {
		// The common wake-up: requests of a session this replica knows open. Submit reads the
		// log's tail itself and tells a session closed since; a fenced session's close is the
		// expirer's, which wakes a writer again while the fence stands.
		return s.decideStored(ctx, session, rows)
	}
	if err := s.catchUp(ctx, 0); err != nil {
		return err
	}
	alive, err := s.alive(ctx, session)
	if err != nil {
		return err
	}
	s.mu.RLock()
	open = s.t.sessions[session] != nil
	s.mu.RUnlock()
	switch {
	case open && !alive:
		// Fenced by a close or an expirer, or open without a heartbeat row (an open decided
		// after the session's close by a writer paused across its whole life): close it.
		return s.finishClose(ctx, session)
	case !open && !alive:
		return s.dropRequests(ctx, session) // closed, or never opened
	case !open:
		i := slices.IndexFunc(rows, func(r store.Row) bool { return r.Key.Sort == openRequest })
		if i < 0 {
			return nil // its proxy writes the heartbeat row, then the open request
		}
		a := rows[i].Attrs
		passwd, _ := a["p"].([]byte)
		to, _ := a["t"].(int64)
		_, _, _, err = s.write(ctx, &txn{Session: session, Open: &openTxn{Passwd: passwd, TimeoutMs: int32(to)}})
		var exists *Error
		if err != nil && !errors.As(err, &exists) { // not "session exists": another writer opened it
			return err
		}
	}
	return s.decideStored(ctx, session, rows)
}

// decideStored decides the stored requests rows of an open session, in number order.
func (s *Service) decideStored(ctx context.Context, session int64, rows []store.Row) error {
	for _, row := range rows {
		seq, err := strconv.ParseInt(row.Key.Sort, 10, 64)
		if err != nil {
			continue // the open request
		}
		req, err := s.decodeRequest(ctx, session, seq, row.Attrs)
		if err != nil {
			return err
		}
		_, err = s.Submit(ctx, Caller{Session: session, Auth: req.Auth}, seq, req.ID, req.Ops)
		switch {
		case CodeOf(err) == SessionExpired:
			return s.dropRequests(ctx, session)
		case errors.Is(err, ErrOutOfOrder):
			// A gap: a proxy stores a session's requests in order, so its predecessor's row is
			// being written, and that request's own wake-up decides both.
			return nil
		case CodeOf(err) == BadArguments:
			// No ops, or decided before the outcomes the session keeps: never decided again.
		case err != nil:
			return err
		}
		if err := s.deleteRequest(ctx, session, seq, row.Attrs); err != nil {
			return err
		}
	}
	return nil
}

// alive tells whether a session's heartbeat row exists and is not fenced by a close or an
// expirer.
func (s *Service) alive(ctx context.Context, session int64) (bool, error) {
	a, ok, err := s.tbl.Get(ctx, sessionKey(session))
	if err != nil || !ok {
		return false, err
	}
	dead, _ := a["dead"].(bool)
	return !dead, nil
}

func (s *Service) decodeRequest(ctx context.Context, session, seq int64, a store.Attrs) (request, error) {
	enc, _ := a["b"].([]byte)
	if n, ok := a["n"].(int64); ok {
		id, _ := a["id"].(string)
		var err error
		if enc, err = s.getParts(ctx, requestParts, requestPartsName(session, seq, id), n); err != nil {
			return request{}, fmt.Errorf("coord: request %d of session %#x: %w", seq, session, err)
		}
	}
	var req request
	if err := json.Unmarshal(enc, &req); err != nil || req.ID == "" {
		return request{}, fmt.Errorf("coord: request %d of session %#x is malformed: %v", seq, session, err)
	}
	return req, nil
}

// deleteRequest deletes the decided request a (a row as a scan read it) and its parts. The row
// goes only if it still holds that request: once another writer deleted it, a proxy with a stale
// view may have stored a new request under the number, which is not this one's to delete.
func (s *Service) deleteRequest(ctx context.Context, session, seq int64, a store.Attrs) error {
	id, _ := a["id"].(string)
	if _, err := s.tbl.Delete(ctx, requestKey(session, seq), store.Equal(store.Attr("id"), id)); err != nil {
		return err
	}
	if n, ok := a["n"].(int64); ok {
		return s.deleteParts(ctx, requestParts, requestPartsName(session, seq, id), n)
	}
	return nil
}

// dropRequests deletes every stored request of a session that is closed.
func (s *Service) dropRequests(ctx context.Context, session int64) error {
	rows, err := s.tbl.Scan(ctx, requestPartition(session), store.ScanOptions{})
	if err != nil {
		return err
	}
	for _, row := range rows {
		if seq, err := strconv.ParseInt(row.Key.Sort, 10, 64); err == nil {
			if err := s.deleteRequest(ctx, session, seq, row.Attrs); err != nil {
				return err
			}
		} else if _, err := s.tbl.Delete(ctx, row.Key, store.Always()); err != nil {
			return err
		}
	}
	return nil
}
