package sim_test

import (
	"context"
	"io"
	"log"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/anthropic"
	"github.com/agentledger/ledger/internal/provider/fakekit"
	"github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// TestMain silences the standard logger, through which genai reports every
// stream that fails, as the stalled ones here do on purpose.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// faulty has every kind of fault, often enough for a small run to see each.
var faulty = fakeprovider.Mix{RateLimit: 0.15, Overload: 0.08, ServerError: 0.08, BilledTimeout: 0.12, BadRequest: 0.05}

// testPolicy is sim.Policy with the attempt timeout a stalled stream
// costs. An answer from the loopback server takes a few milliseconds, but
// a starved 2-core machine running the race detector can delay one by
// hundreds; an attempt that times out after the provider answered is the
// blind spot the ledger cannot see (the provider billed what no event
// shows), so the timeout leaves ample room.
func testPolicy() retry.Policy {
	p := sim.Policy()
	p.AttemptTimeout = time.Second
	return p
}

func run(t *testing.T, cfg sim.Config) (*sim.Result, *retry.MemorySink) {
	t.Helper()
	sink := retry.NewMemorySink()
	cfg.Sink = sink
	if cfg.Policy == (retry.Policy{}) {
		cfg.Policy = testPolicy()
	}
	f, err := sim.New(cfg)
	require.NoError(t, err)
	res, err := f.Run(t.Context())
	require.NoError(t, err)
	return res, sink
}

// byRequest groups events by request ID, in publication order.
func byRequest(evs []events.Attempt) map[string][]events.Attempt {
	m := make(map[string][]events.Attempt)
	for _, ev := range evs {
		m[ev.RequestID] = append(m[ev.RequestID], ev)
	}
	return m
}

type sums struct{ billed, usage events.Usage }

func TestFleetEventsMatchTheTruth(t *testing.T) {
	t.Parallel()
	cfg := sim.Config{Agents: 6, Sessions: 12, CallsPerSession: 8, Seed: 1, RunID: "t1", Mix: faulty}
	res, sink := run(t, cfg)
	evs := sink.Events()
	truth := res.Truth

	// Per session and in total, what the events say was billed and used is
	// what the provider charged.
	perSession := map[string]sums{}
	var total sums
	for _, ev := range evs {
		s := perSession[ev.SessionID]
		s.billed = s.billed.Add(ev.Usage)
		total.billed = total.billed.Add(ev.Usage)
		if ev.Outcome == events.OutcomeSuccess {
			s.usage = s.usage.Add(ev.Usage)
			total.usage = total.usage.Add(ev.Usage)
		}
		perSession[ev.SessionID] = s
	}
	require.Len(t, truth.Sessions, cfg.Sessions)
	require.Len(t, perSession, cfg.Sessions)
	for id, tally := range truth.Sessions {
		assert.Equal(t, tally.Billed, perSession[id].billed, "billed of session %s", id)
		assert.Equal(t, tally.Usage, perSession[id].usage, "usage of session %s", id)
	}
	assert.Equal(t, truth.Total.Billed, total.billed)
	assert.Equal(t, truth.Total.Usage, total.usage)
	assert.NotEqual(t, truth.Total.Billed, truth.Total.Usage, "the faults cost something")
	assert.Positive(t, truth.Total.Overhead().InputTokens)
	// The dialects report reasoning and 1-hour cache writes, and the
	// events carry them as the truth has them (issue 19).
	assert.Positive(t, truth.Total.Billed.ReasoningTokens, "reasoning reaches the events")
	assert.Positive(t, truth.Total.Billed.CacheCreation1hInputTokens, "1-hour cache writes reach the events")
	// The service tier each SDK reports: Gemini's SDK types carry none.
	wantTiers := map[string][]string{
		anthropic.Name: anthropic.FakeDialect().ServiceTiers,
		openai.Name:    openai.OpenAIFakeDialect().ServiceTiers,
	}
	tiersSeen := map[string]bool{}

	// Every attempt the provider served has its event, with the usage it
	// was billed; numbered from 0, the last one final. An attempt whose
	// timeout expired before its request reached the provider (possible on
	// a starved machine) has an event the provider never saw: a retryable
	// timeout without usage.
	reqs := byRequest(evs)
	require.Len(t, reqs, cfg.Sessions*cfg.CallsPerSession)
	require.Len(t, truth.Requests, len(reqs))
	var unserved int64
	for id, attempts := range reqs {
		rt := truth.Requests[id]
		served := map[int]fakeprovider.AttemptTruth{}
		for _, a := range rt.Attempts {
			served[a.Attempt] = a
		}
		for n, ev := range attempts {
			assert.Equal(t, n, ev.Attempt)
			assert.Equal(t, n == len(attempts)-1, ev.Final)
			assert.Equal(t, rt.Provider, ev.Provider)
			assert.Equal(t, rt.Model, ev.Model)
			at, ok := served[n]
			if !ok {
				unserved++
				require.Equal(t, events.OutcomeError, ev.Outcome, "attempt %d of %s was not served", n, id)
				assert.Equal(t, events.KindTimeout, ev.Error.Kind, "attempt %d of %s was not served", n, id)
				assert.True(t, ev.Usage.IsZero())
				continue
			}
			delete(served, n)
			assert.Equal(t, at.Billed, ev.Usage, "usage of attempt %d of %s", n, id)
			assert.Equal(t, at.Outcome == fakeprovider.FaultNone, ev.Outcome == events.OutcomeSuccess, "attempt %d of %s", n, id)
			if ev.Outcome == events.OutcomeSuccess {
				assert.NotEmpty(t, ev.ProviderRequestID, "provider request id of %s", id)
				assert.Equal(t, fakekit.ServiceTierFor(id, wantTiers[ev.Provider]), ev.ServiceTier, "service tier of %s", id)
				tiersSeen[ev.ServiceTier] = true
			}
		}
		assert.Empty(t, served, "attempts of %s served without an event", id)
	}
	assert.LessOrEqual(t, unserved, int64(2), "attempts that never reached the provider are rare")
	assert.True(t, tiersSeen["priority"] && tiersSeen["standard"], "tiers seen: %v", tiersSeen)

	// The fleet's own counts agree.
	c := res.Counts
	assert.Equal(t, int64(len(reqs)), c.Calls)
	assert.Equal(t, truth.Total.RequestsSucceeded, c.CallsSucceeded)
	assert.Equal(t, c.Calls-c.CallsSucceeded, c.CallsFailed)
	assert.Equal(t, int64(len(evs)), c.Attempts)
	assert.Equal(t, truth.Total.Attempts+unserved, c.Attempts)
	assert.Equal(t, c.Attempts-c.Calls, c.Retries)
	assert.Equal(t, truth.Total.Billed, c.Billed)
	assert.Equal(t, truth.Total.Usage, c.Usage)
	assert.Zero(t, c.SinkErrors)
	assert.Equal(t, truth.Total.Succeeded, c.Outcomes[sim.OutcomeSuccess])

	// Every fault showed up, classified as the contract says.
	for _, f := range []fakeprovider.Fault{fakeprovider.FaultRateLimit, fakeprovider.FaultOverload, fakeprovider.FaultServerError,
		fakeprovider.FaultBilledTimeout, fakeprovider.FaultTimeout, fakeprovider.FaultBadRequest} {
		assert.Positive(t, truth.Total.Outcomes[f], "outcome %s", f)
	}
	assert.Equal(t, truth.Total.Outcomes[fakeprovider.FaultRateLimit], c.Outcomes[string(events.KindRateLimit)])
	assert.Equal(t, truth.Total.Outcomes[fakeprovider.FaultOverload], c.Outcomes[string(events.KindOverloaded)])
	assert.Equal(t, truth.Total.Outcomes[fakeprovider.FaultServerError], c.Outcomes[string(events.KindServer)])
	assert.Equal(t, truth.Total.Outcomes[fakeprovider.FaultBadRequest], c.Outcomes[string(events.KindClient)])
	assert.Equal(t, truth.Total.Outcomes[fakeprovider.FaultBilledTimeout]+truth.Total.Outcomes[fakeprovider.FaultTimeout]+unserved,
		c.Outcomes[string(events.KindTimeout)])
	assert.Zero(t, truth.Unidentified)
	assert.Zero(t, truth.Total.Outcomes[fakeprovider.FaultInvalid], "the SDKs' requests are all understood")

	// Sessions went round robin over the providers.
	seen := map[string]bool{}
	for _, rt := range truth.Requests {
		seen[rt.Provider] = true
	}
	assert.Len(t, seen, 3)
}

func TestBilledTimeoutIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"anthropic", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			cfg := sim.Config{
				Agents: 2, Sessions: 2, CallsPerSession: 5, Seed: 9, RunID: "bt",
				Providers: []string{provider},
				Mix:       fakeprovider.Mix{BilledTimeout: 0.5},
			}
			res, sink := run(t, cfg)
			found := 0
			for id, attempts := range byRequest(sink.Events()) {
				for n := 0; n+1 < len(attempts); n++ {
					stalled, next := attempts[n], attempts[n+1]
					if stalled.Outcome != events.OutcomeError || next.Outcome != events.OutcomeSuccess {
						continue
					}
					found++
					require.NotNil(t, stalled.Error)
					assert.Equal(t, events.KindTimeout, stalled.Error.Kind)
					assert.True(t, stalled.Error.Retryable)
					assert.False(t, stalled.Final)
					assert.Positive(t, stalled.Usage.InputTokens, "the stalled attempt was billed its input")
					assert.Equal(t, int64(fakeprovider.StalledOutputTokens), stalled.Usage.OutputTokens)
					assert.Equal(t, next.Usage.InputTokens, stalled.Usage.InputTokens, "the retry resent the same input")
					assert.Equal(t, next.Usage.CacheReadInputTokens, stalled.Usage.CacheReadInputTokens)
					assert.True(t, next.Final)
					rt := res.Truth.Requests[id]
					assert.Equal(t, fakeprovider.FaultBilledTimeout, rt.Attempts[n].Outcome)
					assert.Equal(t, rt.Usage, next.Usage)
				}
			}
			assert.Positive(t, found, "some call stalled once and then succeeded")
			assert.Greater(t, res.Truth.Total.Billed.InputTokens, res.Truth.Total.Usage.InputTokens)
		})
	}
}

