package guard

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// clock is a manually advanced clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const key = "anthropic/claude-test"

func newSet(t *testing.T, cfg Config) (*Set, *clock) {
	t.Helper()
	clk := newClock()
	cfg.Now = clk.Now
	s, err := New(cfg)
	require.NoError(t, err)
	return s, clk
}

// testHeaders are the rate-limit headers of the tests' provider: a
// requests limit whose reset is a time, a tokens limit whose reset is a
// duration.
var testHeaders = RateLimitHeaders{
	{Dim: Requests, Limit: "Test-Requests-Limit", Remaining: "Test-Requests-Remaining", Reset: "Test-Requests-Reset", ResetIsDate: true},
	{Dim: Tokens, Limit: "Test-Tokens-Limit", Remaining: "Test-Tokens-Remaining", Reset: "Test-Tokens-Reset"},
}

// rateHeaders are the rate-limit headers (testHeaders) of a response.
func rateHeaders(rpm, remaining int, reset time.Time) http.Header {
	h := http.Header{}
	h.Set("test-requests-limit", itoa(rpm))
	h.Set("test-requests-remaining", itoa(remaining))
	h.Set("test-requests-reset", reset.Format(time.RFC3339))
	return h
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"zero is valid", Config{}, nil},
		{"negative burst", Config{Burst: -time.Second}, []string{"Burst", "-1s"}},
		{"budget ratio out of range", Config{Budget: Budget{On: true, Ratio: 11}}, []string{"Budget.Ratio", "11"}},
		{"budget min negative", Config{Budget: Budget{On: true, Min: -1}}, []string{"Budget.Min"}},
		{"negative limit", Config{Limits: map[string]Limits{"a/b": {Requests: -5}}}, []string{`Limits["a/b"]`, "requests", "-5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		check  func(t *testing.T, o Observed)
	}{
		{"both styles of reset", map[string]string{
			"test-requests-limit":        "50",
			"test-requests-remaining":    "0",
			"test-requests-reset":        "2026-03-01T12:00:02.5Z",
			"test-tokens-limit":          "200000",
			"test-tokens-remaining":      "150000",
			"test-tokens-reset":          "6m0s",
			"x-ratelimit-limit-requests": "7", // another provider's: not read
		}, func(t *testing.T, o Observed) {
			assert.Equal(t, Limits{Requests: 50, Tokens: 200000}, o.Limit)
			assert.Equal(t, [NumDims]int64{0, 0, 0, 150000}, o.Remaining)
			assert.Equal(t, [NumDims]bool{true, false, false, true}, o.HasRemaining)
			assert.Equal(t, now.Add(2500*time.Millisecond), o.Reset[Requests])
			assert.Equal(t, now.Add(6*time.Minute), o.Reset[Tokens])
		}},
		{"garbage is ignored value by value", map[string]string{
			"test-requests-limit":     "-3",
			"test-requests-remaining": "lots",
			"test-requests-reset":     "soon",
			"test-tokens-limit":       "99999999999999999999",
			"test-tokens-remaining":   " 12 ",
			"test-tokens-reset":       "1.5",
		}, func(t *testing.T, o Observed) {
			assert.Equal(t, Limits{}, o.Limit)
			assert.Equal(t, [NumDims]bool{false, false, false, true}, o.HasRemaining)
			assert.Equal(t, int64(12), o.Remaining[Tokens])
			assert.True(t, o.Reset[Requests].IsZero())
			assert.Equal(t, now.Add(1500*time.Millisecond), o.Reset[Tokens])
		}},
		{"none", map[string]string{"content-type": "application/json"}, func(t *testing.T, o Observed) {
			assert.True(t, o.Empty())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			tt.check(t, testHeaders.RateLimits(h, now))
		})
	}
	assert.True(t, func() bool { o := testHeaders.RateLimits(nil, now); return o.Empty() }())
}

