package logtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ssfkit/ssfkit/adapters/store"
	"github.com/ssfkit/ssfkit/internal/linearizability"
	"github.com/ssfkit/ssfkit/internal/suite"
	"github.com/ssfkit/ssfkit/orchestrator/sharedlog"
)

// logOp is an operation on one color, as the history records it.
type logOp struct {
	kind string // append, read, next, tail, trim
	sn   uint64 // read/next: the SN asked; trim: upTo
	data string // append: the record
}

// logOut is an operation's outcome.
type logOut struct {
	sn      uint64 // append, next, tail: the SN returned
	data    string // read, next: the record
	missing bool   // read: ErrNotFound; next: none
	trimmed bool   // read, next: ErrTrimmed
}

// testLinearizable runs appenders (pausing between reserving and writing; a tenth of their
// appends crash there, leaving holes), readers (Read of a recent SN, ReadNext, CheckTail) and a trimmer on one color, and
// checks the history against a sequential log with porcupine.
func testLinearizable(t suite.T, tbl *store.Table, open opener, o Options) {
	ctx := context.Background()
	setup := open(t, tbl, "acme", nil)
	chk(t).ok(setup.AddColor(ctx, "c", ""))
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		client  atomic.Int32
		highest atomic.Uint64 // the highest SN an append returned, to aim reads and trims
	)
	record := func(id int, in logOp, call time.Time, out logOut) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: int64(time.Since(start) - time.Since(call)), Output: out, Return: int64(time.Since(start))})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for a := range o.Appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := int(client.Add(1))
			rng := rand.New(rand.NewPCG(uint64(a), 7))
			l := open(t, tbl, "acme", func(p string) error {
				if p != sharedlog.FaultReserved {
					return nil
				}
				if rng.IntN(10) == 0 {
					return errCrash
				}
				// A pause between reserving and writing, so readers meet pending SNs.
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				return nil
			})
			for i := range o.Appends {
				data := fmt.Sprintf("a%d.%d", a, i)
				call := time.Now()
				sn, err := l.Append(ctx, "c", []byte(data))
				if errors.Is(err, errCrash) {
					continue // it wrote nothing: not an operation on the log
				}
				if err != nil {
					t.Error(err)
					return
				}
				record(id, logOp{kind: "append", data: data}, call, logOut{sn: sn})
				for h := highest.Load(); sn > h && !highest.CompareAndSwap(h, sn); h = highest.Load() {
				}
			}
		}()
	}
	for r := range o.Readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := int(client.Add(1))
			rng := rand.New(rand.NewPCG(uint64(r), 11))
			l := open(t, tbl, "acme", nil)
			for range o.Reads {
				h := highest.Load()
				target := h + 3 - min(h+2, uint64(rng.IntN(5))) // around the tail, where appends are pending
				call := time.Now()
				var in logOp
				var out logOut
				var err error
				switch rng.IntN(3) {
				case 0:
					in = logOp{kind: "read", sn: max(target, 1)}
					var rec sharedlog.Record
					rec, err = l.Read(ctx, "c", in.sn)
					out.data = string(rec.Data)
				case 1:
					in = logOp{kind: "next", sn: max(target, 1)}
					var rec sharedlog.Record
					var found bool
					rec, found, err = l.ReadNext(ctx, "c", in.sn)
					out.sn, out.data, out.missing = rec.SN, string(rec.Data), !found && err == nil
				default:
					in = logOp{kind: "tail"}
					out.sn, err = l.CheckTail(ctx, "c")
				}
				switch {
				case errors.Is(err, sharedlog.ErrNotFound):
					out.missing = true
				case errors.Is(err, sharedlog.ErrTrimmed):
					out.trimmed = true
				case err != nil:
					t.Error(err)
					return
				}
				record(id, in, call, out)
			}
		}()
	}
	wg.Add(1)
	go func() { // the trimmer: trims behind the tail a few times
		defer wg.Done()
		id := int(client.Add(1))
		l := open(t, tbl, "acme", nil)
		for range 4 {
			time.Sleep(20 * time.Millisecond)
			h := highest.Load()
			if h < 4 {
				continue
			}
			in := logOp{kind: "trim", sn: h - 3}
			call := time.Now()
			if err := l.Trim(ctx, "c", in.sn); err != nil {
				t.Error(err)
				return
			}
			record(id, in, call, logOut{})
		}
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	linearizability.Check(t, logModel, history)
}

// logState is the sequential log: its records (SN -> data, encoded sorted so states compare
// with ==) and its trim point.
type logState struct {
	records string // "sn=data;" in SN order
	trim    uint64
}

func (s logState) decode() map[uint64]string {
	m := map[uint64]string{}
	for _, e := range strings.Split(s.records, ";") {
		if sn, data, ok := strings.Cut(e, "="); ok {
			n, _ := strconv.ParseUint(sn, 10, 64)
			m[n] = data
		}
	}
	return m
}

func encode(m map[uint64]string) string {
	sns := make([]uint64, 0, len(m))
	for sn := range m {
		sns = append(sns, sn)
	}
	sort.Slice(sns, func(i, j int) bool { return sns[i] < sns[j] })
	var b strings.Builder
	for _, sn := range sns {
		fmt.Fprintf(&b, "%d=%s;", sn, m[sn])
	}
	return b.String()
}

// logModel: an append takes an SN above every SN so far; reads see the records; trims only
// move forward; the tail is the last record's SN or the trim point, whichever is later.
var logModel = porcupine.Model{
	Init: func() any { return logState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(logState), input.(logOp), output.(logOut)
		recs := s.decode()
		var last uint64
		for sn := range recs {
			last = max(last, sn)
		}
		switch in.kind {
		case "append":
			if out.sn <= last || out.sn <= s.trim {
				return false, s
			}
			recs[out.sn] = in.data
			return true, logState{records: encode(recs), trim: s.trim}
		case "read":
			data, ok := recs[in.sn]
			switch {
			case in.sn <= s.trim:
				return out.trimmed, s
			case out.missing:
				return !ok, s
			}
			return ok && !out.trimmed && data == out.data, s
		case "next":
			if in.sn <= s.trim {
				return out.trimmed, s
			}
			var first uint64
			for sn := range recs {
				if sn >= in.sn && (first == 0 || sn < first) {
					first = sn
				}
			}
			if first == 0 {
				return out.missing, s
			}
			return !out.missing && !out.trimmed && out.sn == first && out.data == recs[first], s
		case "tail":
			return out.sn == max(last, s.trim), s
		case "trim":
			return true, logState{records: s.records, trim: max(s.trim, in.sn)}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(logOp), output.(logOut)
		switch in.kind {
		case "append":
			return fmt.Sprintf("append(%s) -> %d", in.data, out.sn)
		case "trim":
			return fmt.Sprintf("trim(%d)", in.sn)
		case "tail":
			return fmt.Sprintf("tail -> %d", out.sn)
		}
		return fmt.Sprintf("%s(%d) -> %+v", in.kind, in.sn, out)
	},
}
