// Package zkserver serves the ZooKeeper client protocol over TCP for a coordination Service
// (orchestrator/coord), so unmodified ZooKeeper clients (the Java client and zkCli, kazoo,
// github.com/go-zookeeper/zk) use it: jute records in 4-byte big-endian length-prefixed frames,
// the connect handshake with session re-attach, pings, digest auth, watches and setWatches, and
// the data opcodes (create, create2, delete, exists, getData, setData, getACL, setACL,
// getChildren, getChildren2, sync, check, multi, closeSession, getEphemerals,
// getAllChildrenNumber, setWatches2 without persistent watches). Containers, TTL nodes,
// reconfig, multiRead, persistent watches, removeWatches and SASL answer Unimplemented.
//
// It is a host: it turns a protocol's requests into calls of the runtime below it. Each
// connection's requests run one at a time in arrival order (ZooKeeper's client FIFO order), and
// each reply is queued while the Service's replica is held, so a watch event always reaches the
// client before any reply showing the state after it.
//
// Imports (docs/architecture.md): orchestrator/coord only.
package zkserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ssfkit/ssfkit/orchestrator/coord"
)

// Opcodes and special xids of the protocol (zookeeper.jute, ZooDefs.OpCode).
const (
	opCreate          = 1
	opDelete          = 2
	opExists          = 3
	opGetData         = 4
	opSetData         = 5
	opGetACL          = 6
	opSetACL          = 7
	opGetChildren     = 8
	opSync            = 9
	opPing            = 11
	opGetChildren2    = 12
	opCheck           = 13
	opMulti           = 14
	opCreate2         = 15
	opCheckWatches    = 17
	opRemoveWatches   = 18
	opCreateContainer = 19
	opCreateTTL       = 21
	opMultiRead       = 22
	opSetAuth         = 100
	opSetWatches      = 101
	opGetEphemerals   = 103
	opGetAllChildren  = 104
	opSetWatches2     = 105
	opAddWatch        = 106
	opClose           = -11
	opError           = -1

	xidNotification = -1
	stateConnected  = 3 // KeeperState.SyncConnected
)

// errExpired ends a handshake that answered "session expired".
var errExpired = errors.New("zkserver: session expired")

// maxFrame bounds a request: ZooKeeper's 1 MB jute.maxbuffer for data plus room for the rest.
const maxFrame = coord.MaxData + 64<<10

// Server accepts ZooKeeper clients for one Service.
type Server struct {
	svc  *coord.Service
	logf func(format string, args ...any)

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	lns    map[net.Listener]bool
	conns  map[*conn]bool
	wg     sync.WaitGroup
}

// New makes a Server for svc; logf (nil for none) hears about connections that end in error.
func New(svc *coord.Service, logf func(format string, args ...any)) *Server {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{svc: svc, logf: logf, ctx: ctx, cancel: cancel, lns: map[net.Listener]bool{}, conns: map[*conn]bool{}}
}

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = true
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		c := &conn{srv: s, nc: nc, wake: make(chan struct{}, 1), done: make(chan struct{})}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, drops every connection (their sessions live on until they expire or
// the clients reconnect elsewhere) and waits for the connections' goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.cancel()
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// conn is one client connection: a reader that handles requests in order and a writer that
// sends the queued frames.
type conn struct {
	srv *Server
	nc  net.Conn

	mu    sync.Mutex
	queue [][]byte
	shut  bool // send what is queued, then close
	wake  chan struct{}
	done  chan struct{}

	session int64
	timeout time.Duration
	auth    []coord.ID
	w       *coord.Watcher
	lost    error // a request's outcome is unknown: drop the connection
}

func (c *conn) send(frame []byte) {
	c.mu.Lock()
	c.queue = append(c.queue, frame)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) finish() {
	c.mu.Lock()
	c.shut = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop() {
	defer c.nc.Close()
	for {
		c.mu.Lock()
		q, shut := c.queue, c.shut
		c.queue = nil
		c.mu.Unlock()
		for _, f := range q {
			c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.nc.Write(f); err != nil {
				return
			}
		}
		if shut && len(q) == 0 {
			return
		}
		if len(q) == 0 {
			select {
			case <-c.wake:
			case <-c.done:
				return
			}
		}
	}
}

// frame builds a reply: header (xid, zxid, err) and, when err is OK, the body.
func frame(xid int32, zxid int64, code coord.Code, body func(w *writer)) []byte {
	w := &writer{b: make([]byte, 4, 64)}
	w.int32(xid)
	w.int64(zxid)
	w.int32(int32(code))
	if code == coord.OK && body != nil {
		body(w)
	}
	binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
	return w.b
}

func (c *conn) readFrame(timeout time.Duration) ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	var hdr [4]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("a %d-byte request exceeds the %d-byte limit", n, maxFrame)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c.nc, b)
	return b, err
}

