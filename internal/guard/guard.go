package guard

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// Set holds one Guard per upstream key, created on first use. It is safe
// for concurrent use; guards are never removed, so keys should come from a
// bounded set.
type Set struct {
	cfg      Config // normalized
	breakers *breaker.Group

	mu     sync.RWMutex
	guards map[string]*Guard
}

// New returns an empty Set for cfg, or an error wrapping ErrInvalidConfig
// (or breaker.ErrInvalidConfig) that names the field and the rule.
func New(cfg Config) (*Set, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	bc := cfg.Breaker
	bc.Now = cfg.Now
	g, err := breaker.NewGroup(bc)
	if err != nil {
		return nil, err
	}
	return &Set{cfg: cfg, breakers: g, guards: make(map[string]*Guard)}, nil
}

// FromBreakers returns a Set whose guards have only the breakers of g (no
// rate limits, no retry budget, no shared state): the middleware's
// behaviour before guards.
func FromBreakers(g *breaker.Group, now func() time.Time) *Set {
	cfg, _ := Config{Now: now}.normalize()
	return &Set{cfg: cfg, breakers: g, guards: make(map[string]*Guard)}
}

// Get returns the guard of key, creating it on first use.
func (s *Set) Get(key string) *Guard {
	s.mu.RLock()
	g := s.guards[key]
	s.mu.RUnlock()
	if g != nil {
		return g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g = s.guards[key]; g != nil {
		return g
	}
	g = &Guard{key: key, set: s, br: s.breakers.Get(key), configured: s.cfg.limitsOf(key)}
	if s.cfg.Budget.On {
		g.budget = newWindow(s.cfg.Budget.Window)
	}
	if s.cfg.Shared != nil {
		th, cd := s.cfg.Breaker.FailureThreshold, s.cfg.Breaker.Cooldown
		if th == 0 {
			th = breaker.DefaultFailureThreshold
		}
		if cd == 0 {
			cd = breaker.DefaultCooldown
		}
		g.shared = s.cfg.Shared.Upstream(key, Params{
			FailureThreshold: th, Cooldown: cd, Burst: s.cfg.Burst, Budget: s.cfg.Budget, AttemptTimeout: s.cfg.AttemptTimeout,
			Configured: g.configured,
		})
	}
	s.guards[key] = g
	return g
}

// AccountKey is the key of an upstream's guard for one account of it:
// upstream+"@"+account. The rate limits, holds and retry budget of a
// call with an account (retry.Call.Account) are that guard's, apart from
// every other account's; its breaker stays the upstream's, shared by
// all. Limits configured for the upstream apply to each of its accounts.
func AccountKey(upstream, account string) string { return upstream + "@" + account }

// limitsOf returns the limits configured for key, or, for an account's
// key (AccountKey) without limits of its own, those of its upstream.
func (c *Config) limitsOf(key string) Limits {
	if l, ok := c.Limits[key]; ok {
		return l
	}
	if i := strings.LastIndexByte(key, '@'); i >= 0 {
		return c.Limits[key[:i]]
	}
	return Limits{}
}

// Guard is the breaker, rate limiter and retry budget of one upstream. It
// is safe for concurrent use.
type Guard struct {
	key        string
	set        *Set
	br         *breaker.Breaker
	shared     SharedUpstream // nil without shared state
	configured Limits

	mu     sync.Mutex
	lim    limiter
	budget window
	est    Estimate
}

// Key is the upstream's key.
func (g *Guard) Key() string { return g.key }

// Breaker is the upstream's local breaker.
func (g *Guard) Breaker() *breaker.Breaker { return g.br }

// BreakerState is the state of the breaker that decides now: the fleet's
// while the shared state is healthy, else this process's.
func (g *Guard) BreakerState() breaker.State {
	if g.sharedOK() {
		return g.shared.State(g.set.cfg.Now())
	}
	return g.br.State()
}

// ProbeInFlight reports whether err is the fleet's breaker refusing
// because the fleet's probe is in flight (half-open): its verdict comes
// within the probe's attempt, and a caller may wait for it rather than
// fail. A process's own breaker's refusals are never such.
func (g *Guard) ProbeInFlight(err error) bool {
	var oe *breaker.OpenError
	return g.sharedOK() && errors.As(err, &oe) && oe.State == breaker.HalfOpen
}

// PacesRateLimits reports whether the guards keep the upstream's rate
// limits (Config.RateLimits): a retry after a 429 then waits for the hold
// and the capacity, and is not taken from the retry budget.
func (g *Guard) PacesRateLimits() bool { return g.set.cfg.RateLimits }

// Shared is the set's shared backend, nil without one.
func (s *Set) Shared() Shared { return s.cfg.Shared }

// sharedOK reports whether the shared state decides now.
func (g *Guard) sharedOK() bool { return g.shared != nil && g.set.cfg.Shared.Healthy() }

// Permit is a breaker's admission of one attempt, handed back to Done.
type Permit struct {
	local                 breaker.Permit
	shared                SharedPermit
	localHeld, sharedHeld bool
}

// Check returns the breaker's rejection when the upstream's breaker
// rejects for sure (open within its cooldown, or a probe in flight),
// without claiming anything: a caller checks it before waiting for
// capacity that it could not use.
func (g *Guard) Check() error {
	if g.sharedOK() {
		if err := g.shared.Check(g.set.cfg.Now()); !errors.Is(err, ErrUnavailable) {
			return err
		}
	}
	return g.br.Check()
}

// Allow asks the breaker to admit an attempt. The shared breaker decides
// while the shared state is healthy (the local one is told the outcome
// too, to stay warm); the local one otherwise. A rejection wraps
// breaker.ErrCircuitOpen.
func (g *Guard) Allow() (Permit, error) {
	var p Permit
	if g.sharedOK() {
		sp, err := g.shared.Allow(g.set.cfg.Now())
		switch {
		case err == nil:
			p.shared, p.sharedHeld = sp, true
			p.local, err = g.br.Allow()
			p.localHeld = err == nil
			return p, nil
		case !errors.Is(err, ErrUnavailable):
			return p, err
		}
	}
	lp, err := g.br.Allow()
	if err != nil {
		return p, err
	}
	p.local, p.localHeld = lp, true
	return p, nil
}

// Done reports the outcome of the attempt admitted by p.
func (g *Guard) Done(p Permit, r breaker.Result) {
	if p.sharedHeld {
		g.shared.Done(g.set.cfg.Now(), p.shared, r)
	}
	if p.localHeld {
		g.br.Done(p.local, r)
	}
}

// Reservation is the capacity an attempt took, handed back to Settle.
type Reservation struct {
	cost   Cost
	took   Dims      // the dimensions cost was taken from
	at     time.Time // when
	where  uint8     // 0 none, 1 local, 2 shared
	sealed bool
}

const (
	reservedLocal  = 1
	reservedShared = 2
)

// Reserve takes the estimated cost of one attempt from the upstream's
// rate limits: the shared capacity while the shared state is healthy, the
// local buckets otherwise. It returns either the reservation (wait 0) or
// how long until the cost fits and the limit it waits for; nothing is
// taken then. Without rate limits it returns at once.
func (g *Guard) Reserve() (Reservation, time.Duration, *LimitError) {
	if !g.set.cfg.RateLimits {
		return Reservation{}, 0, nil
	}
	now := g.set.cfg.Now()
	g.mu.Lock()
	cost, known := g.est.Cost(), g.est.Known()
	g.mu.Unlock()
	if !known && g.shared != nil {
		if c, ok := g.shared.Estimate(); ok {
			cost = c
		}
	}
	if g.sharedOK() {
		took, wait, lerr, err := g.shared.Reserve(now, cost)
		if err == nil {
			if wait > 0 {
				return Reservation{}, wait, lerr
			}
			if !took.Any() {
				return Reservation{}, 0, nil // no limit known: nothing taken
			}
			return Reservation{cost: cost, took: took, at: now, where: reservedShared}, 0, nil
		}
	}
	share := 1
	if g.set.cfg.Shared != nil {
		share = g.set.cfg.Shared.Processes()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	lim := g.lim.limits(now, g.configured)
	wait, dim, held := g.lim.reserve(now, lim, share, g.set.cfg.Burst, cost)
	switch {
	case wait == 0 && !lim.Any():
		return Reservation{}, 0, nil // no limit known: nothing taken
	case wait == 0:
		return Reservation{cost: cost, took: lim.Dims(), at: now, where: reservedLocal}, 0, nil
	case held:
		return Reservation{}, wait, &LimitError{Upstream: g.key, Hold: true, Until: g.lim.hold, Reason: g.lim.holdWhy}
	}
	return Reservation{}, wait, &LimitError{Upstream: g.key, Dim: dim, PerMinute: lim[dim] / int64(max(1, share))}
}

// Outcome is what became of an attempt, for Settle.
type Outcome struct {
	// Made is false when the attempt was not made after all (its
	// reservation is given back whole).
	Made bool
	// Success: the attempt succeeded (its usage feeds the estimates).
	Success bool
	// RateLimited: the provider answered 429.
	RateLimited bool
	// Usage is what the provider billed the attempt.
	Usage events.Usage
	// Hint is the provider's Retry-After, valid when HasHint.
	Hint    time.Duration
	HasHint bool
	// Header is the response's header, for its rate-limit headers; nil
	// when there was no response.
	Header http.Header
	// RateLimits reads Header's rate-limit headers in the style of the
	// upstream's provider; nil when it sends none (or is not known).
	RateLimits RateLimitParser
}

// Settle closes the reservation of an attempt with its outcome: it gives
// back what was reserved beyond the actual cost (all of it when the
// attempt was not made), learns the limits the headers say, and holds the
// upstream until the hint (or the reset) of a 429. A 429 gives nothing
// back: it says the fleet was ahead of the provider, so what it reserved
// is spent (giving it back let capacity that never existed circulate).
// It is a no-op without rate limits. Settle a reservation once.
func (g *Guard) Settle(res *Reservation, o Outcome) {
	if !g.set.cfg.RateLimits || res.sealed {
		return
	}
	res.sealed = true
	now := g.set.cfg.Now()
	var actual Cost
	switch {
	case o.Made && o.RateLimited:
		actual = res.cost // spent: the fleet was ahead
	case o.Made:
		actual = costOf(o.Usage)
	}
	var obs Observed
	if o.RateLimits != nil {
		obs = o.RateLimits.RateLimits(o.Header, now)
	}
	var hold time.Time
	var why string
	var hint time.Duration
	if o.RateLimited {
		hold, why = holdOf(now, &o, &obs)
		if !hold.IsZero() {
			hint = hold.Sub(now)
		}
	}
	g.mu.Lock()
	if o.Success {
		g.est.Add(costOf(o.Usage))
	}
	if res.where == reservedLocal {
		g.lim.adjust(res.cost, actual)
	}
	g.lim.observe(&obs, now)
	if o.RateLimited {
		g.lim.rateLimited(now, hint, g.configured)
	}
	if !hold.IsZero() {
		g.lim.holdUntil(hold, why)
	}
	g.mu.Unlock()
	if g.shared != nil && (res.where == reservedShared || !obs.Empty() || o.RateLimited) {
		g.shared.Observe(now, SharedObservation{
			Reserved: res.where == reservedShared, Took: res.took, ReservedAt: res.at, Cost: res.cost, Actual: actual,
			Headers: obs, HoldUntil: hold, HoldWhy: why, RateLimited: o.RateLimited, Hint: hint,
		})
	}
}

// costOf is the cost of an attempt that used u.
func costOf(u events.Usage) Cost {
	return Cost{Requests: 1, InputTokens: float64(u.InputTokens), OutputTokens: float64(u.OutputTokens),
		Tokens: float64(u.InputTokens + u.OutputTokens)}
}

// holdOf is how long a 429 holds the upstream: its Retry-After, else the
// latest reset of a dimension with nothing remaining; zero when neither is
// known.
func holdOf(now time.Time, o *Outcome, obs *Observed) (time.Time, string) {
	if o.HasHint {
		return now.Add(o.Hint), "429 with retry-after " + o.Hint.String()
	}
	var until time.Time
	var dim Dim
	for d := range NumDims {
		if obs.HasRemaining[d] && obs.Remaining[d] == 0 && obs.Reset[d].After(until) {
			until, dim = obs.Reset[d], d
		}
	}
	if until.After(now) {
		return until, "429 with no " + dim.String() + " remaining until the reset"
	}
	return time.Time{}, ""
}

// First counts a first attempt for the retry budget.
func (g *Guard) First() {
	if !g.set.cfg.Budget.On {
		return
	}
	now := g.set.cfg.Now()
	g.mu.Lock()
	g.budget.addFirst(now)
	g.mu.Unlock()
	if g.shared != nil {
		g.shared.First(now)
	}
}

// Retry takes one retry from the budget, or returns the *BudgetError that
// refuses it. Without a budget it returns nil.
func (g *Guard) Retry() error {
	b := g.set.cfg.Budget
	if !b.On {
		return nil
	}
	now := g.set.cfg.Now()
	if g.sharedOK() {
		err := g.shared.Retry(now)
		if !errors.Is(err, ErrUnavailable) {
			if err == nil {
				g.mu.Lock()
				g.budget.addRetry(now)
				g.mu.Unlock()
			}
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	first, retries := g.budget.sums(now)
	if !b.Allows(first, retries) {
		return &BudgetError{Upstream: g.key, Retries: retries, First: first, Ratio: b.Ratio, Min: b.Min, Window: b.Window}
	}
	g.budget.addRetry(now)
	return nil
}
