package fakeprovider

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// ErrInvalidOptions is wrapped by every configuration error of this package.
var ErrInvalidOptions = errors.New("fakeprovider: invalid options")

// Fault is what the server does with one attempt instead of answering it
// (see fakekit.Fault).
type Fault = fakekit.Fault

// Faults the server injects, and the outcomes it records (see fakekit).
const (
	FaultNone          = fakekit.FaultNone
	FaultRateLimit     = fakekit.FaultRateLimit
	FaultOverload      = fakekit.FaultOverload
	FaultServerError   = fakekit.FaultServerError
	FaultBilledTimeout = fakekit.FaultBilledTimeout
	FaultTimeout       = fakekit.FaultTimeout
	FaultBadRequest    = fakekit.FaultBadRequest
	FaultInvalid       = fakekit.FaultInvalid
)

// Mix is the fault mix: the probability of each fault. BadRequest applies
// per logical call (a bad request stays bad on every attempt); the others
// per attempt. Each is in [0, 1], and RateLimit + Overload + ServerError +
// BilledTimeout + BrokenStream must not exceed 1.
type Mix struct {
	RateLimit     float64 `json:"rate_limit"`
	Overload      float64 `json:"overload"`
	ServerError   float64 `json:"server_error"`
	BilledTimeout float64 `json:"billed_timeout"`
	BadRequest    float64 `json:"bad_request"`
	// BrokenStream is the probability per attempt of FaultBrokenStream.
	BrokenStream float64 `json:"broken_stream,omitempty"`
}

// DefaultMix is a fault mix with every kind of fault in it.
func DefaultMix() Mix {
	return Mix{RateLimit: 0.1, Overload: 0.05, ServerError: 0.05, BilledTimeout: 0.05, BadRequest: 0.02}
}

// Validate checks the mix and names the field that breaks a rule.
func (m Mix) Validate() error {
	for _, f := range []struct {
		name string
		p    float64
	}{
		{"rate_limit", m.RateLimit},
		{"overload", m.Overload},
		{"server_error", m.ServerError},
		{"billed_timeout", m.BilledTimeout},
		{"bad_request", m.BadRequest},
		{"broken_stream", m.BrokenStream},
	} {
		if math.IsNaN(f.p) || f.p < 0 || f.p > 1 {
			return fmt.Errorf("%w: mix.%s is %v; it must be a probability from 0 to 1", ErrInvalidOptions, f.name, f.p)
		}
	}
	if sum := m.RateLimit + m.Overload + m.ServerError + m.BilledTimeout + m.BrokenStream; sum > 1+1e-9 {
		return fmt.Errorf("%w: mix.rate_limit + overload + server_error + billed_timeout + broken_stream is %v; it must not exceed 1", ErrInvalidOptions, sum)
	}
	return nil
}

// Plan is the server's pure decision function: from a seed, the fault mix
// and the identity of a call and attempt, what the attempt gets. The same
// inputs always give the same decision.
type Plan struct {
	Seed uint64
	Mix  Mix
}

// Token ranges of a logical call, inclusive.
const (
	MinInputTokens  = 200
	MaxInputTokens  = 2000
	MinOutputTokens = 50
	MaxOutputTokens = 1500
	// StalledOutputTokens is the output a stalled stream reports (and
	// bills) before it stalls.
	StalledOutputTokens = fakekit.StalledOutputTokens
)

// Retry-after hints of a rate limit, inclusive.
const (
	MinRetryAfter = 5 * time.Millisecond
	MaxRetryAfter = 30 * time.Millisecond
)

// Usage returns the tokens of a successful attempt of the call, in the
// contract's convention: InputTokens counts every input token, the cache
// fields are subsets of it. Every call may read the prompt cache; with
// cacheWrites (a provider that bills cache writes, Anthropic) it may
// write it too.
func (p Plan) Usage(requestID string, cacheWrites bool) events.Usage {
	r := p.rng("usage", requestID, 0)
	u := events.Usage{
		InputTokens:  between(r, MinInputTokens, MaxInputTokens),
		OutputTokens: between(r, MinOutputTokens, MaxOutputTokens),
	}
	if r.IntN(2) == 0 {
		u.CacheReadInputTokens = between(r, 0, u.InputTokens/2)
	}
	if cacheWrites && r.IntN(3) == 0 {
		u.CacheCreationInputTokens = between(r, 0, (u.InputTokens-u.CacheReadInputTokens)/2)
	}
	return u
}

// Decision is what one attempt gets.
type Decision = fakekit.Decision

// Decide returns what the attempt gets. attempt is the contract's attempt
// number, 0 for the first.
func (p Plan) Decide(requestID string, attempt int) Decision {
	if p.Mix.BadRequest > 0 && p.rng("call", requestID, 0).Float64() < p.Mix.BadRequest {
		return Decision{Fault: FaultBadRequest}
	}
	r := p.rng("attempt", requestID, attempt)
	u := r.Float64()
	m := p.Mix
	switch {
	case u < m.RateLimit:
		return Decision{Fault: FaultRateLimit, RetryAfter: time.Duration(between(r, int64(MinRetryAfter/time.Millisecond), int64(MaxRetryAfter/time.Millisecond))) * time.Millisecond}
	case u < m.RateLimit+m.Overload:
		return Decision{Fault: FaultOverload}
	case u < m.RateLimit+m.Overload+m.ServerError:
		return Decision{Fault: FaultServerError}
	case u < m.RateLimit+m.Overload+m.ServerError+m.BilledTimeout:
		return Decision{Fault: FaultBilledTimeout}
	case u < m.RateLimit+m.Overload+m.ServerError+m.BilledTimeout+m.BrokenStream:
		return Decision{Fault: FaultBrokenStream}
	}
	return Decision{Fault: FaultNone}
}

// rng returns the random stream of one purpose, call and attempt.
func (p Plan) rng(purpose, requestID string, attempt int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write([]byte(requestID))
	return rand.New(rand.NewPCG(p.Seed, h.Sum64()^uint64(attempt+1)*0x9e3779b97f4a7c15))
}

// between returns a uniform integer in [lo, hi].
func between(r *rand.Rand, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + r.Int64N(hi-lo+1)
}
