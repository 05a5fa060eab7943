package ssf

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// A DAAL row created as a successor carries PriorWrites: a summary of the write-log keys of
// every row before it in the list when it was created. Those rows are full or have a
// successor, so their logs never change again; a summary that rules a step out rules it out
// of every row before this one for good, and a write can then start at the last row instead
// of scanning the whole list for Beldi's case A (see writeDAAL).
//
// The summary's bytes are part of what the store holds, read by every later version of the
// runtime, and a false negative would let a step apply twice: so its layout and hash are fixed
// here (and pinned by a test), not left to a library that may change them. Two forms, told
// apart by the first byte:
//
//   - 0: a fingerprint list, for up to maxFingerprints keys (two full rows at the default
//     capacity, which is what a list the garbage collector keeps short holds): the keys'
//     32-bit fingerprints, big-endian, sorted (for equal bytes; a lookup reads them all). A false positive takes two keys whose 64-bit
//     hashes agree in 32 bits: about one in 2^32 per key, so a run's requests do not depend
//     on the random ids in the keys (the crash suites compare them run to run).
//   - k in 1-32: a Bloom filter with k hash functions, for more keys: the bit array follows,
//     bit i at byte i/8, mask 1<<(i%8), m = 8 x its length; key positions h1 + i·h2 mod m for
//     i < k (Kirsch and Mitzenmacher's double hashing); ~1 % false positives at 10 bits a key.
//
// h1 and h2 are two mixes of the key's 64-bit FNV-1a hash; a fingerprint is h1's top 32 bits.

const (
	maxFingerprints = 64
	priorHashes     = 7  // near the optimum for 10 bits per key
	priorBitsPerKey = 10 // bits of the array per key
	// maxPriorBytes bounds the summary a row may carry (a row's size is bounded, see
	// maxValueBytes): a list whose earlier rows hold more keys than it can take (about 1,600,
	// 50 full rows at the default capacity) gets none, and its writes scan.
	maxPriorBytes = 2048
)

// buildPriorWrites returns the summary of keys, or nil when they are too many for
// maxPriorBytes.
func buildPriorWrites(keys []string) []byte {
	if len(keys) <= maxFingerprints {
		prints := make([]uint32, len(keys))
		for i, k := range keys {
			h1, _ := priorHashPair(k)
			prints[i] = uint32(h1 >> 32)
		}
		slices.Sort(prints)
		f := make([]byte, 1, 1+4*len(prints))
		for _, p := range prints {
			f = binary.BigEndian.AppendUint32(f, p)
		}
		return f
	}
	m := (len(keys)*priorBitsPerKey + 63) / 64 * 64
	if 1+m/8 > maxPriorBytes {
		return nil
	}
	f := make([]byte, 1+m/8)
	f[0] = priorHashes
	for _, k := range keys {
		h1, h2 := priorHashPair(k)
		for i := uint64(0); i < priorHashes; i++ {
			b := (h1 + i*h2) % uint64(m)
			f[1+b/8] |= 1 << (b % 8)
		}
	}
	return f
}

// priorMayHold reports whether key may be in summary f: false only when f is a well-formed
// summary that rules it out (a missing or malformed one proves nothing).
func priorMayHold(f []byte, key string) bool {
	if len(f) == 0 {
		return true
	}
	h1, h2 := priorHashPair(key)
	if f[0] == 0 {
		prints := f[1:]
		if len(prints)%4 != 0 {
			return true
		}
		want := uint32(h1 >> 32)
		for i := 0; i < len(prints); i += 4 {
			if binary.BigEndian.Uint32(prints[i:]) == want {
				return true
			}
		}
		return false
	}
	if len(f) < 9 || f[0] > 32 {
		return true
	}
	m := uint64(len(f)-1) * 8
	for i := uint64(0); i < uint64(f[0]); i++ {
		b := (h1 + i*h2) % m
		if f[1+b/8]&(1<<(b%8)) == 0 {
			return false
		}
	}
	return true
}

func priorHashPair(key string) (h1, h2 uint64) {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64()
	return mix64(x), mix64(x^0x9e3779b97f4a7c15) | 1
}

// mix64 is SplitMix64's finalizer: FNV-1a alone spreads a change in a key's last bytes (the
// step number) poorly over the low bits the positions are taken from.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