func TestSameSeedSameTruth(t *testing.T) {
	t.Parallel()
	// Without stalls and with a long attempt timeout, no attempt's outcome
	// depends on how fast the machine is.
	mix := faulty
	mix.BilledTimeout = 0
	policy := sim.Policy()
	policy.AttemptTimeout = 10 * time.Second
	cfg := sim.Config{Agents: 5, Sessions: 6, CallsPerSession: 5, Seed: 77, RunID: "det", Mix: mix, Policy: policy}
	a, _ := run(t, cfg)
	b, _ := run(t, cfg)
	assert.Equal(t, a.Truth, b.Truth)
	assert.Equal(t, a.Counts, b.Counts)

	cfg.Seed = 78
	c, _ := run(t, cfg)
	assert.NotEqual(t, a.Truth.Total, c.Truth.Total, "another seed, another run")
}

// Issue 20: the simulator labels its calls, --labels on every one and
// --teams by session, so that its runs can be reported by label.
func TestFleetLabels(t *testing.T) {
	_, sink := run(t, sim.Config{Agents: 2, Sessions: 4, CallsPerSession: 2, Seed: 3, Mix: fakeprovider.Mix{ServerError: 0.3},
		Labels: api.Labels{"env": "sim"}, Teams: 2})
	evs := sink.Events()
	require.NotEmpty(t, evs)
	teams := map[string]bool{}
	for _, ev := range evs {
		require.NoError(t, ev.Validate())
		assert.Equal(t, "sim", ev.Labels["env"])
		assert.Len(t, ev.Labels, 2)
		teams[ev.Labels["team"]] = true
	}
	assert.Equal(t, map[string]bool{"team-0": true, "team-1": true}, teams)
}

