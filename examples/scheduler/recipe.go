package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The election and the lock are one recipe, ZooKeeper's own ("Recipes and Solutions" in the
// ZooKeeper documentation): each contender creates an EPHEMERAL_SEQUENTIAL znode in a
// directory; the one whose znode has the lowest sequence number holds the role; every other
// contender watches only the znode just before its own (exists with a watch), and looks again
// when that one goes. A release, a crash or an expired session deletes one znode and wakes
// one contender, never all of them (no herd effect), and the role passes in the order the
// contenders arrived.
//
// Two details make it survive connection loss:
//
//   - The znode's name begins with the contender's id and a random guid, and the contender
//     looks for it among the children before creating one: a create whose reply was lost with
//     the connection may have happened, and a second znode would queue the contender behind
//     itself (ZooKeeper's "protected" create; Curator does the same).
//   - The hold ends when the session can no longer be trusted (Session.Lost) or the znode is
//     deleted, whichever the client sees first.
//
// The fencing token of a hold is the znode's czxid, the zxid of the transaction that created
// it. Sequence numbers in one directory follow the order of creation, so do czxids: a holder
// that got the role after another has a znode created after the other's (it was queued behind
// it, or arrived after it was the lowest), hence a larger token. Tokens of one directory are
// therefore increasing in the order the role was held, on ZooKeeper and on ssfkit's endpoint
// alike.

// hold is a held role: the contender's znode, its token, and the end of the hold.
type hold struct {
	s     *Session
	node  string
	token int64
	lost  chan struct{}
	// session is the session's Lost when the hold began: closed at once when the session is
	// lost or closed, while lost follows it as soon as the watching goroutine runs.
	session <-chan struct{}
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// Token is the hold's fencing token: its znode's czxid.
func (h *hold) Token() int64 { return h.token }

// Node is the hold's znode.
func (h *hold) Node() string { return h.node }

// Lost is closed when the hold ends: the session was lost or closed, the znode was deleted, or
// the holder released it. A holder stops acting on the role when it is closed.
func (h *hold) Lost() <-chan struct{} { return h.lost }

// releaseWait bounds how long release waits for the znode's delete: a client without a
// connection queues the request until it reconnects. The delete still happens then, or the
// session's end removes the znode.
const releaseWait = 2 * time.Second

// release ends the hold and deletes the znode (gone already if the session expired).
func (h *hold) release() error {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
	done := make(chan error, 1)
	go func() { done <- h.s.Conn.Delete(h.node, -1) }()
	select {
	case err := <-done:
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
		return err
	case <-time.After(releaseWait):
		return fmt.Errorf("deleting %s: no answer within %v (no connection?); it goes when it is answered or the session ends", h.node, releaseWait)
	}
}

// watch closes lost when the session is lost, the znode deleted or the hold released.
func (h *hold) watch() {
	defer h.wg.Done()
	defer close(h.lost)
	for {
		ok, _, ch, err := h.s.Conn.ExistsW(h.node)
		if err != nil || !ok {
			return
		}
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
				return
			}
		case <-h.session:
			return
		case <-h.stop:
			return
		}
	}
}

// contend queues for the role of directory dir and returns when it holds it, or ctx ends. Its
// znode's name begins with prefix, which no other contender uses; a znode with that prefix
// already in the queue (created by an earlier contend of the same session) is taken as its own.
// data is stored in the znode (who the contender is, for observers).
func contend(ctx context.Context, s *Session, dir, prefix string, data []byte) (*hold, error) {
	mine := "" // our znode's name, once created
	giveUp := func(err error) (*hold, error) {
		if mine != "" {
			_ = s.Conn.Delete(path.Join(dir, mine), -1) // best effort; the session's end removes it anyway
		}
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-s.Up():
		}
		lost := s.Lost()
		children, _, err := s.Conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			err = makeDirs(s.Conn, dir)
			if err == nil {
				continue
			}
		}
		if err != nil {
			if transient(err, lost) {
				pauseFor(ctx, 10*time.Millisecond) // the connection went: wait for it to come back
				continue
			}
			return giveUp(err)
		}
		queue := sequenced(children)
		at := -1
		for i, c := range queue {
			if strings.HasPrefix(c, prefix) {
				at, mine = i, c
			}
		}
		if at < 0 {
			// Not (or no longer: our session expired) in the queue: join it.
			mine = ""
			created, err := s.Conn.Create(path.Join(dir, prefix+"n-"), data, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			if err != nil && !transient(err, lost) {
				return giveUp(err)
			}
			if err == nil {
				mine = path.Base(created)
			}
			continue // look again: the create may have happened even if its reply was lost
		}
		if at == 0 {
			h := &hold{s: s, node: path.Join(dir, mine), lost: make(chan struct{}), session: lost, stop: make(chan struct{})}
			ok, st, err := s.Conn.Exists(h.node)
			if err != nil || !ok {
				continue
			}
			h.token = st.Czxid
			h.wg.Add(1)
			go h.watch()
			return h, nil
		}
		// Watch only the predecessor: when it goes, we may be first (or it was not the
		// first, and we watch the next one before us).
		ok, _, ch, err := s.Conn.ExistsW(path.Join(dir, queue[at-1]))
		if err != nil || !ok {
			continue
		}
		select {
		case <-ch:
		case <-lost:
		case <-ctx.Done():
			return giveUp(ctx.Err())
		}
	}
}

// newPrefix is a fresh znode name prefix for contender id: the id (for people reading the
// tree) and a random guid.
func newPrefix(id string) (string, error) {
	if strings.Contains(id, "/") || id == "" {
		return "", fmt.Errorf("contender id %q: not empty, no '/'", id)
	}
	g := make([]byte, 16)
	_, _ = rand.Read(g)
	return id + "_" + hex.EncodeToString(g) + "-", nil
}

// transient reports whether err comes from a lost connection or session (the recipe waits
// for a session and looks again) rather than from the request.
func transient(err error, lost <-chan struct{}) bool {
	return isClosed(lost) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNoServer)
}

func pauseFor(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sequenced sorts znode names by their 10-digit sequence suffix.
func sequenced(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if len(n) > 10 {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][len(out[i])-10:] < out[j][len(out[j])-10:] })
	return out
}

// makeDirs creates dir and its missing parents as persistent znodes.
func makeDirs(c *zk.Conn, dir string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// holder returns the data of the znode that holds dir's role, or "" if none.
func holder(s *Session, dir string) (string, error) {
	children, _, err := s.Conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	for _, c := range sequenced(children) {
		data, _, err := s.Conn.Get(path.Join(dir, c))
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since: the next one holds it
		}
		return string(data), err
	}
	return "", err
}
