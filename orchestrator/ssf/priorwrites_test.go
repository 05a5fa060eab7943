package ssf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

func stepKeys(instance string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = logKey(instance, "k3x9", i)
	}
	return keys
}

// Every key a filter was built from is reported as possibly there, at every size up to the
// largest a row carries: a false negative would let a replayed step apply twice.
func TestPriorWritesHaveNoFalseNegatives(t *testing.T) {
	for _, n := range []int{0, 1, 2, 31, 32, 64, 640, 1600} {
		keys := stepKeys(fmt.Sprintf("inst-%d", n), n)
		f := buildPriorWrites(keys)
		if f == nil {
			t.Fatalf("%d keys: no filter, want one up to %d bytes", n, maxPriorBytes)
		}
		if len(f) > maxPriorBytes {
			t.Fatalf("%d keys: %d bytes, over %d", n, len(f), maxPriorBytes)
		}
		for _, k := range keys {
			if !priorMayHold(f, k) {
				t.Fatalf("%d keys: %q ruled out of the filter built from it", n, k)
			}
		}
	}
}

// At the sizes a list reaches, a step not in the summary is ruled out almost always: each false
// positive costs its write a scan of the list. A fingerprint list (up to maxFingerprints keys)
// gives none here; a Bloom filter about 1 %.
func TestPriorWritesFalsePositives(t *testing.T) {
	for _, n := range []int{2, 32, maxFingerprints, maxFingerprints + 1, 640, 1600} {
		f := buildPriorWrites(stepKeys("old", n))
		const probes = 20000
		positives := 0
		for _, k := range stepKeys("new", probes) {
			if priorMayHold(f, k) {
				positives++
			}
		}
		limit := 0.02
		if n <= maxFingerprints {
			limit = 0
		}
		if rate := float64(positives) / probes; rate > limit {
			t.Errorf("%d keys in %d bytes: %.2f%% false positives, want at most %.0f%%", n, len(f), 100*rate, 100*limit)
		}
	}
}

// Too many keys for a row get no filter; a missing or malformed filter rules nothing out.
func TestPriorWritesFailClosed(t *testing.T) {
	if f := buildPriorWrites(stepKeys("many", maxPriorBytes*8/priorBitsPerKey+64)); f != nil {
		t.Fatalf("a filter of %d bytes for more keys than fit", len(f))
	}
	for _, f := range [][]byte{nil, {}, {7}, {7, 0, 0, 0, 0, 0, 0, 0}, {33, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 2, 3}} {
		if !priorMayHold(f, "x#y#1") {
			t.Errorf("filter %v ruled a key out", f)
		}
	}
	for _, f := range [][]byte{{7, 0, 0, 0, 0, 0, 0, 0, 0}, {0}, {0, 0, 0, 0, 1}} {
		if priorMayHold(f, "x#y#1") {
			t.Errorf("well-formed summary %v without the key did not rule it out", f)
		}
	}
}

// The summary's bytes are stored and read by every later version of the runtime: its layout
// and hash must never change (a change would make old summaries give false negatives).
func TestPriorWritesFormatIsPinned(t *testing.T) {
	for _, c := range []struct {
		keys int
		want string
	}{
		{3, "1bbeb9277351a8977a0d50911b1a050be9fdd41f97f86154b054da986ec0df5b"},
		{100, "bf952d8e205f4a2314db883fb967da710477e8e8f39d55eebf866b0b9b2e1a08"},
	} {
		f := buildPriorWrites(stepKeys("pinned", c.keys))
		sum := sha256.Sum256(f)
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("summary of %d keys: %d bytes %x, sha256 %s, want %s: the stored format changed", c.keys, len(f), f, got, c.want)
		}
	}
}
