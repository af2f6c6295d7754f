package fakeprovider

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// Faults of the tier limiter and the outage window.
const (
	// FaultTierLimit answers 429 with retry-after: the organization's
	// tier limit had no room for the attempt.
	FaultTierLimit Fault = "tier_limit"
	// FaultOutage answers 503: the attempt came during the outage.
	FaultOutage Fault = "outage"
)

// Tier is the rate limit of each provider's organization: requests,
// input tokens and output tokens per minute (0: no limit), enforced with
// token buckets (package tokenbucket) that hold Burst's worth of a minute
// (default one second: providers enforce per-minute limits over short
// intervals). OpenAI's organization has one tokens limit instead, of
// input plus output tokens: InputTokensPerMinute + OutputTokensPerMinute.
// An attempt's tokens are those the plan gives its call, taken when it
// is admitted.
type Tier struct {
	RequestsPerMinute     int64         `json:"requests_per_minute,omitempty"`
	InputTokensPerMinute  int64         `json:"input_tokens_per_minute,omitempty"`
	OutputTokensPerMinute int64         `json:"output_tokens_per_minute,omitempty"`
	Burst                 time.Duration `json:"burst,omitempty"`
}

// Outage makes the server answer 503 to every attempt from Start to
// Start+Duration after it started.
type Outage struct {
	Start    time.Duration `json:"start"`
	Duration time.Duration `json:"duration"`
}

// validateLimits checks the tier and the outage.
func validateLimits(t Tier, o Outage) error {
	switch {
	case t.RequestsPerMinute < 0 || t.InputTokensPerMinute < 0 || t.OutputTokensPerMinute < 0:
		return fmt.Errorf("%w: tier limits must not be negative", ErrInvalidOptions)
	case t.Burst < 0:
		return fmt.Errorf("%w: tier burst %s must not be negative", ErrInvalidOptions, t.Burst)
	case o.Start < 0 || o.Duration < 0:
		return fmt.Errorf("%w: outage %s:%s must not be negative", ErrInvalidOptions, o.Start, o.Duration)
	}
	return nil
}

// dimension of an organization's limit, as its headers name it.
type dimension struct {
	name  string // requests, input-tokens, output-tokens, tokens
	limit int64
	cost  func(u events.Usage) float64
}

// limiter enforces the tier for each provider's organization and the
// outage. It is safe for concurrent use.
type limiter struct {
	tier    Tier
	outage  Outage
	now     func() time.Time
	started time.Time

	mu      sync.Mutex
	buckets map[string][]tokenbucket.Bucket // by provider, one per dimension
}

func newLimiter(t Tier, o Outage, now func() time.Time) *limiter {
	if now == nil {
		now = time.Now
	}
	return &limiter{tier: t, outage: o, now: now, started: now(), buckets: make(map[string][]tokenbucket.Bucket)}
}

// dimensions are the limits of a provider's organization.
func (l *limiter) dimensions(provider string) []dimension {
	t := l.tier
	ds := []dimension{{"requests", t.RequestsPerMinute, func(events.Usage) float64 { return 1 }}}
	if provider == OpenAI {
		return append(ds, dimension{"tokens", t.InputTokensPerMinute + t.OutputTokensPerMinute,
			func(u events.Usage) float64 { return float64(u.InputTokens + u.OutputTokens) }})
	}
	return append(ds,
		dimension{"input-tokens", t.InputTokensPerMinute, func(u events.Usage) float64 { return float64(u.InputTokens) }},
		dimension{"output-tokens", t.OutputTokensPerMinute, func(u events.Usage) float64 { return float64(u.OutputTokens) }})
}

// inOutage reports whether now is in the outage window.
func (l *limiter) inOutage(now time.Time) bool {
	if l.outage.Duration <= 0 {
		return false
	}
	since := now.Sub(l.started)
	return since >= l.outage.Start && since < l.outage.Start+l.outage.Duration
}

