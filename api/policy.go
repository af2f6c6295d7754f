package api

import (
	"errors"
	"strconv"
	"time"
)

// ErrInvalidPolicy is the sentinel that every *PolicyError wraps.
var ErrInvalidPolicy = errors.New("ledger: invalid policy")

// PolicyError says which field of a Policy breaks which rule.
type PolicyError struct {
	Field string // the Go name of the field, e.g. "MaxDelay"
	Rule  string // the rule, as a sentence fragment
}

func (e *PolicyError) Error() string { return ErrInvalidPolicy.Error() + ": " + e.Field + " " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalidPolicy) true.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// Defaults of DefaultPolicy.
const (
	DefaultMaxRetries = 2
	DefaultBaseDelay  = time.Second
	DefaultMaxDelay   = 30 * time.Second
	DefaultJitter     = 0.2
	DefaultHintCap    = 60 * time.Second
	// DefaultAttemptTimeout bounds an attempt until its answer (a
	// stream's first progress), DefaultStreamIdleTimeout a stream's
	// silence after that: the gateway's defaults.
	DefaultAttemptTimeout    = 10 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// Policy says how often and how patiently a call is retried. Start from
// DefaultPolicy and change what you need; Validate refuses meaningless
// values (the zero Policy as a whole is the one exception: the middleware
// replaces it with DefaultPolicy).
type Policy struct {
	// MaxRetries is how many attempts may follow the first one, from 0 to
	// MaxAttempt.
	MaxRetries int
	// BaseDelay is the wait before the first retry, before jitter; it
	// doubles for each retry. It must be positive.
	BaseDelay time.Duration
	// MaxDelay caps every computed wait. It must be at least BaseDelay.
	MaxDelay time.Duration
	// Jitter spreads each wait by a factor uniform in [1-Jitter,
	// 1+Jitter]; from 0 (none) to 1.
	Jitter float64
	// HintCap is the longest server hint (Retry-After) honoured; a longer
	// one ends the call at once instead of waiting. It must be positive.
	HintCap time.Duration
	// AttemptTimeout bounds each attempt until its answer: the whole
	// attempt of a call that does not stream, the wait for the first
	// progress of a stream (its first-byte timeout). 0 means none. Its
	// expiry is retried; the caller's own deadline is not. It must not be
	// negative.
	AttemptTimeout time.Duration
	// StreamIdleTimeout bounds a stream's silence after its first
	// progress: each report gives it this much more. 0 means none, and
	// then AttemptTimeout bounds the whole stream. Its expiry is retried
	// like AttemptTimeout's. It must not be negative.
	StreamIdleTimeout time.Duration
}

// DefaultPolicy returns 2 retries (3 attempts), a 1 s base delay doubling
// per retry with ±20 % jitter, capped at 30 s, server hints honoured up to
// 60 s, an attempt timeout (a stream's first-byte timeout) of 10 min and
// a stream idle timeout of 5 min, as the gateway's.
func DefaultPolicy() Policy {
	return Policy{
		MaxRetries:        DefaultMaxRetries,
		BaseDelay:         DefaultBaseDelay,
		MaxDelay:          DefaultMaxDelay,
		Jitter:            DefaultJitter,
		HintCap:           DefaultHintCap,
		AttemptTimeout:    DefaultAttemptTimeout,
		StreamIdleTimeout: DefaultStreamIdleTimeout,
	}
}

// Validate returns a *PolicyError for the first field that breaks its
// rule, or nil.
func (p Policy) Validate() error {
	switch {
	case p.MaxRetries < 0 || p.MaxRetries > MaxAttempt:
		return &PolicyError{Field: "MaxRetries", Rule: "is " + strconv.Itoa(p.MaxRetries) +
			"; it must be from 0 to " + strconv.Itoa(MaxAttempt)}
	case p.BaseDelay <= 0:
		return &PolicyError{Field: "BaseDelay", Rule: "is " + p.BaseDelay.String() + "; it must be positive"}
	case p.MaxDelay < p.BaseDelay:
		return &PolicyError{Field: "MaxDelay", Rule: "is " + p.MaxDelay.String() +
			"; it must be at least BaseDelay (" + p.BaseDelay.String() + ")"}
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return &PolicyError{Field: "Jitter", Rule: "is " + strconv.FormatFloat(p.Jitter, 'g', -1, 64) +
			"; it must be from 0 to 1"}
	case p.HintCap <= 0:
		return &PolicyError{Field: "HintCap", Rule: "is " + p.HintCap.String() + "; it must be positive"}
	case p.AttemptTimeout < 0:
		return &PolicyError{Field: "AttemptTimeout", Rule: "is " + p.AttemptTimeout.String() +
			"; it must not be negative (0 means none)"}
	case p.StreamIdleTimeout < 0:
		return &PolicyError{Field: "StreamIdleTimeout", Rule: "is " + p.StreamIdleTimeout.String() +
			"; it must not be negative (0 means none)"}
	}
	return nil
}
