package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// Snapshots bound what a starting server replays and what the log keeps. A snapshot is the
// replica's whole state at a zxid S, written as parts and then a manifest (so a manifest names
// only whole parts), and the "latest" row points at the newest one. Compaction then turns the
// log entries before S (less a margin) into stubs: a stub keeps its row, so no writer can ever
// claim that zxid again, and tells a server that reads it, lagging that far behind, to jump to
// the latest snapshot instead.
const snapPartition = "zk/snap"

// errCompacted is what reading a stub returns.
var errCompacted = errors.New("coord: log entry compacted into a snapshot")

type snapNode struct {
	Path    string `json:"p"`
	Data    []byte `json:"d"`
	ACL     []ACL  `json:"a"`
	Stat    Stat   `json:"s"`
	Created int32  `json:"c,omitempty"`
}

type snapSession struct {
	ID        int64             `json:"i"`
	Passwd    []byte            `json:"p"`
	TimeoutMs int32             `json:"t"`
	Seq       int64             `json:"q,omitempty"`
	Outcomes  map[int64]Outcome `json:"o,omitempty"`
}

type snapState struct {
	Zxid     int64         `json:"z"`
	Nodes    []snapNode    `json:"n"`
	Sessions []snapSession `json:"s"`
}

// export captures the tree in a deterministic order: two servers snapshotting the same zxid
// write the same bytes.
func (t *tree) export() *snapState {
	st := &snapState{Zxid: t.zxid}
	for _, p := range slices.Sorted(maps.Keys(t.nodes)) {
		n := t.nodes[p]
		st.Nodes = append(st.Nodes, snapNode{Path: p, Data: n.data, ACL: n.acl, Stat: n.stat, Created: n.created})
	}
	for _, id := range slices.Sorted(maps.Keys(t.sessions)) {
		s := t.sessions[id]
		st.Sessions = append(st.Sessions, snapSession{ID: id, Passwd: s.passwd, TimeoutMs: s.timeoutMs, Seq: s.seq, Outcomes: s.outcomes})
	}
	return st
}

// restore rebuilds a tree from a snapshot, refusing one whose nodes do not form a tree.
func restore(st *snapState) (*tree, error) {
	t := &tree{nodes: map[string]*znode{}, sessions: map[int64]*session{}, zxid: st.Zxid}
	for _, s := range st.Sessions {
		t.sessions[s.ID] = &session{passwd: s.Passwd, timeoutMs: s.TimeoutMs, ephemerals: map[string]bool{}, seq: s.Seq, outcomes: s.Outcomes}
	}
	for _, sn := range st.Nodes {
		t.nodes[sn.Path] = &znode{data: sn.Data, acl: sn.ACL, stat: sn.Stat, created: sn.Created, children: map[string]bool{}}
	}
	for p, n := range t.nodes {
		if p != "/" {
			parent := t.nodes[parentOf(p)]
			if parent == nil {
				return nil, fmt.Errorf("coord: snapshot %d: %s has no parent", st.Zxid, p)
			}
			parent.children[path.Base(p)] = true
		}
		if o := n.stat.EphemeralOwner; sessionOwned(o) {
			s := t.sessions[o]
			if s == nil {
				return nil, fmt.Errorf("coord: snapshot %d: ephemeral %s of a session it does not hold", st.Zxid, p)
			}
			s.ephemerals[p] = true
		}
	}
	if t.nodes["/"] == nil {
		return nil, fmt.Errorf("coord: snapshot %d has no root", st.Zxid)
	}
	return t, nil
}

func snapKey(sort string) store.Key { return store.Key{Partition: snapPartition, Sort: sort} }

func snapName(zxid int64) string { return fmt.Sprintf("%020d", zxid) }