// admit takes the attempt's usage u from provider's buckets, or returns
// how long until it fits. It sets the provider's rate-limit headers on w
// either way.
func (l *limiter) admit(w http.ResponseWriter, provider string, u events.Usage, now time.Time) time.Duration {
	ds := l.dimensions(provider)
	l.mu.Lock()
	defer l.mu.Unlock()
	bs := l.buckets[provider]
	if bs == nil {
		bs = make([]tokenbucket.Bucket, len(ds))
		for i, d := range ds {
			bs[i] = tokenbucket.Full(l.limitOf(d), now)
		}
		l.buckets[provider] = bs
	}
	var wait time.Duration
	for i, d := range ds {
		if d.limit <= 0 {
			continue
		}
		bs[i] = bs[i].Refilled(l.limitOf(d), now)
		wait = max(wait, bs[i].Wait(l.limitOf(d), d.cost(u)))
	}
	if wait == 0 {
		for i, d := range ds {
			if d.limit > 0 {
				bs[i].Level -= d.cost(u)
			}
		}
	}
	l.headers(w, provider, ds, bs, now)
	return wait
}

func (l *limiter) limitOf(d dimension) tokenbucket.Limit {
	return tokenbucket.Limit{PerMinute: float64(d.limit), Burst: l.tier.Burst}
}

// headers sets the rate-limit headers in the provider's style: Anthropic's
// anthropic-ratelimit-<dim>-{limit,remaining,reset} (reset: RFC 3339 time
// when the bucket is full again), OpenAI's x-ratelimit-{limit,remaining,
// reset}-<dim> (reset: a duration); Gemini sends none.
func (l *limiter) headers(w http.ResponseWriter, provider string, ds []dimension, bs []tokenbucket.Bucket, now time.Time) {
	h := w.Header()
	for i, d := range ds {
		if d.limit <= 0 {
			continue
		}
		remaining := strconv.FormatInt(int64(max(bs[i].Level, 0)), 10)
		full := bs[i].UntilFull(l.limitOf(d))
		switch provider {
		case Anthropic:
			h.Set("anthropic-ratelimit-"+d.name+"-limit", strconv.FormatInt(d.limit, 10))
			h.Set("anthropic-ratelimit-"+d.name+"-remaining", remaining)
			h.Set("anthropic-ratelimit-"+d.name+"-reset", now.Add(full).UTC().Format(time.RFC3339Nano))
		case OpenAI:
			h.Set("x-ratelimit-limit-"+d.name, strconv.FormatInt(d.limit, 10))
			h.Set("x-ratelimit-remaining-"+d.name, remaining)
			h.Set("x-ratelimit-reset-"+d.name, full.Round(time.Millisecond).String())
		}
	}
}

// gate answers the attempt itself when the outage or the tier refuses it:
// 503 in the outage, 429 with the wait as retry-after over the tier. It
// records the attempt in the truth (nothing billed) and returns true then.
// An admitted attempt gets the rate-limit headers and goes on.
func (s *Server) gate(w http.ResponseWriter, c callID, provider, model string, u events.Usage, rep reply) bool {
	l := s.limits
	if l == nil {
		return false
	}
	now := l.now()
	if l.inOutage(now) {
		s.ledger.record(c, provider, model, FaultOutage, events.Usage{})
		unavailable(w, provider, c)
		return true
	}
	if !l.tierSet() {
		return false
	}
	if wait := l.admit(w, provider, u, now); wait > 0 {
		s.ledger.record(c, provider, model, FaultTierLimit, events.Usage{})
		rep.fail(w, c, Decision{Fault: FaultRateLimit, RetryAfter: wait})
		return true
	}
	return false
}

// tierSet reports whether any tier limit is set.
func (l *limiter) tierSet() bool {
	return l.tier.RequestsPerMinute > 0 || l.tier.InputTokensPerMinute > 0 || l.tier.OutputTokensPerMinute > 0
}

// unavailable answers 503 in the provider's style.
func unavailable(w http.ResponseWriter, provider string, c callID) {
	switch provider {
	case Anthropic:
		anthropicError(w, providerRequestID("req_", c), http.StatusServiceUnavailable, "api_error", "Service unavailable")
	case OpenAI:
		openaiError(w, providerRequestID("req_", c), http.StatusServiceUnavailable, "server_error", "", "The service is unavailable.")
	default:
		geminiError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable.", nil)
	}
}

// costOf is the usage an attempt of call c would take from the tier:
// the plan's for a seeded server, none for a scripted one.
func (s *Server) costOf(c callID, provider string, maxOutput int64) events.Usage {
	if s.script != nil {
		return events.Usage{}
	}
	u := s.plan.Usage(provider, c.RequestID)
	if maxOutput > 0 && u.OutputTokens > maxOutput {
		u.OutputTokens = maxOutput
	}
	return u
}
