package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	_ "github.com/agentledger/ledger/internal/provider/builtin" // the providers the fleet calls
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// ErrInvalidConfig is the sentinel that every *ConfigError wraps.
var ErrInvalidConfig = errors.New("sim: invalid config")

// ConfigError says which field of a Config breaks which rule.
type ConfigError struct {
	Field string // the Go name of the field, e.g. "Agents"
	Rule  string
	// Err is the underlying error, e.g. a *retry.PolicyError for "Policy".
	Err error
}

func (e *ConfigError) Error() string {
	s := ErrInvalidConfig.Error() + ": " + e.Field + " " + e.Rule
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalidConfig and the underlying error, if any.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}

// Limits of a Config.
const (
	MaxAgents          = 10_000
	MaxSessions        = 999_999
	MaxCallsPerSession = 99_999
)

// DefaultRunID prefixes the IDs of a run whose Config has no RunID.
const DefaultRunID = "sim"

// MaxTokens is the max_tokens (or its equivalent) of every call; it is
// above fakeprovider.MaxOutputTokens, so no answer is cut short.
const MaxTokens = 2048

// dialects are the providers the fleet can call: the built-in
// providers' dialects that have an SDK client for the simulator
// (fakekit.Dialect.Sim), in the simulator's order.
func dialects() []*fakekit.Dialect { return fakeprovider.Simulated(fakeprovider.Dialects()) }

// dialectOf returns the dialect of provider among ds.
func dialectOf(ds []*fakekit.Dialect, provider string) (*fakekit.Dialect, bool) {
	for _, d := range ds {
		if d.Provider == provider {
			return d, true
		}
	}
	return nil, false
}

// Model returns the model the fleet uses with provider (its dialect's
// Sim.Model), or "" for a provider it cannot call.
func Model(provider string) string {
	if d, ok := dialectOf(dialects(), provider); ok {
		return d.Sim.Model
	}
	return ""
}

// Config describes one simulation run. Sink is required; the zero value of
// every other field selects its default.
type Config struct {
	// Agents is the number of concurrent agents (goroutines), from 1 to
	// MaxAgents. Default 4.
	Agents int
	// Sessions is the number of sessions, from 1 to MaxSessions; an agent
	// works through one session at a time, its calls one after the other.
	// Default 10.
	Sessions int
	// CallsPerSession is the number of logical calls of each session, from
	// 1 to MaxCallsPerSession. Default 10.
	CallsPerSession int
	// Seed makes every decision of the fake provider and the retry jitter.
	Seed uint64
	// RunID prefixes every session ID (<RunID>-s000001) and request ID
	// (<RunID>-s000001-c00001), so that runs publishing into one stream
	// do not collide. Default DefaultRunID. It must keep the IDs within
	// events.IDRule.
	RunID string
	// Providers are the providers sessions are assigned to, round robin:
	// session i uses Providers[i % len(Providers)]. Default every
	// built-in provider the simulator can call, in its order
	// (fakeprovider.Providers()).
	Providers []string
	// Mix is the fault mix of the fake provider. The zero value injects no
	// faults.
	Mix fakeprovider.Mix
	// Policy is the retry policy; the zero value selects Policy().
	Policy retry.Policy
	// Sink receives every attempt event. Required. The fleet never closes
	// it.
	Sink retry.Sink
	// Breakers are the circuit breakers of the retry middleware. Nil
	// selects breakers that never open, so that the run stays
	// deterministic. Ignored when Guards is set.
	Breakers *breaker.Group
	// Guards are the middleware's guards (breaker, rate limits, retry
	// budget; local, or shared by a fleet of processes). Nil selects
	// Breakers.
	Guards *guard.Set
	// ProviderURL is the root URL of a fake provider another process
	// serves (publisher simulate --processes): the fleet calls it instead
	// of starting its own, and its Result has no Truth.
	ProviderURL string
	// Tier and Outage are the limits and the outage of the fleet's own
	// fake provider (without ProviderURL).
	Tier   fakeprovider.Tier
	Outage fakeprovider.Outage
	// Shard, when Count is set, gives this fleet the sessions i with
	// i % Count == Index only: one process of a fleet of Count.
	Shard Shard
	// Think is how long an agent waits after each call before the next:
	// its demand. Zero: none, an agent calls as fast as it can.
	Think time.Duration
	// Logger receives the events the sink refused and the fleet's own
	// records. Nil discards them.
	Logger *slog.Logger
}

