package bigtablestore

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable/admin/apiv2/adminpb"

	"github.com/ssfkit/ssfkit/adapters/store"
)

// randKey draws from the bytes the encoding treats specially (the escape and terminator bytes)
// and a few ordinary ones, with short lengths, so prefixes and escapes collide often.
func randKey(r *rand.Rand) string {
	alphabet := []byte{0x00, 0x01, 0x02, 0xfe, 0xff, 'a', 'b'}
	b := make([]byte, r.IntN(5))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// The row key encoding keeps (partition, sort) order, puts every row of a partition, and no
// other row, under the partition's prefix, and never maps two keys to one row key.
func TestRowKeyProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a := store.Key{Partition: randKey(r), Sort: randKey(r)}
		b := store.Key{Partition: randKey(r), Sort: randKey(r)}
		ka, err := rowKey(a)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := rowKey(b)
		if err != nil {
			t.Fatal(err)
		}
		want := cmp.Or(strings.Compare(a.Partition, b.Partition), strings.Compare(a.Sort, b.Sort))
		if got := strings.Compare(ka, kb); got != want {
			t.Fatalf("keys %s and %s compare %d, their row keys %q and %q compare %d", a, b, want, ka, kb, got)
		}
		if in := strings.HasPrefix(kb, partitionPrefix(a.Partition)); in != (a.Partition == b.Partition) {
			t.Fatalf("row key %q of %s under the prefix of partition %q: %v", kb, b, a.Partition, in)
		}
		if got := strings.TrimPrefix(ka, partitionPrefix(a.Partition)); got != a.Sort {
			t.Fatalf("row key %q of %s gives back sort key %q", ka, a, got)
		}
	}
}

func TestRowKeyLimit(t *testing.T) {
	if _, err := rowKey(store.Key{Partition: "p", Sort: strings.Repeat("s", maxKeyBytes-3)}); err != nil {
		t.Errorf("a key of exactly %d bytes encoded: %v", maxKeyBytes, err)
	}
	if _, err := rowKey(store.Key{Partition: "p", Sort: strings.Repeat("s", maxKeyBytes-2)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a key of %d bytes encoded = %v, want store.ErrInvalid", maxKeyBytes+1, err)
	}
}

func TestRoutingCheck(t *testing.T) {
	single := func(txn bool) *adminpb.AppProfile {
		return &adminpb.AppProfile{Name: "p", RoutingPolicy: &adminpb.AppProfile_SingleClusterRouting_{
			SingleClusterRouting: &adminpb.AppProfile_SingleClusterRouting{ClusterId: "c1", AllowTransactionalWrites: txn}}}
	}
	multi := &adminpb.AppProfile{Name: "p", RoutingPolicy: &adminpb.AppProfile_MultiClusterRoutingUseAny_{
		MultiClusterRoutingUseAny: &adminpb.AppProfile_MultiClusterRoutingUseAny{}}}
	if err := routingError(single(true)); err != nil {
		t.Errorf("single-cluster routing with transactions: %v", err)
	}
	for name, p := range map[string]*adminpb.AppProfile{"no transactions": single(false), "multi-cluster": multi, "no policy": {Name: "p"}} {
		if err := routingError(p); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want store.ErrInvalid", name, err)
		}
	}
}
