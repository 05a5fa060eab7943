package coord

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// znode is one node of the replica. Stat's DataLength and NumChildren are derived when read.
type znode struct {
	data     []byte
	acl      []ACL
	stat     Stat
	children map[string]bool
	// created counts the children ever created under the node: ZooKeeper numbers sequential
	// children from it. Deletes raise the cversion clients see but not this count (a real
	// server names the child created after "create s-0, s-1; delete s-0" s-0000000002, with the
	// cversion at 3; tests/zkcompat holds the two to it).
	created int32
}

func (n *znode) clone() *znode {
	c := *n
	c.children = make(map[string]bool, len(n.children))
	for k := range n.children {
		c.children[k] = true
	}
	return &c
}

// fullStat is the Stat clients see: a container's or a TTL node's ephemeralOwner, which marks
// its kind, shows as 0, as ZooKeeper shows it.
func (n *znode) fullStat() Stat {
	s := n.stat
	s.DataLength = int32(len(n.data))
	s.NumChildren = int32(len(n.children))
	if !sessionOwned(s.EphemeralOwner) {
		s.EphemeralOwner = 0
	}
	return s
}

// session is a live session as the log records it.
type session struct {
	passwd     []byte
	timeoutMs  int32
	ephemerals map[string]bool
	// seq is the last sequenced request (Service.Submit) decided for the session, and
	// outcomes the decisions of the last keptOutcomes of them, so a redelivered request gets
	// the answer its first delivery got.
	seq      int64
	outcomes map[int64]Outcome
}

// keptOutcomes is how many decided requests a session remembers: more than a client has in
// flight, so any redelivery of an outstanding request finds its answer.
const keptOutcomes = 64

// decided returns s with request seq decided as out, the older outcomes beyond keptOutcomes
// forgotten. It copies s: a validation's overlay must not change the replica's session.
func (s *session) decided(seq int64, out Outcome) *session {
	c := *s
	c.outcomes = make(map[int64]Outcome, len(s.outcomes)+1)
	for k, v := range s.outcomes {
		if k > seq-keptOutcomes {
			c.outcomes[k] = v
		}
	}
	c.seq, c.outcomes[seq] = seq, out
	return &c
}

// state is what executing a transaction reads and changes: the replica itself (apply), or an
// overlay on it that is thrown away (validation), so one function does both.
type state interface {
	node(p string) *znode
	// mutable returns a node the caller may change in place and will pass to put.
	mutable(p string) *znode
	put(p string, n *znode)
	remove(p string)
	session(id int64) *session
	openSession(id int64, s *session)
	closeSession(id int64)
}

// tree is the replica: every znode by path and the live sessions with their ephemerals.
type tree struct {
	nodes    map[string]*znode
	sessions map[int64]*session
	zxid     int64 // the last applied transaction
}

func newTree() *tree {
	t := &tree{nodes: map[string]*znode{}, sessions: map[int64]*session{}}
	// ZooKeeper's built-in nodes, created before any transaction (zxid 0).
	for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
		t.nodes[p] = &znode{acl: OpenACLUnsafe, children: map[string]bool{}}
		if p != "/" {
			t.nodes[parentOf(p)].children[path.Base(p)] = true
		}
	}
	return t
}

func (t *tree) node(p string) *znode    { return t.nodes[p] }
func (t *tree) mutable(p string) *znode { return t.nodes[p] }
func (t *tree) put(p string, n *znode) {
	t.nodes[p] = n
	if o := n.stat.EphemeralOwner; sessionOwned(o) {
		if s := t.sessions[o]; s != nil {
			s.ephemerals[p] = true
		}
	}
}
func (t *tree) remove(p string) {
	if n := t.nodes[p]; n != nil && sessionOwned(n.stat.EphemeralOwner) {
		if s := t.sessions[n.stat.EphemeralOwner]; s != nil {
			delete(s.ephemerals, p)
		}
	}
	delete(t.nodes, p)
}
func (t *tree) session(id int64) *session        { return t.sessions[id] }
func (t *tree) openSession(id int64, s *session) { t.sessions[id] = s }
func (t *tree) closeSession(id int64)            { delete(t.sessions, id) }