// Policy returns the retry policy tuned for simulation: up to 3 retries, a
// 5 ms base delay doubling to at most 50 ms, ±20 % jitter, server hints
// honoured up to 1 s, and a 250 ms attempt timeout, which ends the stalled
// streams of billed timeouts.
func Policy() retry.Policy {
	return retry.Policy{
		MaxRetries:     3,
		BaseDelay:      5 * time.Millisecond,
		MaxDelay:       50 * time.Millisecond,
		Jitter:         0.2,
		HintCap:        time.Second,
		AttemptTimeout: 250 * time.Millisecond,
	}
}

// Shard is one process's part of a fleet's sessions.
type Shard struct{ Index, Count int }

// sessions is how many of n sessions the shard has.
func (s Shard) sessions(n int) int {
	if s.Count <= 1 {
		return n
	}
	return (n - s.Index + s.Count - 1) / s.Count
}

// session is the index of the shard's j-th session among all.
func (s Shard) session(j int) int {
	if s.Count <= 1 {
		return j
	}
	return s.Index + j*s.Count
}

// withDefaults validates c and returns it with the defaults applied.
func (c Config) withDefaults() (Config, error) {
	if c.Agents == 0 {
		c.Agents = 4
	}
	if c.Sessions == 0 {
		c.Sessions = 10
	}
	if c.CallsPerSession == 0 {
		c.CallsPerSession = 10
	}
	if c.RunID == "" {
		c.RunID = DefaultRunID
	}
	if len(c.Providers) == 0 {
		c.Providers = fakeprovider.Providers()
	} else {
		c.Providers = slices.Clone(c.Providers)
	}
	if c.Policy == (retry.Policy{}) {
		c.Policy = Policy()
	}
	switch {
	case c.Agents < 1 || c.Agents > MaxAgents:
		return c, &ConfigError{Field: "Agents", Rule: fmt.Sprintf("is %d; it must be from 1 to %d", c.Agents, MaxAgents)}
	case c.Sessions < 1 || c.Sessions > MaxSessions:
		return c, &ConfigError{Field: "Sessions", Rule: fmt.Sprintf("is %d; it must be from 1 to %d", c.Sessions, MaxSessions)}
	case c.CallsPerSession < 1 || c.CallsPerSession > MaxCallsPerSession:
		return c, &ConfigError{Field: "CallsPerSession", Rule: fmt.Sprintf("is %d; it must be from 1 to %d", c.CallsPerSession, MaxCallsPerSession)}
	case c.Sink == nil:
		return c, &ConfigError{Field: "Sink", Rule: "is nil; it is required"}
	case c.Think < 0:
		return c, &ConfigError{Field: "Think", Rule: fmt.Sprintf("is %s; it must not be negative", c.Think)}
	case c.Shard.Count < 0 || c.Shard.Count > MaxAgents || c.Shard.Index < 0 || c.Shard.Count > 0 && c.Shard.Index >= c.Shard.Count:
		return c, &ConfigError{Field: "Shard", Rule: fmt.Sprintf("is %d of %d; it must be from 0 to Count-1, Count at most %d", c.Shard.Index, c.Shard.Count, MaxAgents)}
	}
	if err := events.ValidateID("RunID", requestID(c.RunID, MaxSessions-1, MaxCallsPerSession-1)); err != nil {
		return c, &ConfigError{Field: "RunID", Rule: fmt.Sprintf("%q does not make valid IDs", c.RunID), Err: err}
	}
	if len(c.Providers) == 0 {
		return c, &ConfigError{Field: "Providers", Rule: "is empty and no provider the simulator can call is linked"}
	}
	for i, p := range c.Providers {
		if Model(p) == "" {
			return c, &ConfigError{Field: fmt.Sprintf("Providers[%d]", i), Rule: fmt.Sprintf("is %q; it must be one of %v", p, fakeprovider.Providers())}
		}
	}
	if err := c.Mix.Validate(); err != nil {
		return c, &ConfigError{Field: "Mix", Rule: "is invalid", Err: err}
	}
	if err := c.Policy.Validate(); err != nil {
		return c, &ConfigError{Field: "Policy", Rule: "is invalid", Err: err}
	}
	return c, nil
}

// sessionID is the ID of session i (from 0) of a run.
func sessionID(runID string, i int) string { return fmt.Sprintf("%s-s%06d", runID, i+1) }

// teams are the teams the simulated sessions belong to, in turn.
var teams = [...]string{"search", "ads", "support"}

// sessionLabels are the labels of every call of session i (from 0): its
// team, so that the rollups and the report have a label to answer by.
func sessionLabels(i int) api.Labels { return api.Labels{"team": teams[i%len(teams)]} }

// requestID is the ID of call j (from 0) of session i (from 0) of a run.
func requestID(runID string, i, j int) string { return fmt.Sprintf("%s-s%06d-c%05d", runID, i+1, j+1) }
