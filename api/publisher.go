package api

import (
	"errors"
	"fmt"
)

// ErrUndelivered is wrapped by every *UndeliveredError.
var ErrUndelivered = errors.New("ledger: events undelivered")

// UndeliveredError is what closing a publisher returns when some events
// were never acknowledged before its context ended. Some may still land
// later; each carries its event ID, so a re-publish is deduplicated by
// the stream.
type UndeliveredError struct {
	// Count is the number of events without an ack.
	Count uint64
	// Last is the last publish failure seen, or the closing context's
	// error when no publish had failed; it may be nil.
	Last error
	// Kept is how many of them stay in the outbox, in directory Outbox,
	// and are published by the next publisher on it: with an outbox, all
	// of them. Kept events are not lost.
	Kept   uint64
	Outbox string
}

func (e *UndeliveredError) Error() string {
	msg := fmt.Sprintf("ledger: %d event(s) undelivered", e.Count)
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
