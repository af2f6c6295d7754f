package netlimit

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Budget is a byte budget shared by every request: the bytes of the
// request bodies a server holds in memory at once.
type Budget struct {
	max  int64
	used atomic.Int64
	peak atomic.Int64
}

// NewBudget returns a budget of max bytes (at least 1).
func NewBudget(max int64) (*Budget, error) {
	if max < 1 {
		return nil, fmt.Errorf("netlimit: the byte budget is %d; it must be positive", max)
	}
	return &Budget{max: max}, nil
}

// Max is the budget.
func (b *Budget) Max() int64 { return b.max }

// InFlight is the bytes held now.
func (b *Budget) InFlight() int64 { return b.used.Load() }

// Peak is the most bytes held at once so far.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// TryAcquire takes n bytes and reports true, or reports false and takes
// nothing when fewer than n are left. It never waits.
func (b *Budget) TryAcquire(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// Release gives back n bytes.
func (b *Budget) Release(n int64) { b.used.Add(-n) }

// ErrBudget is the error of ReadBody when the byte budget is spent.
var ErrBudget = errors.New("the server's byte budget of request bodies in flight is spent")

// Body is a request body read against a Budget: Bytes are charged to it
// until Release.
type Body struct {
	Bytes   []byte
	budget  *Budget
	charged int64
	once    sync.Once
}

// Release gives the body's bytes back to the budget; Bytes must not be
// used after. Safe to call more than once.
func (b *Body) Release() {
	b.once.Do(func() {
		if b.budget != nil {
			b.budget.Release(b.charged)
		}
	})
}

// ReadBody's buffer starts at minChunk and doubles up to bigChunk, then
// grows by a quarter; each growth is charged before it is allocated.
const (
	minChunk = 4 << 10
	bigChunk = 1 << 20
)

// growth is how much ReadBody's buffer of capacity c grows, at most to
// limit+1 bytes (one more than the limit tells a body over it).
func growth(c, limit int64) int64 {
	add := c
	if c >= bigChunk {
		add = c / 4
	}
	return max(1, min(add, limit+1-c))
}

// ReadBody reads r to its end, at most limit bytes, charging budget for
// the memory it holds as it grows (the buffer's capacity), never for a
// declared length. It returns ErrBudget when the budget cannot cover the
// next chunk, a *TooLargeError when more than limit bytes come, and r's
// errors. On any error nothing stays charged. The caller must Release
// the body.
func ReadBody(r io.Reader, budget *Budget, limit int64) (*Body, error) {
	b := &Body{budget: budget}
	grow := func(n int64) bool {
		if budget != nil && !budget.TryAcquire(n) {
			return false
		}
		b.charged += n
		return true
	}
	chunk := min(int64(minChunk), limit+1)
	if !grow(chunk) {
		return nil, ErrBudget
	}
	buf := make([]byte, 0, chunk)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				b.Release()
				return nil, &TooLargeError{Limit: limit}
			}
			add := growth(int64(cap(buf)), limit)
			if !grow(add) {
				b.Release()
				return nil, ErrBudget
			}
			nb := make([]byte, len(buf), int64(cap(buf))+add)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > limit {
				b.Release()
				return nil, &TooLargeError{Limit: limit}
			}
			b.Bytes = buf
			return b, nil
		}
		if err != nil {
			b.Release()
			return nil, err
		}
	}
}

// TooLargeError is the error of ReadBody for a body over its limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the request body is larger than the limit of %d bytes", e.Limit)
}
