package guard

import (
	"time"

	"github.com/agentledger/ledger/internal/breaker"
)

// Shared is a fleet's shared state (package fleet implements it). Its
// methods must be safe for concurrent use.
type Shared interface {
	// Upstream returns the shared state of the upstream key, with the
	// upstream's settings.
	Upstream(key string, p Params) SharedUpstream
	// Healthy reports whether the shared state is usable now; while it is
	// not, every decision is local.
	Healthy() bool
	// Processes is the number of processes of the fleet last seen alive
	// (at least 1): a degraded Guard divides its limits by it.
	Processes() int
}

// SharedPermit is the shared breaker's admission of one attempt.
type SharedPermit struct {
	Generation uint64
	Probe      bool
}

// SharedUpstream is the shared state of one upstream. Any method may
// return ErrUnavailable (after at most the backend's short wait), and the
// Guard then decides locally. Every other error is a decision.
type SharedUpstream interface {
	// Check returns the breaker's rejection when the shared breaker
	// rejects for sure now (open, or a probe in flight), without claiming
	// anything; nil otherwise.
	Check(now time.Time) error
	// State is the shared breaker's state at now: Closed, Open (also
	// past its cooldown, until a probe is claimed) or HalfOpen (a probe
	// in flight).
	State(now time.Time) breaker.State
	// Allow admits an attempt, or returns the breaker's rejection (an
	// error wrapping breaker.ErrCircuitOpen). After the cooldown it claims
	// the fleet's single probe.
	Allow(now time.Time) (SharedPermit, error)
	// Done reports the outcome of the attempt admitted by p.
	Done(now time.Time, p SharedPermit, r breaker.Result)
	// Reserve takes cost from the shared capacity and returns the
	// dimensions it took it from (none when no limit is known: nothing
	// was taken, and nothing may be given back), or returns how long
	// until it fits and the limit it waits for (wait > 0 with a non-nil
	// *LimitError).
	Reserve(now time.Time, cost Cost) (Dims, time.Duration, *LimitError, error)
	// Observe tells the shared state what an attempt learned: the cost it
	// reserved (when Reserved) against its actual cost, the rate-limit
	// headers, and the hold a 429 asks for (zero HoldUntil: none).
	Observe(now time.Time, o SharedObservation)
	// First counts a first attempt for the retry budget.
	First(now time.Time)
	// Retry takes one retry from the budget, or returns the
	// *BudgetError that refuses it.
	Retry(now time.Time) error
	// Estimate is the fleet's estimated cost of one attempt, learned from
	// the attempts of any process; false when none is known. A Guard
	// reserves it until its own successful attempts give it its own
	// estimate, so that a process that has had none does not take the
	// token limits for free (and meet only 429s).
	Estimate() (Cost, bool)
}

// SharedObservation is what a settled attempt tells the shared state.
// When Reserved, Cost was taken at ReservedAt from the dimensions Took;
// Actual is what the attempt used (for a 429: Cost, as the fleet was
// ahead of the provider and its reservation is spent).
type SharedObservation struct {
	Reserved   bool
	Took       Dims
	ReservedAt time.Time
	Cost       Cost
	Actual     Cost
	Headers    Observed
	HoldUntil  time.Time
	HoldWhy    string
	// RateLimited: the provider answered 429, with Hint (0: none) the
	// wait it asked for (or the hold's, from the reset headers).
	RateLimited bool
	Hint        time.Duration
}
