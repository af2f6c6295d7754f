package retry

import (
	"context"
	"errors"
	"sync"

	"github.com/agentledger/ledger/internal/events"
)

// ErrSinkClosed is returned by a Sink's Publish after the sink is closed.
var ErrSinkClosed = errors.New("retry: sink closed")

// Sink receives the middleware's attempt events, one per attempt.
//
// Publish must not wait on network I/O: it enqueues the event (copying or
// marshalling it synchronously) and may block only for backpressure while
// its bounded buffer is full, returning ctx's error if ctx ends first. It
// returns an error only when the sink is closed (wrap ErrSinkClosed) or ctx
// ends. The middleware publishes with a context that is not canceled with
// the caller's (context.WithoutCancel), so that the final event of a
// canceled call is still recorded; a sink must therefore make a blocked
// Publish return when the sink is closed.
//
// ev is owned by the caller and is valid only for the duration of Publish:
// the middleware reuses it (and the AttemptError it points to) for the
// call's next attempt, so Publish must neither modify it nor retain it, or
// anything it points to, after it returns.
//
// Publish must be safe for concurrent use.
type Sink interface {
	Publish(ctx context.Context, ev *events.Attempt) error
}

// MemorySink is a Sink that keeps a copy of every event in memory, for
// tests and benchmarks. It never blocks. The zero value is ready to use;
// it is safe for concurrent use.
type MemorySink struct {
	mu     sync.Mutex
	events []events.Attempt
	closed bool
}

// NewMemorySink returns an empty, open MemorySink.
func NewMemorySink() *MemorySink { return &MemorySink{} }

// Publish stores a copy of ev (its AttemptError included). It returns
// ErrSinkClosed after Close.
func (s *MemorySink) Publish(_ context.Context, ev *events.Attempt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSinkClosed
	}
	s.events = append(s.events, *ev)
	if ev.Error != nil {
		e := *ev.Error
		s.events[len(s.events)-1].Error = &e
	}
	return nil
}

// Events returns a copy of the events stored so far, in publication order.
func (s *MemorySink) Events() []events.Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.Attempt, len(s.events))
	copy(out, s.events)
	return out
}

// Len returns the number of events stored.
func (s *MemorySink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// Reset forgets the stored events, keeping the memory for reuse.
func (s *MemorySink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.events)
	s.events = s.events[:0]
}

// Close makes every later Publish fail with ErrSinkClosed. It is
// idempotent and keeps the stored events.
func (s *MemorySink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
