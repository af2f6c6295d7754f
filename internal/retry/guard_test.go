package retry

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
)

// newGuardedHarness is newHarness with guards of cfg on the fake clock.
func newGuardedHarness(t *testing.T, cfg guard.Config) *harness {
	t.Helper()
	return newHarness(t, func(o *Options) {
		cfg.Now = GuardClock(o.Clock)
		gs, err := guard.New(cfg)
		require.NoError(t, err)
		o.Guards = gs
		o.RateLimits = func(string) guard.RateLimitParser { return testRateLimits }
	})
}

// testRateLimits are the tests' rate-limit headers, the requests
// dimension only.
var testRateLimits = guard.RateLimitHeaders{{Dim: guard.Requests, Limit: "Test-Requests-Limit", Remaining: "Test-Requests-Remaining"}}

// rateHeader is a response header (testRateLimits) saying rpm requests
// per minute, with remaining left.
func rateHeader(rpm, remaining int) http.Header {
	h := http.Header{}
	h.Set("test-requests-limit", strconv.Itoa(rpm))
	h.Set("test-requests-remaining", strconv.Itoa(remaining))
	return h
}

// Without Options.RateLimits, a middleware reads the rate-limit headers
// the call's provider registered (RegisterRateLimits, which
// provider.Register calls), and no other provider's.
func TestRegisteredRateLimits(t *testing.T) {
	RegisterRateLimits("retry-test-registered", testRateLimits)
	h := newHarness(t, func(o *Options) {
		gs, err := guard.New(guard.Config{RateLimits: true, Now: GuardClock(o.Clock)})
		require.NoError(t, err)
		o.Guards = gs
	})
	for _, tt := range []struct {
		provider string
		waits    int
	}{{"retry-test-registered", 1}, {"retry-test-unregistered", 0}} {
		t.Run(tt.provider, func(t *testing.T) {
			before := h.m.Stats().Waits
			call := Call{SessionID: "sess-1", Provider: tt.provider, Model: "m"}
			ok := &scripted{steps: []step{{report: Report{Header: rateHeader(60, 0)}}}}
			for range 2 {
				_, err := Do(context.Background(), h.m, call, ok.fn)
				require.NoError(t, err)
			}
			assert.Equal(t, uint64(tt.waits), h.m.Stats().Waits-before)
		})
	}
}

// A wait for capacity is no attempt: no event, no call of fn; it is
// counted in Stats.Waits and slept on the middleware's clock.
func TestDoWaitsForCapacityWithoutAnEvent(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true})
	ok := &scripted{steps: []step{{report: Report{Header: rateHeader(60, 59)}}}}
	// The first call teaches the limit (60/min: a bucket of one request,
	// refilled every second) without being limited itself; the second
	// takes the full bucket and the third waits a second.
	_, err := Do(context.Background(), h.m, testCall, ok.fn)
	require.NoError(t, err)
	_, err = Do(context.Background(), h.m, testCall, ok.fn)
	require.NoError(t, err)
	_, err = Do(context.Background(), h.m, testCall, ok.fn)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Second + time.Microsecond}, h.clock.Sleeps())
	st := h.m.Stats()
	assert.Equal(t, uint64(1), st.Waits)
	assert.Equal(t, uint64(3), st.Attempts)
	assert.Equal(t, uint64(3), st.Events)
	assert.Len(t, ok.calls(), 3)
	assert.Zero(t, st.Rejections)
}