// serve runs the connection: after a handshake failure or a closeSession the writer sends what
// is queued and then closes; on any other end the connection is dropped at once.
func (c *conn) serve() {
	go c.writeLoop()
	abort := func() {
		c.nc.Close()
		close(c.done)
	}
	if err := c.handshake(); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, errExpired) {
			c.srv.logf("zkserver: %s: connect: %v", c.nc.RemoteAddr(), err)
		}
		c.finish()
		return
	}
	defer func() {
		if c.w != nil {
			c.srv.svc.Detach(c.w)
		}
	}()
	for {
		b, err := c.readFrame(c.timeout)
		if err != nil {
			abort()
			return
		}
		r := &reader{b: b}
		xid, op := r.int32(), r.int32()
		if err := c.srv.svc.Touch(c.srv.ctx, c.session); err != nil {
			// Expired (or the store is down): the client reconnects and learns which.
			abort()
			return
		}
		closing, err := c.handle(xid, op, r)
		if err == nil {
			err = c.lost
		}
		if err != nil {
			c.srv.logf("zkserver: %s: session %#x: %v", c.nc.RemoteAddr(), c.session, err)
			abort()
			return
		}
		if closing {
			c.finish()
			return
		}
	}
}

// handshake reads ConnectRequest, opens or re-attaches the session and answers ConnectResponse.
func (c *conn) handshake() error {
	b, err := c.readFrame(30 * time.Second)
	if err != nil {
		return err
	}
	r := &reader{b: b}
	r.int32() // protocolVersion: 0 is the only one
	lastZxid := r.int64()
	timeout := time.Duration(r.int32()) * time.Millisecond
	id := r.int64()
	passwd := r.buffer()
	// A client that sends the read-only flag (whatever its value) expects the server's in the
	// reply; an old client sends none and gets none, as ZooKeeper answers it.
	newClient := len(r.b) > 0
	if newClient {
		r.bool() // canBeReadOnly: this server is never read-only, so it changes nothing
	}
	if r.err != nil {
		return r.err
	}
	svc := c.srv.svc
	// Single system image: a client that saw a later state than this server may not connect.
	if zxid, err := svc.Sync(c.srv.ctx); err != nil {
		return err
	} else if lastZxid > zxid {
		return fmt.Errorf("%w: client at zxid %#x, server at %#x", coord.ErrClientAhead, lastZxid, zxid)
	}
	if id == 0 {
		if id, passwd, _, err = svc.OpenSession(c.srv.ctx, timeout); err != nil {
			return err
		}
	}
	w, negotiated, err := svc.Attach(c.srv.ctx, id, passwd, lastZxid, c.notify, func() { c.nc.Close() })
	if coord.CodeOf(err) == coord.SessionExpired {
		// ZooKeeper's answer to an expired session or a wrong password: session id 0.
		c.send(connectResponse(0, 0, make([]byte, 16), newClient))
		return errExpired
	}
	if err != nil {
		return err
	}
	c.session, c.timeout, c.w = id, negotiated, w
	c.send(connectResponse(negotiated, id, passwd, newClient))
	return nil
}

func connectResponse(timeout time.Duration, id int64, passwd []byte, newClient bool) []byte {
	w := &writer{b: make([]byte, 4, 48)}
	w.int32(0)
	w.int32(int32(timeout.Milliseconds()))
	w.int64(id)
	w.buffer(passwd)
	if newClient {
		w.bool(false) // this server is never read-only
	}
	binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
	return w.b
}