// overlay records a transaction's changes over the replica without touching it.
type overlay struct {
	base     *tree
	nodes    map[string]*znode  // nil: removed
	sessions map[int64]*session // nil: closed
}

func newOverlay(base *tree) *overlay {
	return &overlay{base: base, nodes: map[string]*znode{}, sessions: map[int64]*session{}}
}

func (o *overlay) node(p string) *znode {
	if n, ok := o.nodes[p]; ok {
		return n
	}
	return o.base.nodes[p]
}

func (o *overlay) mutable(p string) *znode { return o.node(p).clone() }
func (o *overlay) put(p string, n *znode)  { o.nodes[p] = n }
func (o *overlay) remove(p string)         { o.nodes[p] = nil }

func (o *overlay) session(id int64) *session {
	if s, ok := o.sessions[id]; ok {
		return s
	}
	return o.base.sessions[id]
}

func (o *overlay) openSession(id int64, s *session) { o.sessions[id] = s }
func (o *overlay) closeSession(id int64)            { o.sessions[id] = nil }

// txn is one log entry: a client's writes, or a session's open or close.
type txn struct {
	Nonce   string   `json:"n"` // tells a writer whether an ambiguous append was its own
	Time    int64    `json:"t"` // ms since the epoch: ctime/mtime of what it writes
	Session int64    `json:"s"`
	Auth    []ID     `json:"a,omitempty"` // the caller's ids: ACL checks and "auth" ACLs replay with them
	Ops     []Op     `json:"o,omitempty"`
	Open    *openTxn `json:"open,omitempty"`
	Close   bool     `json:"close,omitempty"`
	// Seq is a sequenced request's number in its session (Service.Submit; 0: not sequenced),
	// and Failed, when set, the failure decided for it: logged so that a redelivery gets the
	// same answer, it changes nothing else.
	Seq     int64    `json:"q,omitempty"`
	Request string   `json:"rq,omitempty"` // a sequenced request's id, recorded in its Outcome
	Failed  *Outcome `json:"f,omitempty"`
}

// openTxn is what a session's open transaction records.
type openTxn struct {
	Passwd    []byte `json:"p"`
	TimeoutMs int32  `json:"t"`
}

// exec executes t as transaction zxid on st. It is deterministic in (state, t, zxid), so
// validating against an overlay at zxid-1 and applying to the replica give the same outcome.
// A failed op returns its index and error; nothing of st is to be used then.
func exec(st state, t *txn, zxid int64) (res []Result, events []Event, failed int, err *Error) {
	switch {
	case t.Open != nil:
		if st.session(t.Session) != nil {
			return nil, nil, 0, errf(SystemError, "", "session %#x exists", t.Session)
		}
		st.openSession(t.Session, &session{passwd: t.Open.Passwd, timeoutMs: t.Open.TimeoutMs, ephemerals: map[string]bool{}})
		return nil, nil, 0, nil
	case t.Close:
		s := st.session(t.Session)
		if s == nil {
			return nil, nil, 0, errf(SessionExpired, "", "session %#x", t.Session)
		}
		eph := make([]string, 0, len(s.ephemerals))
		for p := range s.ephemerals {
			eph = append(eph, p)
		}
		// Deepest first cannot matter (ephemerals have no children); sorted for determinism.
		sort.Strings(eph)
		for _, p := range eph {
			events = deleteNode(st, p, zxid, events)
		}
		st.closeSession(t.Session)
		return nil, events, 0, nil
	}
	if t.Session != 0 && st.session(t.Session) == nil {
		return nil, nil, 0, errf(SessionExpired, "", "session %#x", t.Session)
	}
	if t.Seq != 0 {
		if s := st.session(t.Session); t.Session == 0 || t.Seq != s.seq+1 {
			return nil, nil, 0, errf(SystemError, "", "sequenced request %d out of order", t.Seq)
		}
		if t.Failed != nil {
			out := *t.Failed
			out.Zxid = zxid
			st.openSession(t.Session, st.session(t.Session).decided(t.Seq, out))
			return nil, nil, 0, nil
		}
	}
	res = make([]Result, len(t.Ops))
	for i, op := range t.Ops {
		r, evs, e := execOp(st, t, op, zxid)
		if e != nil {
			return nil, nil, i, e
		}
		res[i] = r
		events = append(events, evs...)
	}
	if t.Seq != 0 {
		st.openSession(t.Session, st.session(t.Session).decided(t.Seq, Outcome{Zxid: zxid, Results: res, Request: t.Request}))
	}
	return res, events, 0, nil
}

