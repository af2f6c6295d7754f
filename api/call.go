package api

import "net/http"

// MaxAttempt is the highest attempt number an attempt event may carry
// (wire contract v1): a call's Call.FirstAttempt plus its policy's
// MaxRetries must not exceed it.
const MaxAttempt = 1000

// Call names one logical model call.
type Call struct {
	// SessionID is the caller's session: 1 to 128 bytes of ASCII
	// letters, digits, '-' and '_' (docs/contract.md).
	SessionID string
	// RequestID is the call's stable ID, shared by all its attempts; the
	// same rule as SessionID. Empty means a new ULID.
	RequestID string
	// Provider and Model name the upstream, as written into the events;
	// both are required (at most 64 and 256 bytes).
	Provider, Model string
	// Upstream is the key of the call's circuit breaker and, with fleet
	// limits, of its rate limits and retry budget; empty means
	// Provider+"/"+Model. A wider scope, such as an account shared by
	// several models, is a key of the caller's choosing.
	Upstream string
	// Account, when set, names the provider account the call is made
	// with (a digest of its API key, say): its rate limits, the holds
	// after its 429s and its retry budget are then kept apart from other
	// accounts' of the same upstream, while the circuit breaker stays the
	// upstream's, shared by all. At most 128 bytes; from a bounded set,
	// as Upstream.
	Account string
	// FirstAttempt is the attempt number of the call's first attempt: 0
	// for a new call. A caller that continues a request whose earlier
	// attempts were published elsewhere passes the first number not yet
	// used, so that no two events of the request share one (the contract
	// counts a second event for an attempt number as a duplicate, and a
	// billed attempt would be lost). The policy's MaxRetries counts from
	// this call's first attempt; FirstAttempt + MaxRetries must not exceed
	// MaxAttempt.
	FirstAttempt int
	// Labels attribute the call (team, user, agent...): every attempt's
	// event carries them, merged over the middleware's defaults (a key
	// set here wins). At most MaxLabels pairs; see Labels.Validate.
	Labels Labels
}

// Attempt is what the call's function learns about the attempt it is
// asked to make.
type Attempt struct {
	Number    int    // 0 for the first attempt
	RequestID string // the call's request_id, the same for every attempt
	SessionID string
	EventID   string // the event_id of this attempt's event
}

// Report is what an attempt learned from the provider, on success and on
// error alike: a provider may bill a failed attempt (a stream that
// reported its input usage and then failed), and the usage lands in that
// attempt's event as billed.
type Report struct {
	Usage             Usage
	ProviderRequestID string // the provider's request-id; overrides the classifier's
	// ServiceTier is the tier the provider says served the attempt
	// ("standard", "priority", "flex", "batch"...), "" when it did not
	// say. It is recorded lower case; a tier that breaks the contract's
	// rule (at most 32 bytes of a-z, 0-9, '_', '-') is recorded as "".
	ServiceTier string
	// EstimatedInputTokens is the input a tokenizer estimated because
	// the provider never reported it (an OpenAI stream cut before its
	// usage chunk); 0 when nothing was estimated. It is recorded apart
	// from Usage, never added to it.
	EstimatedInputTokens int64
	// Header is the response's header, when the function has it
	// (optional): with fleet limits, the rate-limit headers in it
	// (Anthropic's and OpenAI's) teach the fleet the upstream's limits.
	// It is read during the call only.
	Header http.Header
}

// StopReason says why a call ended without success.
type StopReason string

// The reasons a call ends without success.
const (
	// StopNonRetryable: the failure was not retryable.
	StopNonRetryable StopReason = "non_retryable"
	// StopExhausted: every attempt the policy allows failed.
	StopExhausted StopReason = "retries_exhausted"
	// StopHintOverCap: the server asked for a wait longer than
	// Policy.HintCap.
	StopHintOverCap StopReason = "hint_over_cap"
	// StopDeadline: the wait before the next attempt would pass the
	// caller's deadline.
	StopDeadline StopReason = "deadline"
	// StopCanceled: the caller's context ended.
	StopCanceled StopReason = "canceled"
	// StopCircuitOpen: the upstream's circuit breaker rejected the
	// attempt.
	StopCircuitOpen StopReason = "circuit_open"
	// StopPanicked: the Classifier panicked on the attempt's error.
	StopPanicked StopReason = "panicked"
	// StopRateLimit: the wait for rate-limit capacity (or the hold after
	// a 429) would pass the caller's deadline or Policy.HintCap; no
	// attempt was made (fleet limits).
	StopRateLimit StopReason = "rate_limit"
	// StopBudget: the attempt failed and could have been retried, but the
	// upstream's retry budget was spent; the failed attempt is the final
	// one and its event says which setting to raise (fleet limits).
	StopBudget StopReason = "retry_budget"
)

// MiddlewareStats are a middleware's counters since it was made.
type MiddlewareStats struct {
	Calls      uint64 // calls that passed validation
	Attempts   uint64 // calls of the call's function
	Retries    uint64 // waits before another attempt
	Rejections uint64 // attempts not made: breaker open, a rate limit past the deadline, caller's context done
	Waits      uint64 // waits for rate-limit capacity before an attempt (not attempts, no events)
	Events     uint64 // events the publisher accepted
	SinkErrors uint64 // events the publisher refused (a panic of the publisher included)
	Panics     uint64 // panics during a call: of the call's function, the classifier or the publisher
}

// PublisherStats count what a publisher of attempt events did.
type PublisherStats struct {
	// Enqueued is the number of events the publisher accepted.
	Enqueued uint64
	// Acked is the number of events the stream acknowledged, Duplicates
	// included; each event is counted once, however many times it was
	// published.
	Acked uint64
	// Duplicates is the number of acks saying the stream already held the
	// event (a re-published event, or a retry of a publish that had
	// landed).
	Duplicates uint64
	// Retries is the number of publishes made again after a failure.
	Retries uint64
	// Undelivered is the number of events never acknowledged; set when
	// the publisher is closed, 0 before.
	Undelivered uint64
	// Recovered is the number of events read back from the outbox at
	// start, left by an earlier publisher; counted in Enqueued too.
	Recovered uint64
	// OutboxEvents and OutboxBytes are the outbox's depth: the events kept
	// on disk until the stream acknowledges them (0 without an outbox).
	// After Close they are what the next publisher on the directory will
	// publish.
	OutboxEvents uint64
	OutboxBytes  uint64
	// Kept is the number of undelivered events left in the outbox for the
	// next publisher on its directory; set by Close, 0 without an outbox.
	Kept uint64
}
