package emit

import (
	"errors"
	"fmt"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/retry"
)

var (
	// ErrClosed is returned by Publish and Flush once Close has been
	// called. It wraps retry.ErrSinkClosed, as the Sink contract asks.
	ErrClosed = fmt.Errorf("emit: publisher closed: %w", retry.ErrSinkClosed)

	// ErrUndelivered is wrapped by the *UndeliveredError that Close returns
	// when some events were never acknowledged by the stream
	// (api.ErrUndelivered).
	ErrUndelivered = api.ErrUndelivered

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
// ended (api.UndeliveredError). Some of them may still land later; they
// carry their event ID, so a re-publish is deduplicated by the stream.
type UndeliveredError = api.UndeliveredError

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