func (c *conn) notify(ev coord.Event) {
	c.send(frame(xidNotification, -1, coord.OK, func(w *writer) {
		w.int32(int32(ev.Type))
		w.int32(stateConnected)
		w.string(ev.Path)
	}))
}

func (c *conn) caller() coord.Caller {
	return coord.Caller{Session: c.session, Auth: c.auth, W: c.w}
}

// read runs fn on the replica and queues its reply there, so no later event overtakes it.
func (c *conn) read(xid int32, fn func(v coord.View) (func(w *writer), error)) {
	c.srv.svc.View(func(v coord.View) {
		body, err := fn(v)
		c.reply(xid, v.Zxid(), err, body)
	})
}

// write answers a write with its zxid, or the replica's last zxid when it failed.
func (c *conn) write(xid int32, op coord.Op, body func(r coord.Result) func(w *writer)) {
	res, zxid, err := c.srv.svc.Write(c.srv.ctx, c.caller(), op)
	if err != nil {
		zxid = c.srv.svc.LastZxid()
	}
	c.reply(xid, zxid, err, body(res))
}

// reply queues the answer to xid, unless err is not ZooKeeper's (a store failure, after which a
// write may or may not have applied): then the connection is dropped instead, which clients
// report as ZooKeeper's ConnectionLoss, the error that means "outcome unknown".
func (c *conn) reply(xid int32, zxid int64, err error, body func(w *writer)) {
	if coord.CodeOf(err) == coord.SystemError {
		if c.lost == nil {
			c.lost = err
		}
		return
	}
	c.send(frame(xid, zxid, coord.CodeOf(err), body))
}

func noBody(coord.Result) func(w *writer) { return nil }

func statBody(r coord.Result) func(w *writer) { return func(w *writer) { w.stat(r.Stat) } }

