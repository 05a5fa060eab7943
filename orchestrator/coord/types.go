// Package coord is a ZooKeeper-model coordination service (FaaSKeeper's data model and
// guarantees, seeds/002) kept in one portable store table.
//
// Every write is a transaction appended to a totally ordered log in the table: the row for zxid N
// is created with a conditional create (RowAbsent), so exactly one writer, in any process, wins
// each zxid, and a writer validates its request against the state at N-1 before it may claim N.
// The log is the truth; each Service replays it, in zxid order, into an in-memory replica that
// serves reads (ZooKeeper's model: a server's local replica, sync to catch up). Applying a
// transaction is deterministic and all-or-nothing under the replica's lock, so a multi, or a
// session's expiry with all its ephemerals, is seen by readers entirely or not at all, and
// watches fire, per session, in zxid order before any reply that shows the later state.
//
// Sessions are transactions too (open, close); liveness is a heartbeat row per session that the
// serving process refreshes and any Service's expirer fences (marks dead) once it is older than
// the session's timeout, before it appends the close: a fenced session cannot be refreshed, and
// a fence left by a crashed expirer is finished by the next pass.
//
// Imports (docs/architecture.md): the portable store API only; no host, no command.
package coord

import (
	"errors"
	"fmt"
)

// Code is a ZooKeeper error code (KeeperException.Code), sent as-is on the wire.
type Code int32

// The codes this service returns.
const (
	OK                      Code = 0
	SystemError             Code = -1
	RuntimeInconsistency    Code = -2
	MarshallingError        Code = -5
	Unimplemented           Code = -6
	BadArguments            Code = -8
	APIError                Code = -100
	NoNode                  Code = -101
	NoAuth                  Code = -102
	BadVersion              Code = -103
	NoChildrenForEphemerals Code = -108
	NodeExists              Code = -110
	NotEmpty                Code = -111
	SessionExpired          Code = -112
	InvalidACL              Code = -114
	AuthFailed              Code = -115
	NoWatcher               Code = -121
)

var codeNames = map[Code]string{
	SystemError: "SystemError", RuntimeInconsistency: "RuntimeInconsistency",
	MarshallingError: "MarshallingError", Unimplemented: "Unimplemented", BadArguments: "BadArguments",
	APIError: "APIError", NoNode: "NoNode", NoAuth: "NoAuth", BadVersion: "BadVersion",
	NoChildrenForEphemerals: "NoChildrenForEphemerals", NodeExists: "NodeExists", NotEmpty: "NotEmpty",
	SessionExpired: "SessionExpired", InvalidACL: "InvalidACL", AuthFailed: "AuthFailed",
	NoWatcher: "NoWatcher",
}

func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", int32(c))
}

// Error is a ZooKeeper error about a path.
type Error struct {
	Code Code
	Path string
	Msg  string
}

