package coord

import (
	"slices"
	"sort"
)

// watchKind is one of a Service's tables of watches, each by path. The one-time kinds go when
// they fire; the persistent kinds stay until removed or their connection ends. As in ZooKeeper,
// one connection has at most one watch of each kind on a path and hears an event once however
// many of its watches the event triggers.
type watchKind int

const (
	dataWatch       watchKind = iota // one-time: getData and exists
	childWatch                       // one-time: getChildren
	persistentWatch                  // AddWatch(PersistentWatch): every event of the path
	recursiveWatch                   // AddWatch(PersistentRecursiveWatch): the path's and its subtree's, but NodeChildrenChanged
	watchKinds
)

// Watcher is one connection's attachment to its session: where that session's watch events go.
type Watcher struct {
	session int64
	notify  func(Event) // called with the replica locked, in zxid order: must not block
	closed  func()      // the session ended, or attached elsewhere: must not block
	paths   [watchKinds]map[string]bool
	auth    []ID // what the connection authenticated as: an event it may not read is not sent
}

func newWatcher(session int64, notify func(Event), closed func()) *Watcher {
	w := &Watcher{session: session, notify: notify, closed: closed}
	for k := range w.paths {
		w.paths[k] = map[string]bool{}
	}
	return w
}

// Authenticate records the ids w's connection authenticated as (setAuth): events about nodes
// they may not READ are not delivered to it, as ZooKeeper 3.9 filters them.
func (s *Service) Authenticate(w *Watcher, ids []ID) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	w.auth = slices.Clone(ids)
}

func (v View) watch(k watchKind, w *Watcher, p string) {
	if w == nil {
		return
	}
	v.s.watchMu.Lock()
	defer v.s.watchMu.Unlock()
	if v.s.attached[w.session] != w {
		return // detached: its connection is gone
	}
	if v.s.watches[k][p] == nil {
		v.s.watches[k][p] = map[*Watcher]bool{}
	}
	v.s.watches[k][p][w] = true
	w.paths[k][p] = true
}

// unwatchLocked removes w's watch of kind k on p.
func (s *Service) unwatchLocked(k watchKind, w *Watcher, p string) {
	delete(w.paths[k], p)
	delete(s.watches[k][p], w)
	if len(s.watches[k][p]) == 0 {
		delete(s.watches[k], p)
	}
}

// fire delivers events to the watches they trigger and ends a closed session's attachment.
// It runs with the replica write-locked, so deliveries are in zxid order and precede any reply
// computed on the new state.
func (s *Service) fire(events []Event, t *txn) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for _, ev := range events {
		got := map[*Watcher]bool{}
		take := func(k watchKind) {
			for w := range s.watches[k][ev.Path] {
				got[w] = true
				delete(w.paths[k], ev.Path)
			}
			delete(s.watches[k], ev.Path)
		}
		switch ev.Type {
		case NodeCreated, NodeDataChanged:
			take(dataWatch)
		case NodeDeleted:
			take(dataWatch)
			take(childWatch)
		case NodeChildrenChanged:
			take(childWatch)
		}
		for w := range s.watches[persistentWatch][ev.Path] {
			got[w] = true
		}
		if ev.Type != NodeChildrenChanged && len(s.watches[recursiveWatch]) > 0 {
			for p := ev.Path; ; p = parentOf(p) {
				for w := range s.watches[recursiveWatch][p] {
					got[w] = true
				}
				if p == "/" {
					break
				}
			}
		}
		// One event per watcher however many of its watches it fires, in a stable order. A
		// one-time watch that may not see the event is used up all the same, as in ZooKeeper.
		ws := make([]*Watcher, 0, len(got))
		for w := range got {
			if allowed(ev.acl, w.auth, PermRead) {
				ws = append(ws, w)
			}
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].session < ws[j].session })
		for _, w := range ws {
			w.notify(ev)
		}
	}
	if t.Close {
		if w := s.attached[t.Session]; w != nil {
			s.detachLocked(w)
			w.closed()
		}
	}
}

