package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/fleet"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/guardflag"
)

// FleetConfig configures WithFleetLimits. The zero value is valid.
type FleetConfig struct {
	// Process names this process in the shared state (default
	// <hostname>-<pid>-<random>). It must be unique in the fleet and at
	// most 128 bytes.
	Process string
	// Wait bounds how long a call waits for the shared state (a chunk of
	// rate-limit capacity, the probe's claim, a retry from the budget)
	// before this process decides alone (default 100 ms).
	Wait time.Duration
	// Logger is told, once each, when this process starts and stops
	// deciding alone (NATS unreachable or slow). Nil discards it.
	Logger *slog.Logger
	// Limits are the rate limits of upstreams, by a Call's Upstream
	// (provider/model by default): for an upstream whose responses say no
	// limit (Gemini sends no rate-limit headers), or to stay under a
	// lower one. A limit set here wins over one the headers say. An
	// upstream with no limit at all gets one inferred from its 429s.
	Limits map[string]RateLimits
	// RetryBudget is the fleet's retry budget; the zero value selects
	// DefaultRetryBudget.
	RetryBudget RetryBudget
}

// RateLimits are an upstream's limits per minute; 0 leaves a dimension
// unlimited (or to what the provider's headers say).
type RateLimits struct {
	RequestsPerMinute     int64
	InputTokensPerMinute  int64
	OutputTokensPerMinute int64
	// TokensPerMinute counts input plus output tokens (OpenAI's one
	// tokens limit).
	TokensPerMinute int64
}

// RetryBudget bounds the retries of an upstream across the fleet: over a
// sliding Window, retries are allowed while they stay within Percent of
// the first attempts plus MinPerMinute a minute. A call whose retry it
// refuses ends with StopBudget, and its event says which setting to
// raise.
type RetryBudget struct {
	// Percent of the first attempts, from 0 to 1000.
	Percent float64
	// MinPerMinute are the retries allowed a minute whatever the first
	// attempts (a floor for a quiet upstream).
	MinPerMinute float64
	// Window is the sliding window, from 1 s to 1 h.
	Window time.Duration
}

// DefaultRetryBudget is 20 % of first attempts plus 10 retries a minute,
// over a sliding minute.
func DefaultRetryBudget() RetryBudget {
	return RetryBudget{Percent: 100 * guard.DefaultBudgetRatio, MinPerMinute: guard.DefaultBudgetMin, Window: guard.DefaultBudgetWindow}
}

type fleetOption struct {
	conn   *Conn
	cfg    FleetConfig
	limits map[string]guard.Limits
	budget guard.Budget
}

// WithFleetLimits makes the guards of each upstream (a Call's Upstream,
// by default its provider and model) the fleet's: every process that
// uses them on conn's NATS, Go agents and gateway replicas alike, shares
// one circuit breaker (configured by WithBreaker; one process's failures
// open it for all, after the cooldown the fleet sends one probe, and
// OnStateChange is told the changes any process makes), the rate limits
// (learned from the providers' rate-limit headers, set in Limits, or
// inferred from 429s; the fleet stays under them together, and a 429
// holds every process until its reset) and a retry budget (RetryBudget).
// The state is kept in the KV bucket ledger_upstreams (docs/fleet.md);
// Middleware.BreakerState reads the fleet's breaker.
//
// NewMiddleware waits until the shared state is ready, for at most 10 s.
// When NATS is unreachable or slow, each process decides with its own
// state within Wait, and the log says so once. Waiting for capacity is no
// attempt and publishes no event; a call refused by a guard ends with an
// event of kind circuit_open or rate_limit, and its CallError's Reason is
// StopCircuitOpen, StopRateLimit or StopBudget. Close the middleware to
// leave the fleet: what this process owes it (a probe's result, failure
// counts) is written first, and a probe still under way is given up.
func WithFleetLimits(conn *Conn, c FleetConfig) MiddlewareOption {
	return func(o *middlewareOptions) error {
		switch {
		case conn == nil:
			return invalid("WithFleetLimits", "conn must not be nil")
		case c.Wait < 0:
			return invalid("WithFleetLimits", "Wait is %s; it must not be negative (0 selects %s)", c.Wait, fleet.DefaultWait)
		case len(c.Process) > 128:
			return invalid("WithFleetLimits", "Process is %d bytes long; it must be at most 128", len(c.Process))
		}
		fo := &fleetOption{conn: conn, cfg: c, limits: map[string]guard.Limits{}}
		for up, l := range c.Limits {
			gl := guard.Limits{guard.Requests: l.RequestsPerMinute, guard.InputTokens: l.InputTokensPerMinute,
				guard.OutputTokens: l.OutputTokensPerMinute, guard.Tokens: l.TokensPerMinute}
			for d, v := range gl {
				if v < 0 {
					return invalid("WithFleetLimits", "Limits[%q]: %s per minute is %d; it must not be negative", up, guard.Dim(d), v)
				}
			}
			if up == "" {
				return invalid("WithFleetLimits", "Limits: an upstream must not be empty")
			}
			fo.limits[up] = gl
		}
		rb := c.RetryBudget
		if rb == (RetryBudget{}) {
			rb = DefaultRetryBudget()
		}
		b, err := guardflag.Budget(rb.Percent, rb.MinPerMinute, rb.Window, guardflag.Names{"RetryBudget.Percent", "RetryBudget.MinPerMinute", "RetryBudget.Window"})
		if err != nil {
			return invalid("WithFleetLimits", "%v", err)
		}
		fo.budget = b
		o.fleet = fo
		return nil
	}
}

// guards opens this process's part of the fleet's state and returns the
// guards on it, with the breakers of b, told to onChange (nil: none) for
// every change of the fleet's breakers, and of this process's own while
// it decides alone.
func (f *fleetOption) guards(b breaker.Config, attemptTimeout time.Duration, onChange func(upstream, from, to string)) (*guard.Set, func(), error) {
	var gs *guard.Set
	opts := fleet.Options{Process: f.cfg.Process, Wait: f.cfg.Wait, Logger: f.cfg.Logger}
	if onChange != nil {
		opts.OnBreakerChange = func(up string, from, to breaker.State) { onChange(up, from.String(), to.String()) }
		b.OnStateChange = func(up string, from, to breaker.State) {
			if gs == nil || !gs.Shared().Healthy() {
				onChange(up, from.String(), to.String())
			}
		}
	}
	cfg := guard.Standard(b)
	cfg.Limits, cfg.Budget, cfg.AttemptTimeout = f.limits, f.budget, attemptTimeout
	gs, closeFleet, err := fleet.Guards(context.Background(), f.conn.c.NC, f.conn.c.JS, true, opts, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("ledger: WithFleetLimits: %w", err)
	}
	return gs, closeFleet, nil
}
