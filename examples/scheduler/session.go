package scheduler

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Session is one process's ZooKeeper session, shared by its recipes (an election, locks), with
// the one thing the recipes need from the connection's state: a channel closed when the session
// can no longer be trusted.
//
// A recipe's guarantee (this worker is the only leader, this worker holds the lock) lasts only
// as long as the session that created its ephemeral znode. Two events end that trust:
//
//   - Expired: the server ended the session and deleted its ephemerals, so another worker may
//     already be leader. go-zookeeper then opens a new session by itself; nothing from the old
//     one survives.
//   - Disconnected: the connection is gone and the client cannot know whether the session
//     is still alive on the server (it may expire there before the client hears of it). Like
//     Curator's default policy, Session treats this as a loss too: the holder stops acting, and
//     campaigns again once reconnected (finding its znode again if the session survived, so it
//     keeps its place and its token).
//
// Lost returns the channel of the current connection; after a loss, a new one is made when the
// client has a session again. Even a holder that checks Lost before every action can act late
// (it was paused between the check and the action, or the loss had not reached it yet); that is
// what fencing tokens are for (see Token and the jobs SSF).
type Session struct {
	Conn *zk.Conn

	mu         sync.Mutex
	lost       chan struct{} // open while the client has a session it trusts
	up         chan struct{} // closed when the client next has a session
	closed     bool
	reconnect  bool              // the client had a session before: the next is a reconnection
	gen        uint64            // counts session events, so a delayed open (see event) is not a stale one
	candidates map[string]string // election directory + "\x00" + id -> znode name prefix
}

// candidacy returns the znode name prefix of candidate id in the election in dir: the same
// for every campaign on this Session, so a candidate finds its znode again.
func (s *Session) candidacy(dir, id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := dir + "\x00" + id
	if p, ok := s.candidates[k]; ok {
		return p, nil
	}
	p, err := newPrefix(id)
	if err != nil {
		return "", err
	}
	if s.candidates == nil {
		s.candidates = map[string]string{}
	}
	s.candidates[k] = p
	return p, nil
}

// Dial connects to servers (host:port, comma-separated lists allowed) with the given session
// timeout, and waits up to wait for the first session. dialer, if not nil, replaces
// net.DialTimeout (the tests put a proxy in between). The client's log is discarded.
func Dial(servers []string, timeout, wait time.Duration, dialer zk.Dialer) (*Session, error) {
	s := &Session{lost: closed(), up: make(chan struct{})}
	// The callback, unlike the event channel (which drops events when full), sees every event.
	conn, _, err := zk.Connect(servers, timeout, zk.WithLogger(quiet{}), zk.WithEventCallback(s.event),
		zk.WithDialer(orDefault(dialer)))
	if err != nil {
		return nil, err
	}
	s.Conn = conn
	select {
	case <-s.Up():
		return s, nil
	case <-time.After(wait):
		conn.Close()
		return nil, fmt.Errorf("no ZooKeeper session with %v within %v", servers, wait)
	}
}

// event runs on the client's goroutine for every session event; it never blocks.
func (s *Session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		if s.closed || !isClosed(s.lost) {
			return
		}
		s.gen++
		if !s.reconnect {
			s.reconnect = true
			s.openLocked()
			return
		}
		// go-zookeeper 1.0.4 reads the last zxid for re-sending watches right after this event,
		// while its receiving goroutine may already update it for a request sent on the new
		// connection: a data race in the client (go-zookeeper/zk#35) that `go test -race`
		// reports. Letting the recipes act again a moment later keeps their requests out of
		// that window; it costs nothing that matters beside a session timeout of seconds.
		g := s.gen
		time.AfterFunc(reconnectSettle, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.gen == g && !s.closed && isClosed(s.lost) {
				s.openLocked()
			}
		})
	case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
		s.gen++
		s.loseLocked()
	}
}

// reconnectSettle is how long after a reconnection the recipes may act again (see event).
const reconnectSettle = 250 * time.Millisecond

func (s *Session) openLocked() {
	s.lost = make(chan struct{})
	close(s.up)
}

func (s *Session) loseLocked() {
	if !isClosed(s.lost) {
		close(s.lost)
		s.up = make(chan struct{})
	}
}

// Lost returns a channel closed when the current session can no longer be trusted (already
// closed if there is none now).
func (s *Session) Lost() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Up returns a channel closed once the client has a session it trusts (already closed if it
// has one now).
func (s *Session) Up() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !isClosed(s.lost) {
		return closed()
	}
	return s.up
}

// Close ends the session: its ephemerals (candidacies, locks) are deleted at once by the server.
// Lost is closed before the client closes, so a holder stops before anyone else can take over.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	s.loseLocked()
	s.mu.Unlock()
	s.Conn.Close()
}

// ErrSessionLost is returned by a recipe whose session was lost while it waited.
var ErrSessionLost = errors.New("scheduler: ZooKeeper session lost")

func orDefault(d zk.Dialer) zk.Dialer {
	if d == nil {
		return net.DialTimeout
	}
	return d
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
