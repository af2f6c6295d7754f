package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentledger/ledger/internal/events"
)

// ErrAttemptsExhausted is returned by AttemptNumbers.Reserve when the
// request has no room left for the attempts asked for: its attempt
// numbers would pass events.MaxAttempt.
var ErrAttemptsExhausted = errors.New("the request has used up its attempt numbers")

// Reservation is a run of attempt numbers of one request, reserved for
// one call: First, First+1, ..., First+Count-1.
type Reservation struct {
	First, Count int
	// Token is the store's own mark of the reservation (a revision), for
	// Release.
	Token uint64
}

// AttemptNumbers keeps, per request ID, the next attempt number no call
// has used, so that a client that retries a request the gateway already
// made attempts of (the same request ID, or Idempotency-Key) continues
// its numbering, on any gateway replica: the contract counts a second
// event for an attempt number as a duplicate, and a billed attempt would
// be lost.
//
// Implementations must be safe for concurrent use, including by several
// processes when the gateway runs replicated (KVAttempts).
type AttemptNumbers interface {
	// Reserve reserves count consecutive numbers of the request, from the
	// first no reservation has had; it returns ErrAttemptsExhausted when
	// the last would pass events.MaxAttempt.
	Reserve(ctx context.Context, requestID string, count int) (Reservation, error)
	// Release gives back the numbers of r from First+used on, when no
	// reservation was made since r (otherwise they stay unused: the
	// numbering has a gap, which the ledger does not mind).
	Release(ctx context.Context, requestID string, r Reservation, used int) error
}

// MemoryAttempts is an AttemptNumbers in memory, for one gateway process
// (and tests). It remembers every request ID it has seen.
type MemoryAttempts struct {
	mu   sync.Mutex
	next map[string]memoryNext
}

type memoryNext struct {
	n   int
	rev uint64
}

// NewMemoryAttempts returns an empty MemoryAttempts.
func NewMemoryAttempts() *MemoryAttempts { return &MemoryAttempts{next: make(map[string]memoryNext)} }

// Reserve implements AttemptNumbers.
func (m *MemoryAttempts) Reserve(_ context.Context, requestID string, count int) (Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.next[requestID]
	if err := checkRoom(cur.n, count); err != nil {
		return Reservation{}, err
	}
	m.next[requestID] = memoryNext{n: cur.n + count, rev: cur.rev + 1}
	return Reservation{First: cur.n, Count: count, Token: cur.rev + 1}, nil
}

// Release implements AttemptNumbers.
func (m *MemoryAttempts) Release(_ context.Context, requestID string, r Reservation, used int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.next[requestID]; cur.rev == r.Token && used < r.Count {
		m.next[requestID] = memoryNext{n: r.First + max(used, 0), rev: cur.rev + 1}
	}
	return nil
}

// checkRoom returns ErrAttemptsExhausted when count numbers from first
// would pass events.MaxAttempt.
func checkRoom(first, count int) error {
	if first+count-1 > events.MaxAttempt {
		return fmt.Errorf("%w: %d attempt numbers from %d would pass %d, the contract's largest", ErrAttemptsExhausted, count, first, events.MaxAttempt)
	}
	return nil
}