// An outcome whose provider sends no rate-limit headers (RateLimits nil,
// Gemini's case) learns nothing from headers that look like some other
// provider's.
func TestNoRateLimitParserLearnsNothing(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true})
	g := s.Get(key)
	settle(t, g, Outcome{Made: true, Success: true, Header: rateHeaders(60, 0, clk.Now().Add(time.Minute))})
	for range 20 {
		settle(t, g, Outcome{Made: true, Success: true}) // settle fails the test on a wait
	}
}

func TestNoLimitsByDefault(t *testing.T) {
	s, _ := newSet(t, Config{})
	g := s.Get(key)
	res, wait, lerr := g.Reserve()
	assert.Zero(t, wait)
	assert.Nil(t, lerr)
	g.Settle(&res, Outcome{Made: true, RateLimited: true, Hint: time.Hour, HasHint: true})
	_, wait, _ = g.Reserve()
	assert.Zero(t, wait, "without RateLimits a 429 holds nothing")
	assert.NoError(t, g.Retry(), "without a budget every retry is allowed")
}

// settle makes one attempt that reports h and usage u.
func settle(t *testing.T, g *Guard, o Outcome) {
	t.Helper()
	res, wait, lerr := g.Reserve()
	require.Zero(t, wait, "%v", lerr)
	g.Settle(&res, o)
}

func TestLearnedRequestLimit(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true})
	g := s.Get(key)
	settle(t, g, Outcome{Made: true, Success: true, Header: rateHeaders(600, 599, clk.Now().Add(time.Second)), RateLimits: testHeaders})
	// 600/min with a one-second burst: 10 in a row, then one every 100 ms.
	for i := range 10 {
		res, wait, lerr := g.Reserve()
		require.Zero(t, wait, "attempt %d: %v", i, lerr)
		g.Settle(&res, Outcome{Made: true, Success: true})
	}
	_, wait, lerr := g.Reserve()
	require.NotNil(t, lerr)
	assert.Equal(t, 100*time.Millisecond+time.Microsecond, wait)
	assert.Equal(t, Requests, lerr.Dim)
	assert.Equal(t, int64(600), lerr.PerMinute)
	assert.False(t, lerr.Fleet)
	assert.ErrorIs(t, lerr, ErrRateLimited)
	assert.Equal(t, "process rate limit of "+key+": 600 requests/min", lerr.Error())
	clk.Advance(wait)
	_, wait, _ = g.Reserve()
	assert.Zero(t, wait)
}

func TestRemainingLowersTheBucket(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true})
	g := s.Get(key)
	settle(t, g, Outcome{Made: true, Success: true, Header: rateHeaders(600, 600, clk.Now()), RateLimits: testHeaders})
	settle(t, g, Outcome{Made: true, Success: true}) // starts the bucket
	settle(t, g, Outcome{Made: true, Success: true, Header: rateHeaders(600, 0, clk.Now().Add(time.Second)), RateLimits: testHeaders})
	_, wait, _ := g.Reserve()
	assert.Equal(t, 100*time.Millisecond+time.Microsecond, wait, "the provider said nothing remains")
}

func TestConfiguredLimitsWin(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true, Limits: map[string]Limits{key: {Requests: 60}}})
	g := s.Get(key)
	settle(t, g, Outcome{Made: true, Success: true, Header: rateHeaders(6000, 6000, clk.Now()), RateLimits: testHeaders})
	_, wait, lerr := g.Reserve()
	require.NotNil(t, lerr, "60/min holds one request a second, and the first one took it")
	assert.Equal(t, int64(60), lerr.PerMinute)
	assert.Equal(t, time.Second+time.Microsecond, wait)
}

