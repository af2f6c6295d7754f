package fakekit

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
)

// ErrInvalidDialect is wrapped by every error of Dialect.Validate.
var ErrInvalidDialect = errors.New("fakekit: invalid dialect")

// Fault is what the fake provider does with one attempt instead of
// answering it.
type Fault string

// Faults the fake provider injects, and the outcomes it records.
const (
	// FaultNone answers the attempt successfully.
	FaultNone Fault = "success"
	// FaultRateLimit answers 429 with the hint of Decision.RetryAfter.
	FaultRateLimit Fault = "rate_limit"
	// FaultOverload answers the provider's overload (529 for Anthropic,
	// 503 for most).
	FaultOverload Fault = "overload"
	// FaultServerError answers 500.
	FaultServerError Fault = "server_error"
	// FaultBilledTimeout starts a streamed answer, reports (and bills) the
	// input usage, then stalls until the client gives up. On a request that
	// does not stream, the server cannot report anything before stalling, so
	// it stalls without billing and records FaultTimeout instead.
	FaultBilledTimeout Fault = "billed_timeout"
	// FaultTimeout is the unbilled stall of a non-streaming request.
	FaultTimeout Fault = "timeout"
	// FaultBadRequest answers 400 to every attempt of the call.
	FaultBadRequest Fault = "bad_request"
	// FaultInvalid is a request the server could not understand (missing
	// ledger headers, a body that does not decode); it answers 400.
	FaultInvalid Fault = "invalid"
	// FaultBilledError is a failure after the provider billed: a streamed
	// answer that reports (and bills) the input usage, then an error event
	// of a server error. On a request that does not stream the server
	// bills the same and answers 500, which carries no usage.
	FaultBilledError Fault = "billed_error"
	// FaultBrokenStream starts a streamed answer, streams a few output
	// tokens (one per content event) and then cuts the connection. On a
	// request that does not stream the server cuts the connection before
	// answering, bills nothing and records FaultDisconnect instead.
	FaultBrokenStream Fault = "broken_stream"
	// FaultDisconnect is the unbilled cut connection of a request that
	// does not stream.
	FaultDisconnect Fault = "disconnect"
	// FaultTierLimit answers 429 with retry-after: the organization's
	// tier limit had no room for the attempt. A Reply answers it as
	// FaultRateLimit.
	FaultTierLimit Fault = "tier_limit"
	// FaultOutage answers 503: the attempt came during the outage.
	FaultOutage Fault = "outage"
)

// Decision is what one attempt gets.
type Decision struct {
	Fault Fault
	// RetryAfter is the hint of a rate limit.
	RetryAfter time.Duration
}

// Call names one attempt of a logical call, as the ledger headers of its
// request say.
type Call struct {
	SessionID string
	RequestID string
	Attempt   int
}

// StalledOutputTokens is the output a stalled stream reports (and bills)
// before it stalls.
const StalledOutputTokens = 1

// MaxStalledChunks bounds the content events a stream that reports no
// usage sends before it stalls or fails.
const MaxStalledChunks = 64

// Token is the text of one streamed output token: a stream that bills n
// output tokens without reporting them sends n events of one Token each,
// so that a client can count them.
const Token = "tok "

// Tier is the rate limit of each provider's organization: requests,
// input tokens and output tokens per minute (0: no limit), enforced with
// token buckets that hold Burst's worth of a minute (default one second:
// providers enforce per-minute limits over short intervals). A dialect
// maps it to its provider's dimensions (Dialect.Limits): OpenAI's
// organization has one tokens limit of input plus output tokens.
type Tier struct {
	RequestsPerMinute     int64         `json:"requests_per_minute,omitempty"`
	InputTokensPerMinute  int64         `json:"input_tokens_per_minute,omitempty"`
	OutputTokensPerMinute int64         `json:"output_tokens_per_minute,omitempty"`
	Burst                 time.Duration `json:"burst,omitempty"`
}

// Dimension is one limit of an organization, named as its headers name
// it ("requests", "input-tokens", "tokens").
type Dimension struct {
	Name string
	// Dim is the guards' dimension it is (whose headers LimitHeadersOf
	// writes).
	Dim guard.Dim
	// Limit per minute; 0 or less: none.
	Limit int64
	// Cost is what an attempt of usage u takes from it.
	Cost func(u events.Usage) float64
}

// LimitState is a dimension's state after an attempt was admitted or
// refused, for the rate-limit headers.
type LimitState struct {
	Dimension
	// Remaining is what the bucket holds.
	Remaining int64
	// UntilFull is how long until the bucket is full again; Now is the
	// time of the attempt.
	UntilFull time.Duration
	Now       time.Time
}

func requests(events.Usage) float64 { return 1 }

// SplitLimits are the dimensions of an organization with separate input
// and output token limits (Anthropic's, and the default).
func SplitLimits(t Tier) []Dimension {
	return []Dimension{
		{"requests", guard.Requests, t.RequestsPerMinute, requests},
		{"input-tokens", guard.InputTokens, t.InputTokensPerMinute, func(u events.Usage) float64 { return float64(u.InputTokens) }},
		{"output-tokens", guard.OutputTokens, t.OutputTokensPerMinute, func(u events.Usage) float64 { return float64(u.OutputTokens) }},
	}
}

// CombinedLimits are the dimensions of an organization with one tokens
// limit of input plus output (OpenAI's): the tier's two token limits
// summed.
func CombinedLimits(t Tier) []Dimension {
	return []Dimension{
		{"requests", guard.Requests, t.RequestsPerMinute, requests},
		{"tokens", guard.Tokens, t.InputTokensPerMinute + t.OutputTokensPerMinute, func(u events.Usage) float64 { return float64(u.InputTokens + u.OutputTokens) }},
	}
}

// LimitHeadersOf is a Dialect.LimitHeaders that writes the headers hs
// names, the ones the guards read of the provider: for each limited
// dimension hs has, its limit, what remains, and its reset (an RFC 3339
// time where ResetIsDate, else a duration rounded to the millisecond,
// "1.5s"). nil hs: nil, no headers.
func LimitHeadersOf(hs guard.RateLimitHeaders) func(http.Header, []LimitState) {
	if len(hs) == 0 {
		return nil
	}
	return func(h http.Header, ls []LimitState) {
		for _, l := range ls {
			for _, n := range hs {
				if n.Dim != l.Dim {
					continue
				}
				h.Set(n.Limit, strconv.FormatInt(l.Limit, 10))
				h.Set(n.Remaining, strconv.FormatInt(l.Remaining, 10))
				if n.ResetIsDate {
					h.Set(n.Reset, l.Now.Add(l.UntilFull).UTC().Format(time.RFC3339Nano))
				} else {
					h.Set(n.Reset, l.UntilFull.Round(time.Millisecond).String())
				}
			}
		}
	}
}
