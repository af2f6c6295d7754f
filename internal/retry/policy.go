package retry

import "github.com/agentledger/ledger/api"

// ErrInvalidPolicy is the sentinel that every *PolicyError wraps.
var ErrInvalidPolicy = api.ErrInvalidPolicy

// PolicyError says which field of a Policy breaks which rule.
type PolicyError = api.PolicyError

// Defaults of DefaultPolicy: the gateway's defaults (internal/gateway) for
// the attempt and stream idle timeouts.
const (
	DefaultMaxRetries        = api.DefaultMaxRetries
	DefaultBaseDelay         = api.DefaultBaseDelay
	DefaultMaxDelay          = api.DefaultMaxDelay
	DefaultJitter            = api.DefaultJitter
	DefaultHintCap           = api.DefaultHintCap
	DefaultAttemptTimeout    = api.DefaultAttemptTimeout
	DefaultStreamIdleTimeout = api.DefaultStreamIdleTimeout
)

// Policy says how often and how patiently a call is retried (api.Policy):
// a Policy is taken as it is and Validate rejects meaningless values (the
// zero Policy as a whole is the one exception: New replaces it with
// DefaultPolicy). The expiry of an attempt's timeout
// (ErrAttemptTimeout, ErrStreamIdleTimeout) is retryable.
type Policy = api.Policy

// DefaultPolicy returns api.DefaultPolicy: 2 retries, 1 s doubling to at
// most 30 s with ±20 % jitter, hints up to 60 s, attempt timeout 10 min,
// stream idle timeout 5 min.
func DefaultPolicy() Policy { return api.DefaultPolicy() }