func TestTokenLimitsUseTheEstimate(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true, Limits: map[string]Limits{key: {InputTokens: 60000}}})
	g := s.Get(key) // 1,000 input tokens a second
	// The first attempt's cost is unknown (0 tokens): it goes, and then
	// pays for what it used.
	settle(t, g, Outcome{Made: true, Success: true, Usage: events.Usage{InputTokens: 1500, OutputTokens: 10}})
	_, wait, lerr := g.Reserve()
	require.NotNil(t, lerr)
	assert.Equal(t, InputTokens, lerr.Dim)
	// The bucket is at -500; the estimate (1,500) exceeds the capacity
	// (1,000), so the bucket must be full again: 1.5 s.
	assert.Equal(t, 1500*time.Millisecond+time.Microsecond, wait)
	clk.Advance(wait)
	res, wait, _ := g.Reserve()
	require.Zero(t, wait)
	// The attempt used less than estimated: the rest comes back.
	g.Settle(&res, Outcome{Made: true, Success: true, Usage: events.Usage{InputTokens: 500}})
	clk.Advance(500 * time.Millisecond)
	_, wait, _ = g.Reserve()
	assert.Zero(t, wait, "level 1000-1500+1000+500 = 1000: a full bucket admits the estimate (1,300 + 2 x 200), larger than it holds")
}

func TestAttemptNotMadeGivesCapacityBack(t *testing.T) {
	s, _ := newSet(t, Config{RateLimits: true, Limits: map[string]Limits{key: {Requests: 60}}})
	g := s.Get(key)
	res, wait, _ := g.Reserve()
	require.Zero(t, wait)
	g.Settle(&res, Outcome{Made: false})
	g.Settle(&res, Outcome{Made: false}) // a second settle changes nothing
	res, wait, _ = g.Reserve()
	require.Zero(t, wait, "the reservation came back")
	_, wait, _ = g.Reserve()
	require.NotZero(t, wait, "and only once")
}

func TestHoldAfter429(t *testing.T) {
	tests := []struct {
		name     string
		outcome  func(now time.Time) Outcome
		wantWait time.Duration
	}{
		{"retry-after", func(time.Time) Outcome {
			return Outcome{Made: true, RateLimited: true, Hint: 3 * time.Second, HasHint: true}
		}, 3 * time.Second},
		{"reset of an exhausted dimension", func(now time.Time) Outcome {
			return Outcome{Made: true, RateLimited: true, Header: rateHeaders(600, 0, now.Add(2*time.Second)), RateLimits: testHeaders}
		}, 2 * time.Second},
		{"nothing to go by holds nothing", func(time.Time) Outcome {
			return Outcome{Made: true, RateLimited: true}
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newSet(t, Config{RateLimits: true})
			g := s.Get(key)
			settle(t, g, tt.outcome(clk.Now()))
			_, wait, lerr := g.Reserve()
			assert.Equal(t, tt.wantWait, wait)
			if tt.wantWait > 0 {
				require.NotNil(t, lerr)
				assert.True(t, lerr.Hold)
				assert.Contains(t, lerr.Error(), "process hold of "+key+" until ")
				assert.Contains(t, lerr.Error(), "429")
			}
		})
	}
}

func TestRetryBudget(t *testing.T) {
	s, clk := newSet(t, Config{Budget: Budget{On: true, Ratio: 0.2, Min: 2, Window: time.Minute}})
	g := s.Get(key)
	for range 10 {
		g.First()
	}
	// 0.2 * 10 + 2 = 4 retries.
	for i := range 4 {
		require.NoError(t, g.Retry(), "retry %d", i)
	}
	err := g.Retry()
	var be *BudgetError
	require.ErrorAs(t, err, &be)
	assert.ErrorIs(t, err, ErrBudgetSpent)
	assert.Equal(t, int64(4), be.Retries)
	assert.Equal(t, int64(10), be.First)
	assert.Equal(t, "process retry budget of "+key+" spent: 4 retries for 10 first attempts in the last 1m0s (at most 20 % plus 2"+
		"; to allow more, raise the retry budget's percentage or its minimum per minute: --retry-budget-percent, --retry-budget-min, or RetryBudget in ledger.FleetConfig)", err.Error())
	// Five more first attempts allow one more retry.
	for range 5 {
		g.First()
	}
	require.NoError(t, g.Retry())
	require.Error(t, g.Retry())
	// A minute later the window is empty: the floor again.
	clk.Advance(time.Minute + time.Second)
	require.NoError(t, g.Retry())
	require.NoError(t, g.Retry())
	require.Error(t, g.Retry())
}