// Snapshot writes the replica's state at its zxid and points "latest" at it (when it is newer
// than the latest). It returns the snapshot's zxid.
func (s *Service) Snapshot(ctx context.Context) (int64, error) {
	s.applyMu.Lock()
	s.mu.RLock()
	st := s.t.export()
	s.mu.RUnlock()
	s.applyMu.Unlock()
	if st.Zxid == 0 {
		return 0, nil
	}
	enc, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256(enc)
	name := snapName(st.Zxid)
	parts, err := s.putParts(ctx, snapPartition, name, enc)
	if err != nil {
		return 0, err
	}
	// Another server may have written this zxid's snapshot already: the same bytes.
	if _, err := s.tbl.Update(ctx, snapKey(name), store.RowAbsent(), store.Update{
		store.SetAttr(store.Attr("parts"), parts), store.SetAttr(store.Attr("sha256"), hex.EncodeToString(sum[:])),
	}); err != nil {
		return 0, err
	}
	if _, err := s.tbl.Update(ctx, snapKey("latest"),
		store.Or(store.RowAbsent(), store.Compare(store.Attr("z"), store.Lt, st.Zxid)),
		store.Update{store.SetAttr(store.Attr("z"), st.Zxid)}); err != nil {
		return 0, err
	}
	return st.Zxid, nil
}

// latestSnapshot returns the zxid the "latest" row points at, 0 if there is none.
func (s *Service) latestSnapshot(ctx context.Context) (int64, error) {
	a, found, err := s.tbl.Get(ctx, snapKey("latest"))
	if err != nil || !found {
		return 0, err
	}
	z, _ := a["z"].(int64)
	return z, nil
}

// loadSnapshot reads snapshot zxid, failing closed on a missing part or a checksum mismatch.
func (s *Service) loadSnapshot(ctx context.Context, zxid int64) (*tree, error) {
	name := snapName(zxid)
	m, found, err := s.tbl.Get(ctx, snapKey(name))
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("coord: snapshot %d is named latest but has no manifest", zxid)
	}
	parts, _ := m["parts"].(int64)
	want, _ := m["sha256"].(string)
	enc, err := s.getParts(ctx, snapPartition, name, parts)
	if err != nil {
		return nil, fmt.Errorf("coord: snapshot %d: %w", zxid, err)
	}
	if sum := sha256.Sum256(enc); hex.EncodeToString(sum[:]) != want {
		return nil, fmt.Errorf("coord: snapshot %d does not match its checksum", zxid)
	}
	var st snapState
	if err := json.Unmarshal(enc, &st); err != nil {
		return nil, fmt.Errorf("coord: snapshot %d: %w", zxid, err)
	}
	if st.Zxid != zxid {
		return nil, fmt.Errorf("coord: snapshot %d holds zxid %d", zxid, st.Zxid)
	}
	return restore(&st)
}