// A wait past the caller's deadline ends the call with a final event of
// kind rate_limit, status 0, whose message names the limit; fn is not
// called.
func TestDoRateLimitPastDeadline(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true, Limits: map[string]guard.Limits{"anthropic/claude-test": {guard.Requests: 6}}})
	ok := &scripted{steps: []step{{}}}
	_, err := Do(context.Background(), h.m, testCall, ok.fn) // takes the bucket (one request)
	require.NoError(t, err)
	h.sink.Reset()
	ctx, cancel := context.WithDeadline(context.Background(), h.clock.Now().Add(5*time.Second))
	defer cancel()
	_, err = Do(ctx, h.m, testCall, ok.fn) // the next one is 10 s away
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopRateLimit, ce.Reason)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Equal(t, 0, ce.Attempts)
	evs := h.sink.Events()
	require.Len(t, evs, 1)
	requireCallEvents(t, evs, testCall)
	e := evs[0].Error
	assert.Equal(t, events.KindRateLimit, e.Kind)
	assert.Equal(t, 0, e.Status)
	assert.False(t, e.Retryable)
	assert.Equal(t, "process rate limit of anthropic/claude-test: 6 requests/min: capacity in 10.000001s, past the caller's deadline", e.Message)
	assert.Len(t, ok.calls(), 1)
	assert.Empty(t, h.clock.Sleeps(), "nothing was waited for")
	assert.Equal(t, uint64(1), h.m.Stats().Rejections)
}

// A wait longer than HintCap ends the call too, even without a deadline.
func TestDoRateLimitOverHintCap(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true})
	limited := &scripted{steps: []step{{err: statusErr(429, 0, "retry-after", "120")}}}
	_, err := Do(context.Background(), h.m, testCall, limited.fn)
	require.Error(t, err) // the hint is over the cap: the call ends at once
	h.sink.Reset()
	_, err = Do(context.Background(), h.m, testCall, limited.fn)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopRateLimit, ce.Reason)
	ev := h.sink.Events()[0]
	assert.Contains(t, ev.Error.Message, "process hold of anthropic/claude-test until ")
	assert.Contains(t, ev.Error.Message, "over the longest wait (1m0s)")
	assert.Len(t, limited.calls(), 1, "the held call made no attempt")
}

// A 429 with a hint holds the upstream: another call waits it out before
// its first attempt instead of discovering the 429 for itself.
func TestDo429HoldsOtherCalls(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true})
	p := h.m.policy
	p.MaxRetries = 0
	h.m.policy = p
	limited := &scripted{steps: []step{{err: statusErr(429, 0, "retry-after-ms", "700")}}}
	_, err := Do(context.Background(), h.m, testCall, limited.fn)
	require.Error(t, err)
	other := Call{SessionID: "sess-2", Provider: testCall.Provider, Model: testCall.Model}
	ok := &scripted{steps: []step{{}}}
	_, err = Do(context.Background(), h.m, other, ok.fn)
	require.NoError(t, err)
	// The hold, then (no limit being known, one is inferred from the
	// hint: 90 % of one request per 700 ms) what the refill still needs.
	assert.Equal(t, []time.Duration{700 * time.Millisecond, 69231 * time.Microsecond}, h.clock.Sleeps())
	assert.Len(t, ok.calls(), 1)
	assert.Equal(t, uint64(2), h.m.Stats().Waits)
	assert.Equal(t, 2, h.sink.Len(), "one event per attempt; the wait has none")
}

// With accounts, a 429 holds only its own account's calls, while the
// breaker stays the upstream's: another account's failures open it for
// all.
func TestDoAccountsKeepLimitsApartAndShareTheBreaker(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true, Breaker: breaker.Config{FailureThreshold: 1, Cooldown: time.Hour}})
	p := h.m.policy
	p.MaxRetries = 0
	h.m.policy = p
	a := Call{SessionID: "sess-a", Provider: testCall.Provider, Model: testCall.Model, Account: "acct-a"}
	b := Call{SessionID: "sess-b", Provider: testCall.Provider, Model: testCall.Model, Account: "acct-b"}
	_, err := Do(context.Background(), h.m, a, (&scripted{steps: []step{{err: statusErr(429, 0, "retry-after-ms", "700")}}}).fn)
	require.Error(t, err)
	ok := &scripted{steps: []step{{}}}
	_, err = Do(context.Background(), h.m, b, ok.fn)
	require.NoError(t, err)
	assert.Empty(t, h.clock.Sleeps(), "b's account is not held")
	_, err = Do(context.Background(), h.m, a, ok.fn)
	require.NoError(t, err)
	// The hold, then the refill wait after it (the 429 spent a's allowance).
	assert.Equal(t, []time.Duration{700 * time.Millisecond, 69231 * time.Microsecond}, h.clock.Sleeps(), "a's account is")

	_, err = Do(context.Background(), h.m, b, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
	require.Error(t, err)
	_, err = Do(context.Background(), h.m, a, ok.fn)
	require.ErrorIs(t, err, ErrCircuitOpen, "b's failure opened the upstream's breaker for a too")

	_, err = Do(context.Background(), h.m, Call{SessionID: "s", Provider: "p", Model: "m", Account: strings.Repeat("x", 129)}, ok.fn)
	require.ErrorContains(t, err, "account")
}

