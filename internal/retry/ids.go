package retry

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ulidLen is the length of a ULID's text form.
const ulidLen = 26

// ulidSource makes ULIDs whose timestamps come from the middleware's clock
// and whose entropy is monotonic within a millisecond, so that the IDs of
// one process sort in the order they were made. It is safe for concurrent
// use.
type ulidSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
	buf     [10]byte // the entropy of the ULID being made, guarded by mu
}

func newULIDSource() *ulidSource {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &ulidSource{entropy: ulid.Monotonic(rand.NewChaCha8(seed), 0)}
}

// next returns a new ULID for time t. A time ULIDs cannot encode (before
// 1970 or after the year 10889) or an exhausted millisecond falls back to
// the library's own generator.
func (s *ulidSource) next(t time.Time) ulid.ULID {
	var id ulid.ULID
	ms := ulid.Timestamp(t)
	if err := id.SetTime(ms); err != nil {
		return ulid.Make()
	}
	s.mu.Lock()
	err := s.entropy.MonotonicRead(ms, s.buf[:])
	copy(id[6:], s.buf[:])
	s.mu.Unlock()
	if err != nil {
		return ulid.Make()
	}
	return id
}

// make returns the text of a new ULID for time t.
func (s *ulidSource) make(t time.Time) string { return s.next(t).String() }

// makePair returns the text of two new ULIDs for time t, in one
// allocation: the request_id and the first event_id of a call.
func (s *ulidSource) makePair(t time.Time) (string, string) {
	var buf [2 * ulidLen]byte
	a, b := s.next(t), s.next(t)
	_ = a.MarshalTextTo(buf[:ulidLen]) // cannot fail: the buffer has the right size
	_ = b.MarshalTextTo(buf[ulidLen:])
	both := string(buf[:])
	return both[:ulidLen], both[ulidLen:]
}

// LockedRand returns a random source for Options.Rand that draws from a
// PCG generator seeded with seed1 and seed2 under a mutex, so that it is
// safe for concurrent use and reproducible for a given seed (the order of
// draws among goroutines aside).
func LockedRand(seed1, seed2 uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed1, seed2))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