// Compact turns the log entries before the latest snapshot, but the last keep of them, into
// stubs, and deletes the parts or objects of split ones and the snapshots older than the
// latest. It returns how many entries it compacted.
func (s *Service) Compact(ctx context.Context, keep int64) (int, error) {
	latest, err := s.latestSnapshot(ctx)
	if err != nil || latest == 0 {
		return 0, err
	}
	a, _, err := s.tbl.Get(ctx, snapKey("compacted"))
	if err != nil {
		return 0, err
	}
	done, _ := a["z"].(int64)
	n := 0
	for z := done + 1; z < latest-keep; z++ {
		e, found, err := s.tbl.Get(ctx, txnKey(z))
		if err != nil {
			return n, err
		}
		if !found {
			return n, fmt.Errorf("coord: log entry %d, before snapshot %d, is missing", z, latest)
		}
		if _, err := s.tbl.Update(ctx, txnKey(z), store.RowExists(), store.Update{
			store.SetAttr(store.Attr("compacted"), true), store.RemoveAttr(store.Attr("t")),
			store.RemoveAttr(store.Attr("blob")), store.RemoveAttr(store.Attr("parts")),
			store.RemoveAttr(store.Attr("obj")), store.RemoveAttr(store.Attr("sha256")),
		}); err != nil {
			return n, err
		}
		if blob, ok := e["blob"].(string); ok {
			parts, _ := e["parts"].(int64)
			if err := s.deleteParts(ctx, blobPartition, blob, parts); err != nil {
				return n, err
			}
		}
		n++
		if _, err := s.tbl.Update(ctx, snapKey("compacted"), store.Or(store.RowAbsent(), store.Compare(store.Attr("z"), store.Lt, z)),
			store.Update{store.SetAttr(store.Attr("z"), z)}); err != nil {
			return n, err
		}
	}
	// The objects of compacted entries, and the orphans of appends that lost those zxids (a
	// crash between a stub and its object's deletion leaves one too).
	if s.blobs != nil {
		upTo := latest - keep - 1
		var dead []string
		if err := s.blobs.List(ctx, s.objPrefix, func(key string) error {
			if z, ok := objectZxid(s.objPrefix, key); ok && z <= upTo {
				dead = append(dead, key)
			}
			return nil
		}); err != nil {
			return n, err
		}
		for _, key := range dead {
			if err := s.blobs.Delete(ctx, key); err != nil {
				return n, err
			}
		}
	}
	// Older snapshots: their parts and manifests.
	rows, err := s.tbl.Scan(ctx, snapPartition, store.ScanOptions{})
	if err != nil {
		return n, err
	}
	for _, r := range rows {
		if len(r.Key.Sort) >= 20 && r.Key.Sort[:20] < snapName(latest) {
			if _, err := s.tbl.Delete(ctx, r.Key, store.Always()); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// jump replaces the replica with the latest snapshot, which must reach past next (a stub was
// read there), and fires what the skipped transactions would have fired: ZooKeeper's answer to
// a reconnecting client's watches (SetWatches), by comparing zxids.
func (s *Service) jump(ctx context.Context, next int64) error {
	latest, err := s.latestSnapshot(ctx)
	if err != nil {
		return err
	}
	if latest < next {
		return fmt.Errorf("coord: log entry %d is compacted but the latest snapshot is %d", next, latest)
	}
	t, err := s.loadSnapshot(ctx, latest)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.t
	s.t, s.base = t, latest
	s.watchMu.Lock()
	events := skippedEvents(old, t, s.watches)
	var ended []*Watcher
	for id, w := range s.attached {
		if t.sessions[id] == nil {
			ended = append(ended, w)
		}
	}
	s.watchMu.Unlock()
	s.fire(events, &txn{})
	s.watchMu.Lock()
	for _, w := range ended {
		s.detachLocked(w)
	}
	s.watchMu.Unlock()
	for _, w := range ended {
		w.closed()
	}
	return nil
}

// skippedEvents is what the transactions from old to now would have fired on the watched
// paths, coalesced per node (a reconnect's answer): sorted by path, then type.
func skippedEvents(old, now *tree, watches [watchKinds]map[string]map[*Watcher]bool) []Event {
	type change struct {
		typ  EventType
		path string
	}
	seen := map[change]bool{}
	var events []Event
	add := func(typ EventType, p string, n *znode) {
		if !seen[change{typ, p}] {
			seen[change{typ, p}] = true
			events = append(events, Event{Type: typ, Path: p, Zxid: now.zxid, acl: n.acl})
		}
	}
	data := func(p string) {
		was, is := old.nodes[p], now.nodes[p]
		switch {
		case is == nil && was != nil:
			add(NodeDeleted, p, was)
		case is != nil && was == nil:
			add(NodeCreated, p, is)
		case is != nil && is.stat.Mzxid > old.zxid:
			add(NodeDataChanged, p, is)
		}
	}
	child := func(p string) {
		switch was, is := old.nodes[p], now.nodes[p]; {
		case is == nil && was != nil:
			add(NodeDeleted, p, was)
		case is != nil && is.stat.Pzxid > old.zxid:
			add(NodeChildrenChanged, p, is)
		}
	}
	for p := range watches[dataWatch] {
		data(p)
	}
	for p := range watches[childWatch] {
		child(p)
	}
	for p := range watches[persistentWatch] {
		data(p)
		child(p)
	}
	for p := range watches[recursiveWatch] {
		for _, nodes := range []map[string]*znode{old.nodes, now.nodes} {
			for q := range nodes {
				if q == p || p == "/" || strings.HasPrefix(q, p+"/") {
					data(q)
				}
			}
		}
	}
	slices.SortFunc(events, func(a, b Event) int {
		if a.Path != b.Path {
			return strings.Compare(a.Path, b.Path)
		}
		return int(a.Type - b.Type)
	})
	return events
}