// A retry after a 429 is not taken from the retry budget when the guards
// keep the rate limits: the hold paces it (a storm of 429s at the start of
// a run, before any limit was known, spent the budget and failed calls).
func TestDo429RetriesOutsideTheBudget(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true, Budget: guard.Budget{On: true, Ratio: 0.01, Min: 1, Window: time.Minute, Exact: true}})
	limited := &scripted{steps: []step{
		{err: statusErr(429, 0, "retry-after-ms", "5")}, {err: statusErr(429, 0, "retry-after-ms", "5")}, {}}}
	_, err := Do(context.Background(), h.m, testCall, limited.fn)
	require.NoError(t, err, "two retries; the budget allows one")
	assert.Len(t, limited.calls(), 3)
	// A 503's retry still is the budget's: one allowed, then spent.
	failing := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	_, err = Do(context.Background(), h.m, testCall, failing.fn)
	require.ErrorIs(t, err, ErrBudgetSpent)
}

// When the retry budget is spent, the failed attempt is the final one and
// its message says why.
func TestDoRetryBudgetSpent(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{Budget: guard.Budget{On: true, Ratio: 0.5, Min: 1}})
	failing := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	// Call 1: first attempt, then 0.5*1+1 = 1.5: one retry; the second
	// retry is refused.
	_, err := Do(context.Background(), h.m, testCall, failing.fn)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopBudget, ce.Reason)
	assert.ErrorIs(t, err, ErrBudgetSpent)
	assert.Equal(t, 2, ce.Attempts)
	evs := h.sink.Events()
	require.Len(t, evs, 2)
	requireCallEvents(t, evs, testCall)
	last := evs[1].Error
	assert.Equal(t, events.KindOverloaded, last.Kind, "the attempt keeps what the provider said")
	assert.Equal(t, 503, last.Status)
	assert.True(t, last.Retryable)
	assert.Contains(t, last.Message, "; not retried: process retry budget of anthropic/claude-test spent: 1 retries for 1 first attempts")
}

// A call whose breaker is open is rejected at once, before any wait for
// capacity.
func TestDoOpenBreakerDoesNotWaitForCapacity(t *testing.T) {
	h := newGuardedHarness(t, guard.Config{RateLimits: true, Limits: map[string]guard.Limits{"anthropic/claude-test": {guard.Requests: 1}},
		Breaker: breaker.Config{FailureThreshold: 1, Cooldown: time.Hour}})
	p := DefaultPolicy()
	p.MaxRetries = 0
	h.m.policy = p
	_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
	require.Error(t, err)
	h.sink.Reset()
	_, err = Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{}}}).fn)
	require.ErrorIs(t, err, ErrCircuitOpen)
	assert.Empty(t, h.clock.Sleeps())
	assert.Equal(t, events.KindCircuitOpen, h.sink.Events()[0].Error.Kind)
}

// Guards and Breakers: Guards wins.
func TestOptionsGuardsOverBreakers(t *testing.T) {
	g, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1})
	require.NoError(t, err)
	h := newHarness(t, func(o *Options) {
		o.Breakers = g
		gs, err := guard.New(guard.Config{Now: GuardClock(o.Clock)})
		require.NoError(t, err)
		o.Guards = gs
	})
	p := h.m.policy
	p.MaxRetries = 0
	h.m.policy = p
	_, _ = Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
	assert.Equal(t, breaker.Closed, g.Get("anthropic/claude-test").State(), "the group of Breakers was not used")
}
