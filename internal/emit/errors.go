package emit

import (
	"errors"
	"fmt"

	"github.com/agentledger/ledger/internal/retry"
)

var (
	// ErrClosed is returned by Publish and Flush once Close has been
	// called. It wraps retry.ErrSinkClosed, as the Sink contract asks.
	ErrClosed = fmt.Errorf("emit: publisher closed: %w", retry.ErrSinkClosed)

	// ErrUndelivered is wrapped by the *UndeliveredError that Close returns
	// when some events were never acknowledged by the stream.
	ErrUndelivered = errors.New("emit: events undelivered")

	// ErrInvalidOption is wrapped by every error of an Option passed to
	// New; the message names the option.
	ErrInvalidOption = errors.New("emit: invalid option")

	// ErrEventTooLarge is returned by Publish for an event whose encoded
	// form exceeds the contract's events.MaxEventBytes or the server's
	// maximum payload: it could never be stored. The message gives the
	// size and the limit.
	ErrEventTooLarge = errors.New("emit: event too large")
)

// UndeliveredError reports how many events Close gave up on: events that
// were enqueued but never acknowledged by the stream before Close's context
// ended. Some of them may still land later (a publish was in flight); they
// carry their event ID, so a re-publish is deduplicated by the stream.
type UndeliveredError struct {
	// Count is the number of events without an ack.
	Count uint64
	// Last is the last publish failure the publisher saw, or the context
	// error of Close when no publish had failed; it may be nil.
	Last error
	// Kept is how many of them stay in the outbox, in directory Outbox,
	// for the next Publisher on it (WithOutbox): with an outbox, all.
	Kept   uint64
	Outbox string
}

func (e *UndeliveredError) Error() string {
	msg := fmt.Sprintf("emit: %d event(s) undelivered", e.Count)
	if e.Kept > 0 {
		msg += fmt.Sprintf(", %d kept in outbox %s for the next start", e.Kept, e.Outbox)
	}
	if e.Last != nil {
		msg += " (last error: " + e.Last.Error() + ")"
	}
	return msg
}

// AllKept reports whether every undelivered event stays in the outbox:
// none is lost, the next start on the outbox delivers them.
func (e *UndeliveredError) AllKept() bool { return e.Count > 0 && e.Kept == e.Count }

// Unwrap makes errors.Is true for ErrUndelivered and for Last.
func (e *UndeliveredError) Unwrap() []error {
	if e.Last == nil {
		return []error{ErrUndelivered}
	}
	return []error{ErrUndelivered, e.Last}
}

// PendingError is returned by Flush when its context ends before every
// event enqueued before the call was acknowledged.
type PendingError struct {
	// Pending is the number of events enqueued but not yet acknowledged
	// when Flush gave up (it can include events enqueued after the call).
	Pending uint64
	// Err is the context's error.
	Err error
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("emit: flush: %d event(s) still pending: %v", e.Pending, e.Err)
}

// Unwrap returns the context's error.
func (e *PendingError) Unwrap() error { return e.Err }
