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

// ReadBody reads into chunks of minChunk bytes, doubling up to maxChunk,
// each charged before it is allocated.
const (
	minChunk = 4 << 10
	maxChunk = 256 << 10
)

// ReadBody reads r to its end, at most limit bytes, charging budget for
// the memory it holds as it arrives, chunk by chunk, never for a declared
// length. A body of more than one chunk is then copied into one buffer of
// its exact size (charged too, the chunks given back), so that what stays
// held is the body and no more. It returns ErrBudget when the budget
// cannot cover the next chunk, a *TooLargeError when more than limit
// bytes come, and r's errors. On any error nothing stays charged. The
// caller must Release the body.
func ReadBody(r io.Reader, budget *Budget, limit int64) (*Body, error) {
	b := &Body{budget: budget}
	charge := func(n int64) bool {
		if budget != nil && !budget.TryAcquire(n) {
			return false
		}
		b.charged += n
		return true
	}
	fail := func(err error) (*Body, error) {
		b.Release()
		return nil, err
	}
	var chunks [][]byte
	var total int64
	size := int64(minChunk)
	for {
		// One byte more than the limit tells a body over it.
		n := min(size, limit+1-total)
		if !charge(n) {
			return fail(ErrBudget)
		}
		c, err := fill(r, make([]byte, n))
		total += int64(len(c))
		chunks = append(chunks, c)
		if total > limit {
			return fail(&TooLargeError{Limit: limit})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		size = min(2*size, maxChunk)
	}
	if len(chunks) == 1 {
		b.Bytes = chunks[0]
		return b, nil
	}
	held := b.charged
	if !charge(total) {
		return fail(ErrBudget)
	}
	buf := make([]byte, 0, total)
	for _, c := range chunks {
		buf = append(buf, c...)
	}
	b.Bytes = buf
	budget.releaseOf(b, held)
	return b, nil
}

// fill reads into c until it is full or r fails (io.EOF included), and
// returns what it read.
func fill(r io.Reader, c []byte) ([]byte, error) {
	n := 0
	for n < len(c) {
		m, err := r.Read(c[n:])
		n += m
		if err != nil {
			return c[:n], err
		}
	}
	return c, nil
}

// releaseOf gives back n of the bytes charged to body.
func (bg *Budget) releaseOf(body *Body, n int64) {
	if bg != nil {
		bg.Release(n)
	}
	body.charged -= n
}

// TooLargeError is the error of ReadBody for a body over its limit.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the request body is larger than the limit of %d bytes", e.Limit)
}