func TestBudgetWindowSlides(t *testing.T) {
	s, clk := newSet(t, Config{Budget: Budget{On: true, Ratio: 1, Min: 1, Window: time.Minute}})
	g := s.Get(key)
	g.First()
	g.First()
	clk.Advance(30 * time.Second)
	g.First()
	for i := range 4 { // 3 * 1 + 1
		require.NoError(t, g.Retry(), "retry %d", i)
	}
	require.Error(t, g.Retry())
	clk.Advance(35 * time.Second) // the first two have left the window
	require.Error(t, g.Retry(), "1 first attempt and 4 retries in the window")
	clk.Advance(30 * time.Second) // and now the rest
	require.NoError(t, g.Retry(), "an empty window: the floor")
}

func TestBreakerCheckAndCurrent(t *testing.T) {
	s, clk := newSet(t, Config{Breaker: breaker.Config{FailureThreshold: 2, Cooldown: time.Second}})
	g := s.Get(key)
	require.NoError(t, g.Check())
	for range 2 {
		p, err := g.Allow()
		require.NoError(t, err)
		g.Done(p, breaker.Failure)
	}
	err := g.Check()
	require.ErrorIs(t, err, breaker.ErrCircuitOpen)
	_, err = g.Allow()
	require.ErrorIs(t, err, breaker.ErrCircuitOpen)
	clk.Advance(time.Second)
	require.NoError(t, g.Check(), "a probe may go")
	probe, err := g.Allow()
	require.NoError(t, err)
	require.ErrorIs(t, g.Check(), breaker.ErrCircuitOpen, "a probe is in flight")
	g.Done(probe, breaker.Success)
	require.NoError(t, g.Check())
}

// stubShared is a Shared backend with scripted answers.
type stubShared struct {
	mu        sync.Mutex
	healthy   bool
	processes int
	up        *stubUpstream
	params    Params
}

func (s *stubShared) Upstream(_ string, p Params) SharedUpstream {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params = p
	return s.up
}
func (s *stubShared) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthy
}
func (s *stubShared) Processes() int { return s.processes }

type stubUpstream struct {
	allowErr, retryErr error
	reserveWait        time.Duration
	reserveErr         error
	observed           []SharedObservation
	firsts, dones      int
	estimate           Cost
}

func (u *stubUpstream) Check(time.Time) error         { return u.allowErr }
func (u *stubUpstream) State(time.Time) breaker.State { return breaker.Open }
func (u *stubUpstream) Allow(time.Time) (SharedPermit, error) {
	return SharedPermit{Generation: 7}, u.allowErr
}
func (u *stubUpstream) Done(time.Time, SharedPermit, breaker.Result) { u.dones++ }
func (u *stubUpstream) Reserve(time.Time, Cost) (Dims, time.Duration, *LimitError, error) {
	if u.reserveWait > 0 {
		return Dims{}, u.reserveWait, &LimitError{Fleet: true}, nil
	}
	return Dims{Requests: true}, 0, nil, u.reserveErr
}
func (u *stubUpstream) Observe(_ time.Time, o SharedObservation) { u.observed = append(u.observed, o) }
func (u *stubUpstream) First(time.Time)                          { u.firsts++ }
func (u *stubUpstream) Retry(time.Time) error                    { return u.retryErr }
func (u *stubUpstream) Estimate() (Cost, bool)                   { return u.estimate, u.estimate != Cost{} }

