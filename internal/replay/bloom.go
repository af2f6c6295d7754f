package replay

import "hash/maphash"

// bloom is a Bloom filter of keys written to a scratch bucket: a key it
// has never seen is certainly not there, so verify reads the bucket only
// for keys it may hold. Its size is fixed; with more keys than it was
// sized for it answers "maybe" more often, which costs reads, never
// correctness. A nil *bloom holds nothing.
type bloom struct {
	bits []uint64
	seed maphash.Seed
	n    int
}

// bloomBits is the size of each filter: 8 Mbit (1 MiB), about 1 % false
// positives at 800,000 keys with k = 7.
const bloomBits = 8 << 20

const bloomHashes = 7

func newBloom() *bloom { return newBloomBits(bloomBits) }

func newBloomBits(n int) *bloom {
	return &bloom{bits: make([]uint64, n/64), seed: maphash.MakeSeed()}
}

func (b *bloom) positions(key string) (uint64, uint64) {
	h := maphash.String(b.seed, key)
	return h, h>>33 | h<<31 | 1
}

func (b *bloom) add(key string) {
	h1, h2 := b.positions(key)
	m := uint64(len(b.bits) * 64)
	for i := uint64(0); i < bloomHashes; i++ {
		p := (h1 + i*h2) % m
		b.bits[p/64] |= 1 << (p % 64)
	}
	b.n++
}

// mayHave reports whether key may have been added.
func (b *bloom) mayHave(key string) bool {
	if b == nil || b.n == 0 {
		return false
	}
	h1, h2 := b.positions(key)
	m := uint64(len(b.bits) * 64)
	for i := uint64(0); i < bloomHashes; i++ {
		p := (h1 + i*h2) % m
		if b.bits[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}
