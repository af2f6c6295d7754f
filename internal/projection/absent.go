package projection

import "hash/maphash"

// absentFilter remembers, as a Bloom filter, every key this lease term has
// written to a bucket that was empty when the term began. A key it has not
// seen is then certainly absent and needs no read; a key it may have seen
// is read as usual (a false positive costs a read, never correctness). It
// keeps catch-up and rebuild into empty buckets from reading back keys
// that cannot exist. About 1.2 bytes per key at a 1 % false-positive rate;
// it stops being used (every key is read) once it holds more keys than it
// was sized for.
type absentFilter struct {
	bits []uint64
	k    int
	n    int
	max  int
	seed maphash.Seed
}

func newAbsentFilter(maxKeys int) *absentFilter {
	m := maxKeys * 10 // bits: ~1 % false positives with k = 7
	return &absentFilter{bits: make([]uint64, (m+63)/64), k: 7, max: maxKeys, seed: maphash.MakeSeed()}
}

func (f *absentFilter) positions(key string, fn func(word int, bit uint64) bool) bool {
	h := maphash.String(f.seed, key)
	h1, h2 := uint32(h), uint32(h>>32)|1
	m := uint32(len(f.bits) * 64)
	for i := 0; i < f.k; i++ {
		p := (h1 + uint32(i)*h2) % m
		if !fn(int(p/64), 1<<(p%64)) {
			return false
		}
	}
	return true
}

// add records that key has been written.
func (f *absentFilter) add(key string) {
	f.n++
	f.positions(key, func(w int, b uint64) bool { f.bits[w] |= b; return true })
}

// absent reports whether key is certainly not in the bucket.
func (f *absentFilter) absent(key string) bool {
	if f.n >= f.max {
		return false
	}
	return !f.positions(key, func(w int, b uint64) bool { return f.bits[w]&b != 0 })
}