func TestSharedDecidesWhileHealthy(t *testing.T) {
	up := &stubUpstream{allowErr: errors.New("fleet: circuit open"), retryErr: &BudgetError{Fleet: true}, reserveWait: time.Second}
	sh := &stubShared{healthy: true, processes: 4, up: up}
	s, _ := newSet(t, Config{RateLimits: true, Budget: Budget{On: true}, Shared: sh,
		Breaker: breaker.Config{FailureThreshold: 3, Cooldown: time.Second}, Limits: map[string]Limits{key: {Requests: 60}}})
	g := s.Get(key)
	assert.Equal(t, Params{FailureThreshold: 3, Cooldown: time.Second, Burst: time.Second,
		Budget: Budget{On: true, Ratio: 0.2, Min: 10, Window: time.Minute}, Configured: Limits{Requests: 60}}, sh.params)
	_, err := g.Allow()
	assert.EqualError(t, err, "fleet: circuit open")
	assert.EqualError(t, g.Check(), "fleet: circuit open")
	_, wait, lerr := g.Reserve()
	assert.Equal(t, time.Second, wait)
	assert.True(t, lerr.Fleet)
	var be *BudgetError
	require.ErrorAs(t, g.Retry(), &be)
	assert.True(t, be.Fleet)
	g.First()
	assert.Equal(t, 1, up.firsts)

	// Unavailable: the local state decides, each limit divided by the
	// processes last seen.
	up.allowErr, up.retryErr, up.reserveWait, up.reserveErr = ErrUnavailable, ErrUnavailable, 0, ErrUnavailable
	p, err := g.Allow()
	require.NoError(t, err)
	g.Done(p, breaker.Success)
	require.NoError(t, g.Retry())
	_, wait, _ = g.Reserve()
	assert.Zero(t, wait)
	_, wait, lerr = g.Reserve()
	require.NotNil(t, lerr)
	assert.Equal(t, int64(15), lerr.PerMinute, "60/min shared by 4 processes")
	assert.Equal(t, 4*time.Second+time.Microsecond, wait)
	assert.False(t, lerr.Fleet)
}

func TestSharedPermitFeedsBoth(t *testing.T) {
	up := &stubUpstream{}
	sh := &stubShared{healthy: true, processes: 1, up: up}
	s, _ := newSet(t, Config{Shared: sh, Breaker: breaker.Config{FailureThreshold: 1, Cooldown: time.Hour}})
	g := s.Get(key)
	p, err := g.Allow()
	require.NoError(t, err)
	g.Done(p, breaker.Failure)
	assert.Equal(t, 1, up.dones)
	assert.Equal(t, breaker.Open, g.Breaker().State(), "the local breaker was told too")
	// Still healthy: the shared breaker decides, although the local one is open.
	_, err = g.Allow()
	require.NoError(t, err)
	sh.mu.Lock()
	sh.healthy = false
	sh.mu.Unlock()
	_, err = g.Allow()
	require.ErrorIs(t, err, breaker.ErrCircuitOpen, "degraded: the local breaker decides")
}

func TestSettleTellsTheSharedState(t *testing.T) {
	up := &stubUpstream{}
	sh := &stubShared{healthy: true, processes: 1, up: up}
	s, clk := newSet(t, Config{RateLimits: true, Shared: sh})
	g := s.Get(key)
	res, wait, _ := g.Reserve()
	require.Zero(t, wait)
	g.Settle(&res, Outcome{Made: true, RateLimited: true, Header: rateHeaders(600, 0, clk.Now().Add(time.Second)), RateLimits: testHeaders})
	require.Len(t, up.observed, 1)
	o := up.observed[0]
	assert.True(t, o.Reserved)
	assert.Equal(t, Dims{Requests: true}, o.Took)
	assert.Equal(t, o.Cost, o.Actual, "a 429's reservation is spent: the fleet was ahead")
	assert.Equal(t, Cost{Requests: 1}, o.Cost)
	assert.True(t, o.RateLimited)
	assert.Equal(t, time.Second, o.Hint, "the hold's, from the reset")
	assert.Equal(t, clk.Now().Add(time.Second), o.HoldUntil)
	assert.Equal(t, int64(600), o.Headers.Limit[Requests])
}

// A 429 gives nothing back: the attempt's reservation is spent (the
// process was ahead of the provider), and the bucket is empty as of the
// 429, so the next attempt waits for the refill.
func Test429RefundsNothing(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true, Limits: map[string]Limits{key: {Requests: 600}}})
	g := s.Get(key)
	for range 9 { // 600/min, a one-second burst: 10 at once
		settle(t, g, Outcome{Made: true, Success: true})
	}
	settle(t, g, Outcome{Made: true, RateLimited: true})
	_, wait, lerr := g.Reserve()
	require.NotNil(t, lerr, "the 429's request was not given back")
	assert.Equal(t, 100*time.Millisecond+time.Microsecond, wait)
	clk.Advance(wait)
	settle(t, g, Outcome{Made: true, Success: true})
}