func TestConfigValidation(t *testing.T) {
	sink := retry.NewMemorySink()
	tests := []struct {
		name  string
		cfg   sim.Config
		field string
	}{
		{"no sink", sim.Config{}, "Sink"},
		{"negative agents", sim.Config{Sink: sink, Agents: -1}, "Agents"},
		{"too many agents", sim.Config{Sink: sink, Agents: sim.MaxAgents + 1}, "Agents"},
		{"negative sessions", sim.Config{Sink: sink, Sessions: -3}, "Sessions"},
		{"too many calls", sim.Config{Sink: sink, CallsPerSession: sim.MaxCallsPerSession + 1}, "CallsPerSession"},
		{"run id with a dot", sim.Config{Sink: sink, RunID: "a.b"}, "RunID"},
		{"run id too long", sim.Config{Sink: sink, RunID: string(make([]byte, 120))}, "RunID"},
		{"unknown provider", sim.Config{Sink: sink, Providers: []string{"anthropic", "mistral"}}, "Providers[1]"},
		{"bad mix", sim.Config{Sink: sink, Mix: fakeprovider.Mix{RateLimit: 1.2}}, "Mix"},
		{"bad policy", sim.Config{Sink: sink, Policy: retry.Policy{MaxRetries: 1}}, "Policy"},
		{"bad labels", sim.Config{Sink: sink, Labels: api.Labels{"Team": "x"}}, "Labels"},
		{"negative teams", sim.Config{Sink: sink, Teams: -1}, "Teams"},
		{"too many teams", sim.Config{Sink: sink, Teams: sim.MaxTeams + 1}, "Teams"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sim.New(tt.cfg)
			require.ErrorIs(t, err, sim.ErrInvalidConfig)
			var ce *sim.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field)
		})
	}

	f, err := sim.New(sim.Config{Sink: sink})
	require.NoError(t, err)
	got := f.Config()
	assert.Equal(t, 4, got.Agents)
	assert.Equal(t, sim.DefaultRunID, got.RunID)
	assert.Equal(t, fakeprovider.Providers(), got.Providers)
	assert.Equal(t, []string{"anthropic", "openai", "gemini"}, got.Providers,
		"the round robin of the simulator before its providers came from the registry: the same seed gives the same truth")
	assert.Equal(t, sim.Policy(), got.Policy)
	assert.Equal(t, int64(100), f.CallsTotal())
}