func (e *Error) Error() string {
	s := "coord: " + e.Code.String()
	if e.Path != "" {
		s += " for " + e.Path
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

func errf(c Code, path, format string, a ...any) *Error {
	return &Error{Code: c, Path: path, Msg: fmt.Sprintf(format, a...)}
}

// CodeOf maps err onto a ZooKeeper code: an *Error's own, OK for nil, SystemError for anything
// else (a store failure: the request may or may not have applied, as after a lost connection).
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return SystemError
}

// Stat is a znode's metadata, field for field ZooKeeper's.
type Stat struct {
	Czxid          int64
	Mzxid          int64
	Ctime          int64
	Mtime          int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	DataLength     int32
	NumChildren    int32
	Pzxid          int64
}

// Permission bits of an ACL entry.
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// ID is an authenticated identity or an ACL's subject: scheme "world" (id "anyone"), "digest"
// (id "user:base64(sha1(user:password))"), or, in a request's ACL, "auth" (the caller's ids).
type ID struct {
	Scheme string `json:"s"`
	ID     string `json:"i"`
}

// ACL is one entry of a znode's access control list.
type ACL struct {
	Perms int32 `json:"p"`
	ID
}

// OpenACLUnsafe is ZooKeeper's ZooDefs.Ids.OPEN_ACL_UNSAFE: everyone may do everything.
var OpenACLUnsafe = []ACL{{Perms: PermAll, ID: ID{Scheme: "world", ID: "anyone"}}}

// Mode is a create mode, numbered as ZooKeeper's CreateMode flags.
type Mode int32

// The create modes.
const (
	Persistent           Mode = 0
	Ephemeral            Mode = 1
	PersistentSequential Mode = 2
	EphemeralSequential  Mode = 3
	// Container is a persistent node deleted once it has had children and has none left.
	Container Mode = 4
	// PersistentWithTTL is a persistent node deleted once it has no children and has not been
	// modified for its Op.TTL.
	PersistentWithTTL           Mode = 5
	PersistentSequentialWithTTL Mode = 6
)

func (m Mode) ephemeral() bool { return m == Ephemeral || m == EphemeralSequential }
func (m Mode) sequential() bool {
	return m == PersistentSequential || m == EphemeralSequential || m == PersistentSequentialWithTTL
}
func (m Mode) ttl() bool { return m == PersistentWithTTL || m == PersistentSequentialWithTTL }

// MaxTTL is the longest TTL a node may have: ZooKeeper's, in ms (it fits in 40 bits of the
// node's ephemeralOwner).
const MaxTTL = 1<<40 - 1

// OpKind is a write operation, numbered as ZooKeeper's opcodes.
type OpKind int32

// The write operations a Write (and a multi) may hold.
const (
	OpCreate  OpKind = 1
	OpDelete  OpKind = 2
	OpSetData OpKind = 5
	OpSetACL  OpKind = 7
	OpCheck   OpKind = 13
	// opDeleteContainer is the heartbeat's deletion of an empty container or an expired TTL
	// node (ZooKeeper's deleteContainer), which holds only while the node still qualifies.
	opDeleteContainer OpKind = 20
)

// Op is one write: create (Path, Data, ACL, Mode, TTL for the TTL modes), delete (Path, Version), setData (Path, Data,
// Version), setACL (Path, ACL, Version: the ACL version) or check (Path, Version). Version -1
// matches any version.
type Op struct {
	Kind    OpKind `json:"k"`
	Path    string `json:"p"`
	Data    []byte `json:"d"` // null and empty differ: a client reads back which it wrote
	ACL     []ACL  `json:"a,omitempty"`
	Mode    Mode   `json:"m,omitempty"`
	TTL     int64  `json:"ttl,omitempty"` // ms
	Version int32  `json:"v"`
}

// Result is one op's outcome: the created path (create), the node's Stat after the write
// (create, setData, setACL), or, when a multi failed, Err (OK for the ops before the failing one,
// RuntimeInconsistency for those after it, as ZooKeeper reports them).
type Result struct {
	Path string
	Stat Stat
	Err  Code
}

// Outcome is what a sequenced request (Service.Submit) was decided to do, once and for all: the
// zxid of its decision and, if it applied, its ops' results; if it failed, which op, why, and
// nothing changed (Failed is that op's index; Code is OK when it applied).
type Outcome struct {
	Zxid    int64    `json:"z"`
	Results []Result `json:"r,omitempty"`
	Failed  int      `json:"i,omitempty"`
	Code    Code     `json:"c,omitempty"`
	Path    string   `json:"p,omitempty"`
	Message string   `json:"m,omitempty"`
	// Request is the id the submitter gave the request: a proxy whose request number was taken
	// by another request (a stale view of the session) sees someone else's id and tries again.
	Request string `json:"rq,omitempty"`
}

// Err is the failure decided, as the *Error the request would have got from Write or Multi;
// nil when it applied.
func (o Outcome) Err() error {
	if o.Code == OK {
		return nil
	}
	return &Error{Code: o.Code, Path: o.Path, Msg: o.Message}
}

// ErrOutOfOrder: a sequenced request arrived before its predecessor was decided; deliver it
// again later (a queue's redelivery does).
var ErrOutOfOrder = errors.New("coord: sequenced request ahead of its predecessor")

// EventType is a watch event's type, numbered as ZooKeeper's.
type EventType int32

// The watch events.
const (
	NodeCreated         EventType = 1
	NodeDeleted         EventType = 2
	NodeDataChanged     EventType = 3
	NodeChildrenChanged EventType = 4
)

// Event is a change a watch reports.
type Event struct {
	Type EventType
	Path string
	Zxid int64
	// acl is the ACL of the node the event is about when it happened (the deleted node's, the
	// parent's for NodeChildrenChanged): as ZooKeeper 3.9 does, a watcher without READ on it is
	// not told (a recursive watch must not reveal nodes its session cannot read).
	acl []ACL
}

// WatchMode is how AddWatch watches a path: ZooKeeper's AddWatchMode.
type WatchMode int32

// The modes of AddWatch.
const (
	// PersistentWatch reports every NodeCreated, NodeDataChanged, NodeDeleted and
	// NodeChildrenChanged of the path, and stays set.
	PersistentWatch WatchMode = 0
	// PersistentRecursiveWatch reports every NodeCreated, NodeDataChanged and NodeDeleted of
	// the path and of every node under it (no NodeChildrenChanged), and stays set.
	PersistentRecursiveWatch WatchMode = 1
)

// WatcherType selects the watches RemoveWatches removes: ZooKeeper's Watcher.WatcherType.
type WatcherType int32

// The watcher types.
const (
	ChildWatches               WatcherType = 1 // one-time child watches
	DataWatches                WatcherType = 2 // one-time data and exists watches
	AnyWatches                 WatcherType = 3 // every watch, of any mode
	PersistentWatches          WatcherType = 4
	PersistentRecursiveWatches WatcherType = 5
)

// MaxData is the largest znode data accepted: ZooKeeper's 1 MB jute.maxbuffer order of size.
const MaxData = 1 << 20