func execOp(st state, t *txn, op Op, zxid int64) (Result, []Event, *Error) {
	if err := validatePath(op.Path, op.Kind == OpCreate && op.Mode.sequential()); err != nil {
		return Result{}, nil, err
	}
	switch op.Kind {
	case OpCreate:
		return create(st, t, op, zxid)
	case OpDelete:
		if op.Path == "/" {
			return Result{}, nil, errf(BadArguments, op.Path, "cannot delete the root")
		}
		if systemPath(op.Path) {
			return Result{}, nil, errf(BadArguments, op.Path, "the /zookeeper subtree is the server's")
		}
		n := st.node(op.Path)
		if n == nil {
			return Result{}, nil, errf(NoNode, op.Path, "")
		}
		if !allowed(st.node(parentOf(op.Path)).acl, t.Auth, PermDelete) {
			return Result{}, nil, errf(NoAuth, op.Path, "DELETE on the parent")
		}
		if op.Version != -1 && op.Version != n.stat.Version {
			return Result{}, nil, errf(BadVersion, op.Path, "version %d, expected %d", n.stat.Version, op.Version)
		}
		if len(n.children) > 0 {
			return Result{}, nil, errf(NotEmpty, op.Path, "")
		}
		return Result{}, deleteNode(st, op.Path, zxid, nil), nil
	case OpSetData:
		if systemPath(op.Path) {
			return Result{}, nil, errf(BadArguments, op.Path, "the /zookeeper subtree is the server's")
		}
		n := st.node(op.Path)
		if n == nil {
			return Result{}, nil, errf(NoNode, op.Path, "")
		}
		if !allowed(n.acl, t.Auth, PermWrite) {
			return Result{}, nil, errf(NoAuth, op.Path, "WRITE")
		}
		if op.Version != -1 && op.Version != n.stat.Version {
			return Result{}, nil, errf(BadVersion, op.Path, "version %d, expected %d", n.stat.Version, op.Version)
		}
		if len(op.Data) > MaxData {
			return Result{}, nil, errf(BadArguments, op.Path, "data of %d bytes exceeds %d", len(op.Data), MaxData)
		}
		m := st.mutable(op.Path)
		m.data = op.Data
		m.stat.Version++
		m.stat.Mzxid = zxid
		m.stat.Mtime = t.Time
		st.put(op.Path, m)
		return Result{Stat: m.fullStat()}, []Event{{Type: NodeDataChanged, Path: op.Path, Zxid: zxid, acl: m.acl}}, nil
	case OpSetACL:
		n := st.node(op.Path)
		if n == nil {
			return Result{}, nil, errf(NoNode, op.Path, "")
		}
		if !allowed(n.acl, t.Auth, PermAdmin) {
			return Result{}, nil, errf(NoAuth, op.Path, "ADMIN")
		}
		if op.Version != -1 && op.Version != n.stat.Aversion {
			return Result{}, nil, errf(BadVersion, op.Path, "ACL version %d, expected %d", n.stat.Aversion, op.Version)
		}
		acl, err := fixACL(op.Path, op.ACL, t.Auth)
		if err != nil {
			return Result{}, nil, err
		}
		m := st.mutable(op.Path)
		m.acl = acl
		m.stat.Aversion++
		st.put(op.Path, m)
		return Result{Stat: m.fullStat()}, nil, nil
	case opDeleteContainer:
		n := st.node(op.Path)
		if n == nil {
			return Result{}, nil, errf(NoNode, op.Path, "")
		}
		if len(n.children) > 0 {
			return Result{}, nil, errf(NotEmpty, op.Path, "")
		}
		if !reapable(n, t.Time) {
			return Result{}, nil, errf(BadVersion, op.Path, "not an emptied container or an expired TTL node")
		}
		return Result{}, deleteNode(st, op.Path, zxid, nil), nil
	case OpCheck:
		n := st.node(op.Path)
		if n == nil {
			return Result{}, nil, errf(NoNode, op.Path, "")
		}
		if !allowed(n.acl, t.Auth, PermRead) {
			return Result{}, nil, errf(NoAuth, op.Path, "READ")
		}
		if op.Version != -1 && op.Version != n.stat.Version {
			return Result{}, nil, errf(BadVersion, op.Path, "version %d, expected %d", n.stat.Version, op.Version)
		}
		return Result{}, nil, nil
	}
	return Result{}, nil, errf(Unimplemented, op.Path, "operation %d", op.Kind)
}

