package zkcompat

import (
	"bytes"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// A run is one scenario against one server: its transcript and the sessions it opened.
type run struct {
	tr      *transcript
	server  string
	root    string // the scenario's own subtree, so scenarios share a server
	clients []*client
}

// open starts a session named name; proxied puts a proxy between it and the server.
func (r *run) open(name string, timeout time.Duration, proxied bool) *client {
	c, err := connect(r.tr, name, r.server, timeout, proxied)
	if err != nil {
		r.tr.fail("%s: connecting: %v", name, err)
		panic(errAbort)
	}
	r.clients = append(r.clients, c)
	return c
}

func (r *run) path(p string) string { return r.root + p }

var errAbort = fmt.Errorf("scenario aborted")

// scenarios are the scripted workloads, by name. Each runs from a fresh root node of its own.
var scenarios = []struct {
	name string
	run  func(r *run)
}{
	{"nodes-versions-errors", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		a.create(r.path("/a"), []byte("one"), 0, nil)
		a.get(r.path("/a"))
		a.exists(r.path("/a"))
		a.set(r.path("/a"), []byte("two"), 0)
		a.set(r.path("/a"), []byte("three"), 0) // bad version
		a.set(r.path("/a"), []byte("three"), -1)
		a.get(r.path("/a"))
		a.create(r.path("/a"), nil, 0, nil)         // exists
		a.create(r.path("/missing/b"), nil, 0, nil) // no parent
		a.create(r.path("/a/b"), []byte("kid"), 0, nil)
		a.create(r.path("/a/c"), nil, 0, nil)
		a.children(r.path("/a"))
		a.get(r.path("/a"))
		a.delete(r.path("/a"), -1)  // not empty
		a.delete(r.path("/a/b"), 7) // bad version
		a.delete(r.path("/a/b"), 0)
		a.delete(r.path("/a/zzz"), -1) // no node
		a.children(r.path("/a"))
		a.get(r.path("/a"))
		a.exists(r.path("/a/b"))
		a.get(r.path("/a/b"))
		a.children(r.path("/nope"))
		a.create(r.path("/a/empty"), []byte{}, 0, nil)
		a.get(r.path("/a/empty"))
		a.sync(r.path("/a"))
	}},
	{"sequential", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		a.create(r.path("/q"), nil, 0, nil)
		for i := range 3 {
			a.create(r.path("/q/job-"), []byte(fmt.Sprint(i)), zk.FlagSequence, nil)
		}
		a.create(r.path("/q/other-"), nil, zk.FlagSequence, nil)
		a.create(r.path("/q/eph-"), nil, zk.FlagEphemeralSequential, nil)
		a.delete(r.path("/q/job-0000000001"), -1)
		a.create(r.path("/q/job-"), nil, zk.FlagSequence, nil)
		a.create(r.path("/q/plain"), nil, 0, nil)
		a.create(r.path("/q/job-"), nil, zk.FlagSequence, nil)
		a.children(r.path("/q"))
		a.get(r.path("/q"))
		a.get(r.path("/q/eph-0000000004"))
	}},
	{"ephemerals", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		b := r.open("B", 10*time.Second, false)
		a.create(r.path("/e"), nil, 0, nil)
		a.create(r.path("/e/x"), []byte("mine"), zk.FlagEphemeral, nil)
		b.get(r.path("/e/x"))
		a.get(r.path("/e/x"))
		a.create(r.path("/e/x/child"), nil, 0, nil) // no children for ephemerals
		w := b.existsW(r.path("/e/x"))
		cw := b.childrenW(r.path("/e"))
		a.conn.Close()
		r.tr.add("A closed its session")
		w.fired()
		cw.fired()
		b.exists(r.path("/e/x"))
		b.children(r.path("/e"))
		b.get(r.path("/e"))
	}},
	{"watches", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		b := r.open("B", 10*time.Second, false)
		a.create(r.path("/w"), []byte("v0"), 0, nil)
		dw := b.getW(r.path("/w"))
		a.set(r.path("/w"), []byte("v1"), -1)
		b.get(r.path("/w"))
		dw.firedBefore("the read of v1")
		a.set(r.path("/w"), []byte("v2"), -1) // the watch was one-time
		dw.silent()
		ew := b.existsW(r.path("/w2"))
		a.create(r.path("/w2"), nil, 0, nil)
		ew.fired()
		cw := b.childrenW(r.path("/w"))
		a.create(r.path("/w/k"), nil, 0, nil)
		cw.fired()
		dw2 := b.getW(r.path("/w/k"))
		cw2 := b.childrenW(r.path("/w"))
		a.delete(r.path("/w/k"), -1)
		dw2.fired()
		cw2.fired()
		ew2 := b.existsW(r.path("/w2"))
		a.set(r.path("/w2"), []byte("x"), -1)
		ew2.fired()
		b.get(r.path("/w/k"))
		// A watch set by the writer itself fires too.
		own := a.getW(r.path("/w2"))
		a.set(r.path("/w2"), []byte("y"), -1)
		own.fired()
		// A child watch does not fire on a child's data change.
		a.create(r.path("/w/d"), nil, 0, nil)
		cw3 := b.childrenW(r.path("/w"))
		a.set(r.path("/w/d"), []byte("changed"), -1)
		cw3.silent()
	}},
	{"multi", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		a.create(r.path("/m"), nil, 0, nil)
		acl := zk.WorldACL(zk.PermAll)
		a.multi(
			&zk.CreateRequest{Path: r.path("/m/a"), Data: []byte("a"), Acl: acl},
			&zk.CreateRequest{Path: r.path("/m/b"), Data: []byte("b"), Acl: acl},
			&zk.SetDataRequest{Path: r.path("/m/a"), Data: []byte("a2"), Version: 0},
			&zk.CheckVersionRequest{Path: r.path("/m/b"), Version: 0},
		)
		a.children(r.path("/m"))
		a.get(r.path("/m/a"))
		// Fails at the third op: nothing of it applies.
		a.multi(
			&zk.CreateRequest{Path: r.path("/m/c"), Acl: acl},
			&zk.SetDataRequest{Path: r.path("/m/a"), Data: []byte("lost"), Version: -1},
			&zk.DeleteRequest{Path: r.path("/m/none"), Version: -1},
			&zk.CreateRequest{Path: r.path("/m/d"), Acl: acl},
		)
		a.children(r.path("/m"))
		a.get(r.path("/m/a"))
		a.multi(&zk.CheckVersionRequest{Path: r.path("/m/a"), Version: 0}, &zk.DeleteRequest{Path: r.path("/m/b"), Version: -1})
		a.multi(&zk.CheckVersionRequest{Path: r.path("/m/a"), Version: 1}, &zk.DeleteRequest{Path: r.path("/m/b"), Version: -1},
			&zk.CreateRequest{Path: r.path("/m/s-"), Acl: acl, Flags: zk.FlagSequence})
		a.children(r.path("/m"))
		a.get(r.path("/m"))
	}},
	{"acl-digest", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		b := r.open("B", 10*time.Second, false)
		a.create(r.path("/acl"), nil, 0, nil)
		a.addAuth("ann", "secret")
		a.create(r.path("/acl/private"), []byte("hers"), 0, zk.DigestACL(zk.PermAll, "ann", "secret"))
		a.create(r.path("/acl/readonly"), []byte("ro"), 0, zk.WorldACL(zk.PermRead))
		a.get(r.path("/acl/private"))
		b.get(r.path("/acl/private"))
		b.set(r.path("/acl/readonly"), []byte("no"), -1)
		b.get(r.path("/acl/readonly"))
		b.exists(r.path("/acl/private")) // exists needs no permission
		b.addAuth("ann", "wrong")
		b.get(r.path("/acl/private"))
		b.addAuth("ann", "secret")
		b.get(r.path("/acl/private"))
		b.set(r.path("/acl/private"), []byte("both"), -1)
		a.create(r.path("/acl/readonly/kid"), nil, 0, nil) // no CREATE permission
		a.delete(r.path("/acl/readonly"), -1)
		b.children(r.path("/acl"))
	}},
	{"large-data", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		big := bytes.Repeat([]byte("0123456789abcdef"), 1_000_000/16)
		a.create(r.path("/big"), big, 0, nil)
		a.get(r.path("/big"))
		a.set(r.path("/big"), big[:500_000], -1)
		a.get(r.path("/big"))
	}},
	{"session-expiry", func(r *run) {
		a := r.open("A", time.Second, true)
		b := r.open("B", 10*time.Second, false)
		a.create(r.path("/s"), nil, 0, nil)
		a.create(r.path("/s/lease"), []byte("held"), zk.FlagEphemeral, nil)
		w := b.existsW(r.path("/s/lease"))
		a.proxy.partition()
		r.tr.add("A partitioned")
		w.fired()
		b.exists(r.path("/s/lease"))
		a.proxy.heal()
		if err := a.awaitState(zk.StateExpired); err != nil {
			r.tr.add("A: %v", err)
		} else {
			r.tr.add("A saw its session expire")
		}
		b.children(r.path("/s"))
	}},
	{"reconnect", func(r *run) {
		a := r.open("A", 8*time.Second, true)
		a.create(r.path("/r"), nil, 0, nil)
		a.create(r.path("/r/eph"), nil, zk.FlagEphemeral, nil)
		id := a.conn.SessionID()
		a.proxy.drop()
		r.tr.add("A's connection dropped")
		if err := a.awaitState(zk.StateHasSession); err != nil {
			r.tr.add("A: %v", err)
		}
		r.tr.add("A session kept: %v", a.conn.SessionID() == id)
		a.get(r.path("/r/eph"))
		a.set(r.path("/r/eph"), []byte("after"), 0)
	}},
	{"containers-and-ttl", func(r *run) {
		a := r.open("A", 10*time.Second, false)
		box, never, ttl := r.path("/box"), r.path("/never"), r.path("/ttl")
		a.createContainer(box)
		a.createContainer(never) // never given a child: it stays
		a.get(box)
		a.create(box+"/kid", nil, 0, nil)
		a.create(box+"/kid/grandkid", nil, 0, nil)             // a container's child's child is no concern of it
		a.create(r.path("/plain"), nil, zk.FlagContainer, nil) // a container flag on a plain create: a plain node
		a.get(r.path("/plain"))
		a.createTTL(ttl, zk.FlagTTL, 300*time.Millisecond)
		a.createTTL(ttl+"-parent", zk.FlagTTL, 300*time.Millisecond)
		a.create(ttl+"-parent/kid", nil, 0, nil) // a TTL node with a child stays
		a.get(ttl)
		a.createTTL(r.path("/seq-"), zk.FlagPersistentSequentialWithTTL, time.Hour)
		a.createTTL(r.path("/zero"), zk.FlagTTL, 0)
		a.createTTL(r.path("/ephemeral-ttl"), zk.FlagEphemeral, time.Second)
		w := a.existsW(ttl)
		w.fired()
		a.delete(box+"/kid/grandkid", -1)
		a.exists(box)
		w = a.existsW(box)
		a.delete(box+"/kid", -1)
		w.fired()
		a.exists(box)
		a.exists(never)
		a.exists(ttl + "-parent")
		a.children(r.path(""))
	}},
}
