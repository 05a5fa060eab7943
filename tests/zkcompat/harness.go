// Package zkcompat holds ssfkit's ZooKeeper endpoint to a real Apache ZooKeeper server: the same
// scripted client workloads (scenarios.go) run against both through an unmodified client
// (github.com/go-zookeeper/zk), and their transcripts of what a client observes must be equal.
//
// A transcript records every reply (data, stat, error, sequential names), every watch event and
// session state a client sees. What legitimately differs between two servers is normalised:
// zxids become their rank among the zxids the run observed (so order and equality are compared,
// not values), session ids become "self"/"other"/"none", times are only checked for order.
package zkcompat

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// eventWait bounds how long a transcript waits for a watch event or a session state it expects.
const eventWait = 10 * time.Second

// A transcript is what the clients of one scenario observed, line by line.
type transcript struct {
	mu       sync.Mutex
	lines    []string
	fails    []string
	zxids    map[int64]bool
	sessions map[int64]string // session id -> client name
}

func (tr *transcript) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

// fail records a problem that is not a difference between servers: the harness could not go on.
func (tr *transcript) fail(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.fails = append(tr.fails, fmt.Sprintf(format, args...))
}

func (tr *transcript) zxid(z int64) string {
	if z == 0 {
		return "0" // what a client shows when a reply carries no stat
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.zxids == nil {
		tr.zxids = map[int64]bool{}
	}
	tr.zxids[z] = true
	return fmt.Sprintf("zx<%d>", z)
}

var zxidToken = regexp.MustCompile(`zx<(-?\d+)>`)

// normalized returns the lines with each zxid replaced by its rank among those observed.
func (tr *transcript) normalized() []string {
	var all []int64
	for z := range tr.zxids {
		all = append(all, z)
	}
	slices.Sort(all)
	rank := map[string]string{}
	for i, z := range all {
		rank[strconv.FormatInt(z, 10)] = "z" + strconv.Itoa(i)
	}
	out := make([]string, len(tr.lines))
	for i, l := range tr.lines {
		out[i] = zxidToken.ReplaceAllStringFunc(l, func(m string) string { return rank[zxidToken.FindStringSubmatch(m)[1]] })
	}
	return out
}

// A client is one ZooKeeper session of a scenario, named in the transcript.
type client struct {
	name   string
	tr     *transcript
	conn   *zk.Conn
	states <-chan zk.Event
	proxy  *proxy // nil unless the scenario asked for one
}

// connect opens a session to server (through a proxy if proxied) and waits until it has one.
func connect(tr *transcript, name, server string, timeout time.Duration, proxied bool) (*client, error) {
	c := &client{name: name, tr: tr}
	addr := server
	if proxied {
		p, err := newProxy(server)
		if err != nil {
			return nil, err
		}
		c.proxy, addr = p, p.addr()
	}
	conn, states, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	c.conn, c.states = conn, states
	if err := c.awaitState(zk.StateHasSession); err != nil {
		conn.Close()
		return nil, err
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.sessions == nil {
		tr.sessions = map[int64]string{}
	}
	tr.sessions[conn.SessionID()] = name
	return c, nil
}

// awaitState waits until the session reaches state; the states passed on the way are not
// recorded (a client's connection attempts differ between servers).
func (c *client) awaitState(want zk.State) error {
	deadline := time.After(eventWait)
	for {
		select {
		case ev := <-c.states:
			if ev.State == want {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("%s: no %v within %v (state %v)", c.name, want, eventWait, c.conn.State())
		}
	}
}

func (c *client) close() {
	c.conn.Close()
	if c.proxy != nil {
		c.proxy.close()
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// owner names a session id as the transcript sees it: none, self, or the owning client's name.
func (c *client) owner(id int64) string {
	switch {
	case id == 0:
		return "none"
	case id == c.conn.SessionID():
		return "self"
	}
	c.tr.mu.Lock()
	defer c.tr.mu.Unlock()
	if name, ok := c.tr.sessions[id]; ok {
		return name
	}
	return "unknown"
}

func (c *client) stat(s *zk.Stat) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("{cz=%s mz=%s pz=%s v=%d cv=%d av=%d eph=%s len=%d kids=%d times=%v}",
		c.tr.zxid(s.Czxid), c.tr.zxid(s.Mzxid), c.tr.zxid(s.Pzxid), s.Version, s.Cversion, s.Aversion,
		c.owner(s.EphemeralOwner), s.DataLength, s.NumChildren, s.Ctime > 0 && s.Mtime >= s.Ctime)
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// data shows a value: short ones as they are, long ones by length and a checksum.
func data(b []byte) string {
	if len(b) <= 64 {
		return strconv.Quote(string(b))
	}
	var sum uint32
	for _, x := range b {
		sum = sum*31 + uint32(x)
	}
	return fmt.Sprintf("<%d bytes, sum %08x>", len(b), sum)
}

// The operations a scenario runs, each recorded with what the client observed.

func (c *client) create(path string, value []byte, flags int32, acl []zk.ACL) string {
	if acl == nil {
		acl = zk.WorldACL(zk.PermAll)
	}
	got, err := c.conn.Create(path, value, flags, acl)
	c.tr.add("%s create %s flags=%d -> %q %s", c.name, path, flags, got, errName(err))
	return got
}

func (c *client) createContainer(path string) {
	got, err := c.conn.CreateContainer(path, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	c.tr.add("%s createContainer %s -> %q %s", c.name, path, got, errName(err))
}

func (c *client) createTTL(path string, flags int32, ttl time.Duration) {
	got, err := c.conn.CreateTTL(path, nil, flags, zk.WorldACL(zk.PermAll), ttl)
	c.tr.add("%s createTTL %s flags=%d ttl=%v -> %q %s", c.name, path, flags, ttl, got, errName(err))
}

func (c *client) get(path string) {
	v, s, err := c.conn.Get(path)
	c.tr.add("%s get %s -> %s %s %s", c.name, path, data(v), c.stat(s), errName(err))
}

func (c *client) set(path string, value []byte, version int32) {
	s, err := c.conn.Set(path, value, version)
	c.tr.add("%s set %s %s v=%d -> %s %s", c.name, path, data(value), version, c.stat(s), errName(err))
}

func (c *client) delete(path string, version int32) {
	err := c.conn.Delete(path, version)
	c.tr.add("%s delete %s v=%d -> %s", c.name, path, version, errName(err))
}

func (c *client) exists(path string) {
	ok, s, err := c.conn.Exists(path)
	if !ok {
		s = nil
	}
	c.tr.add("%s exists %s -> %v %s %s", c.name, path, ok, c.stat(s), errName(err))
}

func (c *client) children(path string) {
	kids, s, err := c.conn.Children(path)
	sort.Strings(kids) // ZooKeeper promises no order
	c.tr.add("%s children %s -> %v %s %s", c.name, path, kids, c.stat(s), errName(err))
}

func (c *client) multi(ops ...any) {
	res, err := c.conn.Multi(ops...)
	var parts []string
	for _, r := range res {
		parts = append(parts, fmt.Sprintf("(%q %s %s)", r.String, c.stat(r.Stat), errName(r.Error)))
	}
	c.tr.add("%s multi %d ops -> [%s] %s", c.name, len(ops), strings.Join(parts, " "), errName(err))
}

func (c *client) sync(path string) {
	p, err := c.conn.Sync(path)
	c.tr.add("%s sync %s -> %q %s", c.name, path, p, errName(err))
}

func (c *client) addAuth(user, password string) {
	err := c.conn.AddAuth("digest", []byte(user+":"+password))
	c.tr.add("%s addauth digest %s -> %s", c.name, user, errName(err))
}

// A watch is a one-time watch a client set; expect and expectNone record what it delivered.
type watch struct {
	c    *client
	what string
	ch   <-chan zk.Event
}

func (c *client) getW(path string) *watch {
	v, s, ch, err := c.conn.GetW(path)
	c.tr.add("%s getw %s -> %s %s %s", c.name, path, data(v), c.stat(s), errName(err))
	return &watch{c, "data " + path, ch}
}

func (c *client) existsW(path string) *watch {
	ok, s, ch, err := c.conn.ExistsW(path)
	if !ok {
		s = nil
	}
	c.tr.add("%s existsw %s -> %v %s %s", c.name, path, ok, c.stat(s), errName(err))
	return &watch{c, "exists " + path, ch}
}

func (c *client) childrenW(path string) *watch {
	kids, s, ch, err := c.conn.ChildrenW(path)
	sort.Strings(kids)
	c.tr.add("%s childrenw %s -> %v %s %s", c.name, path, kids, c.stat(s), errName(err))
	return &watch{c, "children " + path, ch}
}

// fired records the event the watch delivered, waiting for it.
func (w *watch) fired() {
	select {
	case ev := <-w.ch:
		w.c.tr.add("%s watch %s fired: %v %s", w.c.name, w.what, ev.Type, ev.Path)
	case <-time.After(eventWait):
		w.c.tr.add("%s watch %s: nothing within %v", w.c.name, w.what, eventWait)
	}
}

// firedBefore records whether the watch had delivered its event already: called right after a
// reply that observed the change, it checks that the notification came first (ZooKeeper's
// ordering guarantee), since the client hands notifications over before later replies.
func (w *watch) firedBefore(reply string) {
	select {
	case ev := <-w.ch:
		w.c.tr.add("%s watch %s had fired before %s: %v %s", w.c.name, w.what, reply, ev.Type, ev.Path)
	default:
		w.c.tr.add("%s watch %s had NOT fired before %s", w.c.name, w.what, reply)
	}
}

// silent records that the watch delivered nothing more: a round trip on the session (whose
// reply would follow any pending notification) comes first.
func (w *watch) silent() {
	_, _ = w.c.conn.Sync("/")
	select {
	case ev, ok := <-w.ch:
		if ok {
			w.c.tr.add("%s watch %s fired again: %v %s", w.c.name, w.what, ev.Type, ev.Path)
			return
		}
	default:
	}
	w.c.tr.add("%s watch %s silent", w.c.name, w.what)
}

// proxy forwards a client's TCP connections to a server; pausing it stops the traffic (the
// session's pings no longer arrive), dropping it cuts the connections (the client reconnects).
type proxy struct {
	ln     net.Listener
	server string
	mu     sync.Mutex
	paused bool
	conns  []net.Conn
}

func newProxy(server string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, server: server}
	go p.accept()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		paused := p.paused
		p.mu.Unlock()
		if paused {
			in.Close() // a paused network: the client's reconnection attempts fail
			continue
		}
		out, err := net.Dial("tcp", p.server)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if paused {
				src.Close()
				dst.Close()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			dst.Close()
			return
		}
	}
}

// partition stops all traffic and cuts the connections until heal.
func (p *proxy) partition() {
	p.mu.Lock()
	p.paused = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// drop cuts the connections; the client reconnects at once.
func (p *proxy) drop() {
	p.partition()
	p.heal()
}

func (p *proxy) close() {
	p.ln.Close()
	p.partition()
}
