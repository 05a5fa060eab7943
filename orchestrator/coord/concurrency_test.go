package coord

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/linearizability"
)

// znodeIn is a history entry's input: one op on one znode.
type znodeIn struct {
	kind    string // create, set, delete, read
	path    string
	version int32
	data    string
}

// znodeOut is its outcome; a read also reports what it saw.
type znodeOut struct {
	code    Code
	exists  bool
	version int32
	data    string
}

type znodeState struct {
	exists  bool
	version int32
	data    string
}

// znodeModel is a map of znodes, partitioned by path: versioned data that conditional sets and
// deletes must see exactly.
var znodeModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			p := o.Input.(znodeIn).path
			by[p] = append(by[p], o)
		}
		keys := make([]string, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return znodeState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(znodeState), input.(znodeIn), output.(znodeOut)
		switch in.kind {
		case "read":
			if !s.exists {
				return out.code == NoNode, s
			}
			return out.code == OK && out.version == s.version && out.data == s.data, s
		case "create":
			if s.exists {
				return out.code == NodeExists, s
			}
			return out.code == OK, znodeState{exists: true, data: in.data}
		case "set":
			switch {
			case !s.exists:
				return out.code == NoNode, s
			case in.version != -1 && in.version != s.version:
				return out.code == BadVersion, s
			}
			return out.code == OK && out.version == s.version+1, znodeState{exists: true, version: s.version + 1, data: in.data}
		default: // delete
			switch {
			case !s.exists:
				return out.code == NoNode, s
			case in.version != -1 && in.version != s.version:
				return out.code == BadVersion, s
			}
			return out.code == OK, znodeState{}
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(znodeIn), output.(znodeOut)
		return fmt.Sprintf("%s(%s v%d %q) -> %v v%d %q", in.kind, in.path, in.version, in.data, out.code, out.version, out.data)
	},
}

// Many goroutines on two Services (two handles on one table, as two processes would have) race
// conditional creates, sets and deletes on a few znodes, with synced reads: every znode's history
// must be linearizable, and the log must hold exactly one entry per zxid, 1..last, each the one
// its writer was told.
func TestConcurrentWritesAreLinearizable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func() *store.Table) {
		ctx := context.Background()
		tbl := open()
		services := []*Service{newService(t, tbl), newService(t, open())}
		const workers, opsEach = 6, 40
		paths := []string{"/k0", "/k1", "/k2"}
		var (
			mu      sync.Mutex
			history []porcupine.Operation
			zxids   = map[int64]string{}
			wg      sync.WaitGroup
		)
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := services[w%len(services)]
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range opsEach {
					in := znodeIn{path: paths[rng.IntN(len(paths))], version: int32(rng.IntN(4)) - 1, data: fmt.Sprintf("w%d-%d", w, i)}
					var out znodeOut
					var zxid int64
					call := time.Since(start).Nanoseconds()
					switch k := rng.IntN(10); {
					case k < 2:
						in.kind = "create"
						in.version = 0
						var err error
						_, zxid, err = s.Write(ctx, Caller{}, Op{Kind: OpCreate, Path: in.path, Data: []byte(in.data), ACL: OpenACLUnsafe})
						out.code = CodeOf(err)
					case k < 6:
						in.kind = "set"
						r, z, err := s.Write(ctx, Caller{}, Op{Kind: OpSetData, Path: in.path, Data: []byte(in.data), Version: in.version})
						out.code, out.version, zxid = CodeOf(err), r.Stat.Version, z
					case k < 7:
						in.kind = "delete"
						in.data = ""
						var err error
						_, zxid, err = s.Write(ctx, Caller{}, Op{Kind: OpDelete, Path: in.path, Version: in.version})
						out.code = CodeOf(err)
					default:
						in.kind, in.version, in.data = "read", 0, ""
						if _, err := s.Sync(ctx); err != nil {
							t.Error(err)
							return
						}
						var data []byte
						var st Stat
						var err error
						s.View(func(v View) { data, st, err = v.Get(Caller{}, in.path, false) })
						out = znodeOut{code: CodeOf(err), version: st.Version, data: string(data)}
					}
					ret := time.Since(start).Nanoseconds()
					if out.code == SystemError {
						t.Errorf("%+v: a store error", in)
						return
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
					if zxid != 0 {
						if prev, dup := zxids[zxid]; dup {
							t.Errorf("zxid %d given to two writes: %s and %s", zxid, prev, in.path)
						}
						zxids[zxid] = in.path
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		linearizability.Check(t, znodeModel, history)

		last, err := services[0].Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tbl.Scan(ctx, txnPartition, store.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(rows)) != last {
			t.Fatalf("%d log rows for last zxid %d", len(rows), last)
		}
		for i, row := range rows {
			if row.Key.Sort != txnKey(int64(i+1)).Sort {
				t.Fatalf("log row %d is %s: a gap or a stray row", i+1, row.Key.Sort)
			}
		}
		for zxid, p := range zxids {
			e, found, err := services[1].readTxn(ctx, zxid)
			if err != nil || !found || len(e.Ops) != 1 || e.Ops[0].Path != p {
				t.Fatalf("log entry %d is not the write on %s its writer was told: %+v %v", zxid, p, e, err)
			}
		}
		t.Logf("%d ops, %d writes applied, last zxid %d", len(history), len(zxids), last)
	})
}
