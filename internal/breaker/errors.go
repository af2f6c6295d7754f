package breaker

import (
	"errors"
	"fmt"
	"time"
)

// ErrCircuitOpen is the sentinel every rejection wraps: test with
// errors.Is(err, ErrCircuitOpen), and use errors.As with *OpenError for the
// details.
var ErrCircuitOpen = errors.New("circuit open")

// ErrInvalidConfig is wrapped by every error New and NewGroup return for a
// Config they refuse; the message names the field and the rule.
var ErrInvalidConfig = errors.New("breaker: invalid config")

// OpenError is the error Allow returns when it rejects a call. It unwraps
// to ErrCircuitOpen.
type OpenError struct {
	// Key names the breaker (the upstream) that rejected the call.
	Key string
	// Until is when a probe may next be admitted: the end of the cooldown
	// when State is Open. It is the zero time when State is HalfOpen, that
	// is when a probe is in flight and the next admission depends on its
	// outcome.
	Until time.Time
	// State is the breaker's state at the rejection: Open or HalfOpen.
	State State
}

// Error implements error.
func (e *OpenError) Error() string {
	if e.Until.IsZero() {
		return fmt.Sprintf("breaker %q: %v (%v, probe in flight)", e.Key, ErrCircuitOpen, e.State)
	}
	return fmt.Sprintf("breaker %q: %v until %s", e.Key, ErrCircuitOpen, e.Until.Format(time.RFC3339Nano))
}

// Unwrap returns ErrCircuitOpen.
func (e *OpenError) Unwrap() error { return ErrCircuitOpen }
