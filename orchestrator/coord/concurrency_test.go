package coord

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/linearizability"
)

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
		callers := make([]Caller, workers)
		for w := range workers {
			callers[w] = anyone(t, services[w%len(services)])
		}
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, caller := services[w%len(services)], callers[w]
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range opsEach {
					in := linearizability.ZnodeIn{Path: paths[rng.IntN(len(paths))], Version: int32(rng.IntN(4)) - 1, Data: fmt.Sprintf("w%d-%d", w, i)}
					var out linearizability.ZnodeOut
					var zxid int64
					call := time.Since(start).Nanoseconds()
					switch k := rng.IntN(10); {
					case k < 2:
						in.Kind = "create"
						in.Version = 0
						var err error
						_, zxid, err = s.Write(ctx, caller, Op{Kind: OpCreate, Path: in.Path, Data: []byte(in.Data), ACL: OpenACLUnsafe})
						out.Code = int32(CodeOf(err))
					case k < 6:
						in.Kind = "set"
						r, z, err := s.Write(ctx, caller, Op{Kind: OpSetData, Path: in.Path, Data: []byte(in.Data), Version: in.Version})
						out.Code, out.Version, zxid = int32(CodeOf(err)), r.Stat.Version, z
					case k < 7:
						in.Kind = "delete"
						in.Data = ""
						var err error
						_, zxid, err = s.Write(ctx, caller, Op{Kind: OpDelete, Path: in.Path, Version: in.Version})
						out.Code = int32(CodeOf(err))
					default:
						in.Kind, in.Version, in.Data = "read", 0, ""
						if _, err := s.Sync(ctx); err != nil {
							t.Error(err)
							return
						}
						var data []byte
						var st Stat
						var err error
						s.View(func(v View) { data, st, err = v.Get(Caller{}, in.Path, false) })
						out = linearizability.ZnodeOut{Code: int32(CodeOf(err)), Version: st.Version, Data: string(data)}
					}
					ret := time.Since(start).Nanoseconds()
					if out.Code == int32(SystemError) {
						t.Errorf("%+v: a store error", in)
						return
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
					if zxid != 0 {
						if prev, dup := zxids[zxid]; dup {
							t.Errorf("zxid %d given to two writes: %s and %s", zxid, prev, in.Path)
						}
						zxids[zxid] = in.Path
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		linearizability.Check(t, linearizability.ZnodeModel, history)

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