// handle serves one request; it returns closing after a closeSession, and an error for a
// request it cannot decode (ZooKeeper drops such a connection).
func (c *conn) handle(xid, op int32, r *reader) (closing bool, err error) {
	cl := c.caller()
	svc := c.srv.svc
	switch op {
	case opPing:
		c.send(frame(xid, svc.LastZxid(), coord.OK, nil))
	case opSetAuth:
		r.int32() // type: unused
		scheme, auth := r.string(), r.buffer()
		if r.err != nil {
			return false, r.err
		}
		id, ok := coord.DigestID(string(auth))
		if scheme != "digest" || !ok {
			// ZooKeeper answers AuthFailed and closes the connection.
			c.send(frame(xid, svc.LastZxid(), coord.AuthFailed, nil))
			return true, nil
		}
		c.auth = append(c.auth, coord.ID{Scheme: "digest", ID: id})
		svc.Authenticate(c.w, c.auth)
		c.send(frame(xid, svc.LastZxid(), coord.OK, nil))
	case opSetWatches, opSetWatches2:
		rel := r.int64()
		l := coord.WatchLists{Data: r.strings(), Exist: r.strings(), Child: r.strings()}
		if op == opSetWatches2 {
			l.Persistent, l.Recursive = r.strings(), r.strings()
		}
		if r.err != nil {
			return false, r.err
		}
		svc.SetWatches(c.w, rel, l)
		c.send(frame(xid, svc.LastZxid(), coord.OK, nil))
	case opAddWatch:
		p, mode := r.string(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		err := svc.AddWatch(cl, p, coord.WatchMode(mode))
		// ZooKeeper answers an ErrorResponse holding 0.
		c.reply(xid, svc.LastZxid(), err, func(w *writer) { w.int32(0) })
	case opCheckWatches, opRemoveWatches:
		p, typ := r.string(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		err := svc.RemoveWatches(cl, p, coord.WatcherType(typ), op == opRemoveWatches)
		c.reply(xid, svc.LastZxid(), err, nil)
	case opCreate, opCreate2, opCreateContainer, opCreateTTL:
		create := readCreate(op, r)
		if r.err != nil {
			return false, r.err
		}
		c.write(xid, create, func(res coord.Result) func(w *writer) {
			return func(w *writer) {
				w.string(res.Path)
				if op != opCreate {
					w.stat(res.Stat)
				}
			}
		})
	case opDelete:
		p, v := r.string(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		c.write(xid, coord.Op{Kind: coord.OpDelete, Path: p, Version: v}, noBody)
	case opSetData:
		p, data, v := r.string(), r.buffer(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		c.write(xid, coord.Op{Kind: coord.OpSetData, Path: p, Data: data, Version: v}, statBody)
	case opSetACL:
		p, acl, v := r.string(), r.acls(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		c.write(xid, coord.Op{Kind: coord.OpSetACL, Path: p, ACL: acl, Version: v}, statBody)
	case opExists, opGetData, opGetChildren, opGetChildren2:
		p, watch := r.string(), r.bool()
		if r.err != nil {
			return false, r.err
		}
		c.read(xid, func(v coord.View) (func(w *writer), error) {
			switch op {
			case opExists:
				st, err := v.Exists(cl, p, watch)
				return func(w *writer) { w.stat(st) }, err
			case opGetData:
				data, st, err := v.Get(cl, p, watch)
				return func(w *writer) { w.buffer(data); w.stat(st) }, err
			}
			kids, st, err := v.Children(cl, p, watch)
			return func(w *writer) {
				w.strings(kids)
				if op == opGetChildren2 {
					w.stat(st)
				}
			}, err
		})
	case opGetACL:
		p := r.string()
		if r.err != nil {
			return false, r.err
		}
		c.read(xid, func(v coord.View) (func(w *writer), error) {
			acl, st, err := v.ACL(cl, p)
			return func(w *writer) { w.acls(acl); w.stat(st) }, err
		})
	case opCheck:
		p, ver := r.string(), r.int32()
		if r.err != nil {
			return false, r.err
		}
		c.read(xid, func(v coord.View) (func(w *writer), error) { return nil, v.Check(cl, p, ver) })
	case opSync:
		p := r.string()
		if r.err != nil {
			return false, r.err
		}
		zxid, err := svc.Sync(c.srv.ctx)
		c.reply(xid, zxid, err, func(w *writer) { w.string(p) })
	case opGetEphemerals:
		prefix := r.string()
		if r.err != nil {
			return false, r.err
		}
		c.read(xid, func(v coord.View) (func(w *writer), error) {
			eph, err := v.Ephemerals(cl, prefix)
			return func(w *writer) { w.strings(eph) }, err
		})
	case opGetAllChildren:
		p := r.string()
		if r.err != nil {
			return false, r.err
		}
		c.read(xid, func(v coord.View) (func(w *writer), error) {
			n, err := v.Descendants(cl, p)
			return func(w *writer) { w.int32(int32(n)) }, err
		})
	case opMulti:
		return false, c.multi(xid, r)
	case opMultiRead:
		return false, c.multiRead(xid, r)
	case opClose:
		// Detach first: the close would otherwise end this connection before its reply.
		svc.Detach(c.w)
		err := svc.CloseSession(c.srv.ctx, c.session)
		c.reply(xid, svc.LastZxid(), err, nil)
		return true, nil
	default:
		c.send(frame(xid, svc.LastZxid(), coord.Unimplemented, nil))
	}
	return false, nil
}

// readCreate decodes a create request of type op: create and create2 carry the mode in their
// flags, createContainer is a container whatever its flags, and createTTL a TTL node's TTL.
func readCreate(op int32, r *reader) coord.Op {
	create := coord.Op{Kind: coord.OpCreate, Path: r.string(), Data: r.buffer(), ACL: r.acls(), Mode: coord.Mode(r.int32())}
	switch op {
	case opCreate, opCreate2:
		if create.Mode == coord.Container {
			create.Mode = coord.Persistent // ZooKeeper logs a plain create as such, whatever its flags
		}
	case opCreateContainer:
		create.Mode = coord.Container
	case opCreateTTL:
		switch ttl := r.int64(); {
		case create.Mode == coord.PersistentWithTTL || create.Mode == coord.PersistentSequentialWithTTL:
			create.TTL = ttl
			if ttl == 0 {
				create.TTL = -1 // a TTL the Service refuses, not "none"
			}
		case ttl >= 0:
			create.Mode = -1 // a TTL for a mode without one: BadArguments, as ZooKeeper answers
		}
	}
	return create
}

// multi decodes a MultiTxn (op headers and records up to a done header), runs it and answers
// per-op results: ZooKeeper's header error is OK even when an op failed.
func (c *conn) multi(xid int32, r *reader) error {
	var ops []coord.Op
	var types []int32
	err := r.eachMultiOp(func(typ int32) error {
		var op coord.Op
		switch typ {
		case opCreate, opCreate2, opCreateContainer, opCreateTTL:
			op = readCreate(typ, r)
			if typ != opCreate {
				typ = opCreate2 // ZooKeeper answers containers' and TTL nodes' creates as create2's
			}
		case opDelete:
			op = coord.Op{Kind: coord.OpDelete, Path: r.string(), Version: r.int32()}
		case opSetData:
			op = coord.Op{Kind: coord.OpSetData, Path: r.string(), Data: r.buffer(), Version: r.int32()}
		case opCheck:
			op = coord.Op{Kind: coord.OpCheck, Path: r.string(), Version: r.int32()}
		default:
			return fmt.Errorf("multi op type %d", typ)
		}
		ops = append(ops, op)
		types = append(types, typ)
		return nil
	})
	if err != nil {
		return err
	}
	res, zxid, err := c.srv.svc.Multi(c.srv.ctx, c.caller(), ops)
	if err != nil && len(res) != len(ops) {
		// Not an op's failure (an expired session, a store error): the whole request failed.
		c.reply(xid, c.srv.svc.LastZxid(), err, nil)
		return nil
	}
	c.send(frame(xid, zxid, coord.OK, func(w *writer) {
		for i, rs := range res {
			if err != nil {
				w.multiResult(opError, rs.Err)
				continue
			}
			w.multiResult(types[i], coord.OK)
			switch types[i] {
			case opCreate:
				w.string(rs.Path)
			case opCreate2:
				w.string(rs.Path)
				w.stat(rs.Stat)
			case opSetData:
				w.stat(rs.Stat)
			}
		}
		w.multiEnd()
	}))
	return nil
}

// multiRead answers a multi of getData and getChildren (ZooKeeper's multiRead) from one view:
// each op's result or its own error, never the whole request's.
func (c *conn) multiRead(xid int32, r *reader) error {
	type read struct {
		typ   int32
		path  string
		watch bool
	}
	var reads []read
	err := r.eachMultiOp(func(typ int32) error {
		if typ != opGetData && typ != opGetChildren {
			return fmt.Errorf("multiRead op type %d", typ)
		}
		reads = append(reads, read{typ: typ, path: r.string(), watch: r.bool()})
		return nil
	})
	if err != nil {
		return err
	}
	cl := c.caller()
	c.read(xid, func(v coord.View) (func(w *writer), error) {
		type result struct {
			data []byte
			kids []string
			stat coord.Stat
			err  coord.Code
		}
		results := make([]result, len(reads))
		for i, rd := range reads {
			var err error
			if rd.typ == opGetData {
				results[i].data, results[i].stat, err = v.Get(cl, rd.path, rd.watch)
			} else {
				results[i].kids, _, err = v.Children(cl, rd.path, rd.watch)
			}
			if coord.CodeOf(err) == coord.SystemError {
				return nil, err // not the op's: the service cannot serve
			}
			results[i].err = coord.CodeOf(err)
		}
		return func(w *writer) {
			for i, rs := range results {
				if rs.err != coord.OK {
					w.multiResult(opError, rs.err)
					continue
				}
				w.multiResult(reads[i].typ, coord.OK)
				if reads[i].typ == opGetData {
					w.buffer(rs.data)
					w.stat(rs.stat)
				} else {
					w.strings(rs.kids)
				}
			}
			w.multiEnd()
		}, nil
	})
	return nil
}
