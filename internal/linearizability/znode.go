package linearizability

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// ZooKeeper's result codes the znode model knows (KeeperException.Code).
const (
	ZOK         int32 = 0
	ZNoNode     int32 = -101
	ZBadVersion int32 = -103
	ZNodeExists int32 = -110
)

// ZnodeIn is one operation on one znode: "create" (Data), "set" (Data if Version matches, -1
// any), "delete" (if Version matches) or "read" (after a sync, so it is linearizable).
type ZnodeIn struct {
	Kind    string
	Path    string
	Version int32
	Data    string
}

// ZnodeOut is its outcome: the ZooKeeper code, the version a set produced or a read saw, and the
// data a read saw.
type ZnodeOut struct {
	Code    int32
	Version int32
	Data    string
}

type znodeState struct {
	exists  bool
	version int32
	data    string
}

// ZnodeModel is a map of znodes, partitioned by path: versioned data that conditional sets and
// deletes must see exactly, and creates that fail on an existing node.
var ZnodeModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, o := range h {
			p := o.Input.(ZnodeIn).Path
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
		s, in, out := state.(znodeState), input.(ZnodeIn), output.(ZnodeOut)
		switch in.Kind {
		case "read":
			if !s.exists {
				return out.Code == ZNoNode, s
			}
			return out.Code == ZOK && out.Version == s.version && out.Data == s.data, s
		case "create":
			if s.exists {
				return out.Code == ZNodeExists, s
			}
			return out.Code == ZOK, znodeState{exists: true, data: in.Data}
		case "set":
			switch {
			case !s.exists:
				return out.Code == ZNoNode, s
			case in.Version != -1 && in.Version != s.version:
				return out.Code == ZBadVersion, s
			}
			return out.Code == ZOK && out.Version == s.version+1, znodeState{exists: true, version: s.version + 1, data: in.Data}
		case "delete":
			switch {
			case !s.exists:
				return out.Code == ZNoNode, s
			case in.Version != -1 && in.Version != s.version:
				return out.Code == ZBadVersion, s
			}
			return out.Code == ZOK, znodeState{}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(ZnodeIn), output.(ZnodeOut)
		return fmt.Sprintf("%s(%s v%d %q) -> %d v%d %q", in.Kind, in.Path, in.Version, in.Data, out.Code, out.Version, out.Data)
	},
}
