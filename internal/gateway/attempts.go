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

// ErrRequestOwned is wrapped by the error AttemptNumbers.Reserve returns
// when the request ID already belongs to another session: the contract
// would reject every event of the call (session_conflict), and the
// provider would still bill it.
var ErrRequestOwned = errors.New("the request ID already belongs to another session")

// ErrAttemptsUnknown is wrapped by the error AttemptNumbers.Reserve
// returns when the request's numbers are no longer kept and the ledger
// holds a record of the request that does not say its highest attempt:
// the gateway refuses the call rather than reuse a number.
var ErrAttemptsUnknown = errors.New("the request's attempt numbers are unknown")

// Reservation is a run of attempt numbers of one request, reserved for
// one call: First, First+1, ..., First+Count-1.
type Reservation struct {
	First, Count int
	// Session is the session the request belongs to.
	Session string
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
// A request belongs to the session of its first reservation: a
// reservation for another session is refused (ErrRequestOwned).
//
// Implementations must be safe for concurrent use, including by several
// processes when the gateway runs replicated (KVAttempts).
type AttemptNumbers interface {
	// Reserve reserves count consecutive numbers of the request for a
	// call of sessionID, from the first no reservation has had; it
	// returns ErrAttemptsExhausted when the last would pass
	// events.MaxAttempt, and ErrRequestOwned when the request belongs to
	// another session.
	Reserve(ctx context.Context, requestID, sessionID string, count int) (Reservation, error)
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
	n       int
	rev     uint64
	session string
}

// NewMemoryAttempts returns an empty MemoryAttempts.
func NewMemoryAttempts() *MemoryAttempts { return &MemoryAttempts{next: make(map[string]memoryNext)} }

// Reserve implements AttemptNumbers.
func (m *MemoryAttempts) Reserve(_ context.Context, requestID, sessionID string, count int) (Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.next[requestID]
	if ok && cur.session != sessionID {
		return Reservation{}, ownedError(requestID)
	}
	if err := checkRoom(cur.n, count); err != nil {
		return Reservation{}, err
	}
	m.next[requestID] = memoryNext{n: cur.n + count, rev: cur.rev + 1, session: sessionID}
	return Reservation{First: cur.n, Count: count, Session: sessionID, Token: cur.rev + 1}, nil
}

// Release implements AttemptNumbers.
func (m *MemoryAttempts) Release(_ context.Context, requestID string, r Reservation, used int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.next[requestID]; cur.rev == r.Token && used < r.Count {
		m.next[requestID] = memoryNext{n: r.First + max(used, 0), rev: cur.rev + 1, session: cur.session}
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

// ownedError is the error of a reservation of requestID for a session it
// does not belong to. It does not name the owner: that is another
// client's.
func ownedError(requestID string) error {
	return fmt.Errorf("%w: request %s; use a new request ID", ErrRequestOwned, requestID)
}