func create(st state, t *txn, op Op, zxid int64) (Result, []Event, *Error) {
	if op.Mode < Persistent || op.Mode > PersistentSequentialWithTTL {
		return Result{}, nil, errf(BadArguments, op.Path, "create mode %d", op.Mode)
	}
	if op.Mode.ttl() && (op.TTL <= 0 || op.TTL > MaxTTL) {
		return Result{}, nil, errf(BadArguments, op.Path, "TTL %d ms is not in 1..%d", op.TTL, int64(MaxTTL))
	}
	if !op.Mode.ttl() && op.TTL != 0 {
		return Result{}, nil, errf(BadArguments, op.Path, "a TTL on a node of mode %d", op.Mode)
	}
	if len(op.Data) > MaxData {
		return Result{}, nil, errf(BadArguments, op.Path, "data of %d bytes exceeds %d", len(op.Data), MaxData)
	}
	if op.Mode.ephemeral() && t.Session == 0 {
		return Result{}, nil, errf(BadArguments, op.Path, "an ephemeral node needs a session")
	}
	acl, err := fixACL(op.Path, op.ACL, t.Auth)
	if err != nil {
		return Result{}, nil, err
	}
	parentPath := parentOf(op.Path)
	if systemPath(parentPath) {
		return Result{}, nil, errf(BadArguments, op.Path, "the /zookeeper subtree is the server's")
	}
	parent := st.node(parentPath)
	if parent == nil {
		return Result{}, nil, errf(NoNode, parentPath, "parent of %s", op.Path)
	}
	if !allowed(parent.acl, t.Auth, PermCreate) {
		return Result{}, nil, errf(NoAuth, op.Path, "CREATE on the parent")
	}
	p := op.Path
	if op.Mode.sequential() {
		// 10 digits from the parent's count of created children, wrapping like an int32.
		p = fmt.Sprintf("%s%010d", op.Path, parent.created)
	}
	if st.node(p) != nil {
		return Result{}, nil, errf(NodeExists, p, "")
	}
	if sessionOwned(parent.stat.EphemeralOwner) {
		return Result{}, nil, errf(NoChildrenForEphemerals, p, "")
	}
	n := &znode{data: op.Data, acl: acl, children: map[string]bool{}, stat: Stat{
		Czxid: zxid, Mzxid: zxid, Pzxid: zxid, Ctime: t.Time, Mtime: t.Time,
	}}
	switch {
	case op.Mode.ephemeral():
		n.stat.EphemeralOwner = t.Session
	case op.Mode == Container:
		n.stat.EphemeralOwner = containerOwner
	case op.Mode.ttl():
		n.stat.EphemeralOwner = ttlOwner | op.TTL
	}
	pm := st.mutable(parentPath)
	pm.children[path.Base(p)] = true
	pm.stat.Cversion++
	pm.created++
	pm.stat.Pzxid = zxid
	st.put(parentPath, pm)
	st.put(p, n)
	return Result{Path: p, Stat: n.fullStat()}, []Event{
		{Type: NodeCreated, Path: p, Zxid: zxid, acl: n.acl},
		{Type: NodeChildrenChanged, Path: parentPath, Zxid: zxid, acl: pm.acl},
	}, nil
}

func deleteNode(st state, p string, zxid int64, events []Event) []Event {
	parentPath := parentOf(p)
	pm := st.mutable(parentPath)
	delete(pm.children, path.Base(p))
	pm.stat.Cversion++
	pm.stat.Pzxid = zxid
	st.put(parentPath, pm)
	acl := st.node(p).acl
	st.remove(p)
	return append(events, Event{Type: NodeDeleted, Path: p, Zxid: zxid, acl: acl},
		Event{Type: NodeChildrenChanged, Path: parentPath, Zxid: zxid, acl: pm.acl})
}

