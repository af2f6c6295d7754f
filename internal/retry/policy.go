package retry

import (
	"errors"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/events"
)

// ErrInvalidPolicy is the sentinel that every *PolicyError wraps.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

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
	// DefaultAttemptTimeout and DefaultStreamIdleTimeout are the
	// gateway's defaults (internal/gateway): an attempt waits at most 10
	// minutes for its answer (a stream's first progress), and a stream at
	// most 5 minutes between two reports of progress.
	DefaultAttemptTimeout    = 10 * time.Minute
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// Policy says how often and how patiently a call is retried. Start from
// DefaultPolicy and change what you need: a Policy is taken as it is and
// Validate rejects meaningless values (the zero Policy as a whole is the
// one exception: New replaces it with DefaultPolicy).
type Policy struct {
	// MaxRetries is how many attempts may follow the first one, from 0 to
	// events.MaxAttempt.
	MaxRetries int
	// BaseDelay is the wait before the first retry, before jitter. It must
	// be positive.
	BaseDelay time.Duration
	// MaxDelay caps every computed wait. It must be at least BaseDelay.
	MaxDelay time.Duration
	// Jitter spreads each computed wait by a factor uniform in
	// [1-Jitter, 1+Jitter]; from 0 (none) to 1.
	Jitter float64
	// HintCap is the longest server hint (Retry-After) that is honoured.
	// A longer hint ends the call at once instead of waiting. It must be
	// positive.
	HintCap time.Duration
	// AttemptTimeout bounds each attempt until its answer: the whole
	// attempt of a call that does not stream, and the wait for the first
	// Progress of a stream (its first-byte timeout). 0 means none. The
	// expiry of an attempt's timeout (ErrAttemptTimeout) is retryable; the
	// caller's own deadline is not. It must not be negative.
	AttemptTimeout time.Duration
	// StreamIdleTimeout bounds the silence of a stream after its first
	// Progress: each report gives it StreamIdleTimeout more
	// (ErrStreamIdleTimeout, retryable). 0 means none, and then
	// AttemptTimeout bounds the whole stream. It must not be negative.
	StreamIdleTimeout time.Duration
}

// DefaultPolicy returns 2 retries (3 attempts), a 1 s base delay doubling
// per retry with ±20 % jitter, capped at 30 s, server hints honoured up to
// 60 s, an attempt timeout (a stream's first-byte timeout) of 10 min and a
// stream idle timeout of 5 min, as the gateway's.
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
	case p.MaxRetries < 0 || p.MaxRetries > events.MaxAttempt:
		return &PolicyError{Field: "MaxRetries", Rule: "is " + strconv.Itoa(p.MaxRetries) +
			"; it must be from 0 to " + strconv.Itoa(events.MaxAttempt)}
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

// isZero reports whether p is the zero Policy, which New replaces with
// DefaultPolicy.
func (p Policy) isZero() bool { return p == Policy{} }