func TestRunOnce(t *testing.T) {
	f, err := sim.New(sim.Config{Sink: retry.NewMemorySink(), Sessions: 1, CallsPerSession: 1})
	require.NoError(t, err)
	_, err = f.Run(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sim.Progress{CallsDone: 1, CallsTotal: 1, Attempts: 1}, f.Progress())
	_, err = f.Run(t.Context())
	require.ErrorIs(t, err, sim.ErrAlreadyRun)
}

// cancelingSink cancels the run after n events.
type cancelingSink struct {
	*retry.MemorySink
	n      int64
	seen   atomic.Int64
	cancel context.CancelFunc
}

func (s *cancelingSink) Publish(ctx context.Context, ev *events.Attempt) error {
	if s.seen.Add(1) == s.n {
		s.cancel()
	}
	return s.MemorySink.Publish(ctx, ev)
}

func TestRunStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sink := &cancelingSink{MemorySink: retry.NewMemorySink(), n: 20, cancel: cancel}
	// Every attempt stalls half the time, so cancellation finds agents
	// waiting on the provider.
	f, err := sim.New(sim.Config{Agents: 4, Sessions: 100, CallsPerSession: 100, Seed: 3, Sink: sink,
		Mix: fakeprovider.Mix{BilledTimeout: 0.5}, Policy: testPolicy()})
	require.NoError(t, err)
	begin := time.Now()
	res, err := f.Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, res)
	assert.Less(t, time.Since(begin), 10*time.Second)
	assert.Less(t, res.Counts.Calls, f.CallsTotal())

	// Every call the fleet began ended with exactly one final event.
	reqs := byRequest(sink.Events())
	assert.Equal(t, int64(len(reqs)), res.Counts.Calls)
	for id, attempts := range reqs {
		finals := 0
		for _, ev := range attempts {
			if ev.Final {
				finals++
			}
		}
		assert.Equal(t, 1, finals, "final events of %s", id)
		assert.True(t, attempts[len(attempts)-1].Final)
	}
	assert.Positive(t, res.Counts.Outcomes[string(events.KindCanceled)], "calls under way were recorded as canceled")
}