// Without a limit known (no headers, none configured), a 429 with a hint
// infers one: one attempt per hint, less the margin; attempts are then
// spread at that rate, starting from an empty bucket.
func TestInferredLimitFrom429s(t *testing.T) {
	s, clk := newSet(t, Config{RateLimits: true})
	g := s.Get(key)
	for range 20 {
		settle(t, g, Outcome{Made: true, Success: true}) // no limit: nothing waits
	}
	settle(t, g, Outcome{Made: true, RateLimited: true, Hint: 50 * time.Millisecond, HasHint: true})
	_, wait, lerr := g.Reserve()
	require.NotNil(t, lerr)
	assert.True(t, lerr.Hold, "the hint holds first")
	clk.Advance(wait)
	_, wait, lerr = g.Reserve()
	require.NotNil(t, lerr, "the hold's end does not release every call at once")
	assert.InDelta(t, 1080, lerr.PerMinute, 1, "90 %% of one request per 50 ms")
	clk.Advance(wait)
	settle(t, g, Outcome{Made: true, Success: true})
	// It rises slowly while no 429 comes.
	clk.Advance(10 * time.Second)
	assert.InDelta(t, 1080*1.1, g.lim.limits(clk.Now(), Limits{})[Requests], 2, "1 %% of it a second")
}

func TestInferredShape(t *testing.T) {
	now := time.Now()
	var i Inferred
	assert.Equal(t, i, i.Lower(now, 0), "no hint, no limit: nothing to go by")
	i = i.Lower(now, 100*time.Millisecond)
	assert.Equal(t, int64(540), i.Limit(now))
	soon := now.Add(50 * time.Millisecond)
	assert.Equal(t, i.Limit(soon), i.Lower(soon, time.Millisecond).Limit(soon), "a smaller hint does not raise it")
	assert.Equal(t, i.Limit(soon), i.Lower(soon, 0).Limit(soon), "a storm at one instant lowers it once")
	later := now.Add(2 * time.Second)
	assert.Equal(t, int64(496), i.Lower(later, 0).Limit(later), "540 raised by 2 %, less 10 %")
	assert.Equal(t, int64(810), i.Limit(now.Add(55*time.Second)), "at most 1.5 times")
	assert.Zero(t, i.Limit(now.Add(InferForget)), "forgotten a quiet minute after its last lowering")
	assert.True(t, i.Lower(now.Add(InferForget), 0).Limit(now.Add(InferForget)) == 0, "a forgotten limit and no hint: nothing to go by")
	assert.Equal(t, int64(5400), i.Lower(now.Add(InferForget), 10*time.Millisecond).Limit(now.Add(InferForget)), "a forgotten limit starts again from the hint")
}

// 429s whose hints are far shorter than one request's interval at the
// limit in force (a provider's transient refusals, the fault mix of the
// fake provider) do not ratchet the limit down: with the limit lowered by
// 10 % on each, 50 such 429s a few seconds apart took a fleet to 5 % of
// it.
func TestInferredIgnoresShortHints(t *testing.T) {
	now := time.Now()
	i := Inferred{}.Lower(now, 50*time.Millisecond) // 1080 a minute: one request every 55.6 ms
	require.Equal(t, int64(1080), i.Limit(now))
	at := now
	for range 50 {
		at = at.Add(2 * time.Second)
		i = i.Lower(at, 5*time.Millisecond) // far shorter than half the interval
	}
	assert.GreaterOrEqual(t, i.Limit(at), int64(1080), "short hints leave it where it was (it rose meanwhile)")
	// A hint of about the interval still lowers it by the margin.
	j := Inferred{}.Lower(now, 50*time.Millisecond)
	later := now.Add(time.Second)
	assert.Equal(t, int64(982), j.Lower(later, 40*time.Millisecond).Limit(later), "1080 raised by 1 % (1091), less 10 %")
}