// AddWatch sets a persistent watch on p, or with PersistentRecursiveWatch on p and every node
// under it (ZooKeeper's addWatch). p need not exist. The watch stays until RemoveWatches or
// the connection ends; a reconnected client sets it again (SetWatches).
func (s *Service) AddWatch(c Caller, p string, mode WatchMode) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := View{s}
	if err := v.check(c); err != nil {
		return err
	}
	if err := validatePath(p, false); err != nil {
		return err
	}
	switch mode {
	case PersistentWatch:
		v.watch(persistentWatch, c.W, p)
	case PersistentRecursiveWatch:
		v.watch(recursiveWatch, c.W, p)
	default:
		return errf(BadArguments, p, "watch mode %d", mode)
	}
	return nil
}

// RemoveWatches removes the caller's watches of type typ on p (ZooKeeper's removeWatches) or,
// with remove false, only checks that there is one (checkWatches). NoWatcher when there is none.
func (s *Service) RemoveWatches(c Caller, p string, typ WatcherType, remove bool) error {
	var kinds []watchKind
	switch typ {
	case ChildWatches:
		kinds = []watchKind{childWatch}
	case DataWatches:
		kinds = []watchKind{dataWatch}
	case AnyWatches:
		kinds = []watchKind{dataWatch, childWatch, persistentWatch, recursiveWatch}
	case PersistentWatches:
		kinds = []watchKind{persistentWatch}
	case PersistentRecursiveWatches:
		kinds = []watchKind{recursiveWatch}
	default:
		return errf(BadArguments, p, "watcher type %d", typ)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := (View{s}).check(c); err != nil {
		return err
	}
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	found := false
	for _, k := range kinds {
		if c.W == nil || !c.W.paths[k][p] {
			continue
		}
		found = true
		if remove {
			s.unwatchLocked(k, c.W, p)
		}
	}
	if !found {
		return errf(NoWatcher, p, "no watch of type %d", typ)
	}
	return nil
}

// WatchLists are a reconnecting client's watches, by kind: ZooKeeper's SetWatches2.
type WatchLists struct {
	Data, Exist, Child    []string // one-time
	Persistent, Recursive []string
}

// SetWatches re-registers a reconnected client's watches as ZooKeeper does: a one-time watch
// whose event the client missed since relZxid fires now, the others are set; persistent and
// recursive watches are set again, without what they missed (ZooKeeper does not replay it).
func (s *Service) SetWatches(w *Watcher, relZxid int64, l WatchLists) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := View{s}
	var now []Event
	for _, p := range l.Data {
		switch n := s.t.nodes[p]; {
		case n == nil:
			now = append(now, Event{Type: NodeDeleted, Path: p})
		case n.stat.Mzxid > relZxid:
			now = append(now, Event{Type: NodeDataChanged, Path: p})
		default:
			v.watch(dataWatch, w, p)
		}
	}
	for _, p := range l.Exist {
		if s.t.nodes[p] != nil {
			now = append(now, Event{Type: NodeCreated, Path: p})
		} else {
			v.watch(dataWatch, w, p)
		}
	}
	for _, p := range l.Child {
		switch n := s.t.nodes[p]; {
		case n == nil:
			now = append(now, Event{Type: NodeDeleted, Path: p})
		case n.stat.Pzxid > relZxid:
			now = append(now, Event{Type: NodeChildrenChanged, Path: p})
		default:
			v.watch(childWatch, w, p)
		}
	}
	for _, p := range l.Persistent {
		v.watch(persistentWatch, w, p)
	}
	for _, p := range l.Recursive {
		v.watch(recursiveWatch, w, p)
	}
	for _, ev := range now {
		ev.Zxid = s.t.zxid
		w.notify(ev)
	}
}

// Detach ends a connection's attachment and drops its watches (a reconnect sets them again).
func (s *Service) Detach(w *Watcher) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.detachLocked(w)
}

func (s *Service) detachLocked(w *Watcher) {
	for k := range watchKinds {
		for p := range w.paths[k] {
			s.unwatchLocked(k, w, p)
		}
	}
	if s.attached[w.session] == w {
		delete(s.attached, w.session)
	}
}
