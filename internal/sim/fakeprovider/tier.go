package fakeprovider

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/tokenbucket"
)

// Faults of the tier limiter and the outage window.
const (
	// FaultTierLimit answers 429 with retry-after: the organization's
	// tier limit had no room for the attempt.
	FaultTierLimit = fakekit.FaultTierLimit
	// FaultOutage answers 503: the attempt came during the outage.
	FaultOutage = fakekit.FaultOutage
)

// Tier is the rate limit of each provider's organization (see
// fakekit.Tier); each dialect says what its organization's dimensions are
// (fakekit.Dialect.Limits). An attempt's tokens are those the plan gives
// its call, taken when it is admitted.
type Tier = fakekit.Tier

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

// inOutage reports whether now is in the outage window.
func (l *limiter) inOutage(now time.Time) bool {
	if l.outage.Duration <= 0 {
		return false
	}
	since := now.Sub(l.started)
	return since >= l.outage.Start && since < l.outage.Start+l.outage.Duration
}

// admit takes the attempt's usage u from the dialect's buckets, or returns
// how long until it fits. It sets the provider's rate-limit headers on w
// either way.
func (l *limiter) admit(w http.ResponseWriter, dialect *fakekit.Dialect, u events.Usage, now time.Time) time.Duration {
	provider := dialect.Provider
	ds := dialect.Dimensions(l.tier)
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
		if d.Limit <= 0 {
			continue
		}
		bs[i] = bs[i].Refilled(l.limitOf(d), now)
		wait = max(wait, bs[i].Wait(l.limitOf(d), d.Cost(u)))
	}
	if wait == 0 {
		for i, d := range ds {
			if d.Limit > 0 {
				bs[i].Level -= d.Cost(u)
			}
		}
	}
	if dialect.LimitHeaders != nil {
		dialect.LimitHeaders(w.Header(), l.states(ds, bs, now))
	}
	return wait
}

func (l *limiter) limitOf(d fakekit.Dimension) tokenbucket.Limit {
	return tokenbucket.Limit{PerMinute: float64(d.Limit), Burst: l.tier.Burst}
}

// states are the limited dimensions' states, for the dialect's
// rate-limit headers.
func (l *limiter) states(ds []fakekit.Dimension, bs []tokenbucket.Bucket, now time.Time) []fakekit.LimitState {
	out := make([]fakekit.LimitState, 0, len(ds))
	for i, d := range ds {
		if d.Limit <= 0 {
			continue
		}
		out = append(out, fakekit.LimitState{
			Dimension: d,
			Remaining: int64(max(bs[i].Level, 0)),
			UntilFull: bs[i].UntilFull(l.limitOf(d)),
			Now:       now,
		})
	}
	return out
}

// gate answers the attempt itself when the outage or the tier refuses it:
// 503 in the outage, 429 with the wait as retry-after over the tier. It
// records the attempt in the truth (nothing billed) and returns true then.
// An admitted attempt gets the rate-limit headers and goes on.
func (s *Server) gate(w http.ResponseWriter, c callID, d *fakekit.Dialect, model string, u events.Usage, rep fakekit.Reply) bool {
	l := s.limits
	if l == nil {
		return false
	}
	now := l.now()
	if l.inOutage(now) {
		s.ledger.record(c, d.Provider, model, FaultOutage, events.Usage{})
		rep.Fail(w, c, Decision{Fault: FaultOutage})
		return true
	}
	if !l.tierSet() {
		return false
	}
	if wait := l.admit(w, d, u, now); wait > 0 {
		s.ledger.record(c, d.Provider, model, FaultTierLimit, events.Usage{})
		rep.Fail(w, c, Decision{Fault: FaultRateLimit, RetryAfter: wait})
		return true
	}
	return false
}

// tierSet reports whether any tier limit is set.
func (l *limiter) tierSet() bool {
	return l.tier.RequestsPerMinute > 0 || l.tier.InputTokensPerMinute > 0 || l.tier.OutputTokensPerMinute > 0
}

// costOf is the usage an attempt of call c would take from the tier:
// the plan's for a seeded server, none for a scripted one.
func (s *Server) costOf(c callID, d *fakekit.Dialect, maxOutput int64) events.Usage {
	if s.script != nil {
		return events.Usage{}
	}
	u := s.plan.Usage(c.RequestID, d.CacheWrites)
	if maxOutput > 0 && u.OutputTokens > maxOutput {
		u.OutputTokens = maxOutput
	}
	return u
}