// The ephemeralOwner ZooKeeper gives containers and TTL nodes (its EphemeralType). Sessions'
// ids are positive; these are negative.
const (
	containerOwner int64 = math.MinInt64
	ttlOwner       int64 = -1 << 56 // 0xff00000000000000 | the TTL in ms
)

func sessionOwned(owner int64) bool { return owner > 0 }

// reapable reports whether the heartbeat deletes n at time now (ms): an emptied container (one
// never given a child stays, as ZooKeeper's does by default), or a TTL node without children
// not modified for longer than its TTL.
func reapable(n *znode, now int64) bool {
	if len(n.children) > 0 {
		return false
	}
	switch o := n.stat.EphemeralOwner; {
	case o == containerOwner:
		return n.stat.Cversion > 0
	case o&ttlOwner == ttlOwner && o&^ttlOwner <= MaxTTL:
		return now-n.stat.Mtime > o&^ttlOwner
	}
	return false
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func systemPath(p string) bool { return p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") }

// validatePath applies ZooKeeper's PathUtils rules; a sequential create's path may end in "/".
func validatePath(p string, sequential bool) *Error {
	bad := func(why string) *Error { return errf(BadArguments, p, "invalid path: %s", why) }
	if p == "" || p[0] != '/' {
		return bad("must start with /")
	}
	if p == "/" {
		return nil
	}
	check := p
	if sequential {
		check = p + "1"
	}
	if strings.HasSuffix(check, "/") {
		return bad("must not end with /")
	}
	if !utf8.ValidString(p) {
		return bad("not UTF-8")
	}
	for _, seg := range strings.Split(check[1:], "/") {
		switch seg {
		case "":
			return bad("empty node name")
		case ".", "..":
			return bad("relative node name")
		}
	}
	for _, r := range p {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			return bad(fmt.Sprintf("invalid character %U", r))
		}
	}
	return nil
}

// DigestID is the id a digest "user:password" authenticates as: user:base64(sha1(user:password)).
func DigestID(userPassword string) (string, bool) {
	user, _, ok := strings.Cut(userPassword, ":")
	if !ok || user == "" {
		return "", false
	}
	sum := sha1.Sum([]byte(userPassword))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:]), true
}

// fixACL validates a request's ACL and expands "auth" into the caller's ids, as ZooKeeper's
// fixupACL does (it checks schemes and ids, not permission bits).
func fixACL(p string, acl []ACL, auth []ID) ([]ACL, *Error) {
	if len(acl) == 0 {
		return nil, errf(InvalidACL, p, "empty ACL")
	}
	var out []ACL
	for _, a := range acl {
		switch a.Scheme {
		case "world":
			if a.ID.ID != "anyone" {
				return nil, errf(InvalidACL, p, "world:%s", a.ID.ID)
			}
			out = append(out, a)
		case "auth":
			n := 0
			for _, id := range auth {
				if id.Scheme == "digest" {
					out = append(out, ACL{Perms: a.Perms, ID: id})
					n++
				}
			}
			if n == 0 {
				return nil, errf(InvalidACL, p, "auth ACL without authenticated ids")
			}
		case "digest":
			if user, hash, ok := strings.Cut(a.ID.ID, ":"); !ok || user == "" || hash == "" {
				return nil, errf(InvalidACL, p, "digest id %q is not user:hash", a.ID.ID)
			}
			out = append(out, a)
		default:
			return nil, errf(InvalidACL, p, "scheme %q is not supported (world, digest, auth)", a.Scheme)
		}
	}
	return out, nil
}

// allowed reports whether ids may do perm on a node with acl.
func allowed(acl []ACL, ids []ID, perm int32) bool {
	if len(acl) == 0 {
		return true
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		if a.Scheme == "world" && a.ID.ID == "anyone" {
			return true
		}
		for _, id := range ids {
			if id == a.ID {
				return true
			}
		}
	}
	return false
}
