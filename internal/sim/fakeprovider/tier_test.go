package fakeprovider_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

// clock is a manually advanced clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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

func startLimited(t *testing.T, tier fakeprovider.Tier, outage fakeprovider.Outage) (*fakeprovider.Server, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	s, err := fakeprovider.New(fakeprovider.Options{Seed: 7, Tier: tier, Outage: outage, Now: clk.Now, Dialects: dialects()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, clk
}

func TestTierLimitsRequests(t *testing.T) {
	s, clk := startLimited(t, fakeprovider.Tier{RequestsPerMinute: 120}, fakeprovider.Outage{}) // 2 a second
	for i := range 2 {
		resp := post(t, t.Context(), s.BaseURL("anthropic"), "anthropic", "call-"+strconv.Itoa(i))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "120", resp.Header.Get("anthropic-ratelimit-requests-limit"))
		assert.Equal(t, strconv.Itoa(1-i), resp.Header.Get("anthropic-ratelimit-requests-remaining"))
		reset, err := time.Parse(time.RFC3339Nano, resp.Header.Get("anthropic-ratelimit-requests-reset"))
		require.NoError(t, err)
		assert.Equal(t, clk.Now().Add(time.Duration(i+1)*500*time.Millisecond+time.Microsecond), reset)
	}
	resp := post(t, t.Context(), s.BaseURL("anthropic"), "anthropic", "call-2")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "500", resp.Header.Get("retry-after-ms"))
	assert.Equal(t, "0", resp.Header.Get("anthropic-ratelimit-requests-remaining"))
	clk.Advance(500 * time.Millisecond)
	resp = post(t, t.Context(), s.BaseURL("anthropic"), "anthropic", "call-2")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The organizations are separate: OpenAI has its own bucket.
	resp = post(t, t.Context(), s.BaseURL("openai"), "openai", "call-3")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "120", resp.Header.Get("x-ratelimit-limit-requests"))
	assert.Equal(t, "1", resp.Header.Get("x-ratelimit-remaining-requests"))
	assert.Equal(t, "500ms", resp.Header.Get("x-ratelimit-reset-requests"))

	tr := s.Truth()
	assert.Equal(t, int64(1), tr.Total.Outcomes[fakeprovider.FaultTierLimit])
	assert.Equal(t, int64(4), tr.Total.Outcomes[fakeprovider.FaultNone])
	assert.Equal(t, int64(0), tr.Requests["call-2"].Attempts[0].Billed.InputTokens, "a 429 bills nothing")
}

func TestTierLimitsTokens(t *testing.T) {
	// 60,000 input tokens a minute: a bucket of 1,000. A call of the plan
	// uses 200 to 2,000: with this seed the first call takes the bucket
	// (or more: a full bucket admits a call larger than itself) and the
	// others wait.
	s, _ := startLimited(t, fakeprovider.Tier{InputTokensPerMinute: 60000, OutputTokensPerMinute: 60000}, fakeprovider.Outage{})
	ok, limited := 0, 0
	for i := range 6 {
		switch resp := post(t, t.Context(), s.BaseURL("anthropic"), "anthropic", "tok-"+strconv.Itoa(i)); resp.StatusCode {
		case http.StatusOK:
			ok++
			assert.Equal(t, "60000", resp.Header.Get("anthropic-ratelimit-input-tokens-limit"))
			assert.Empty(t, resp.Header.Get("anthropic-ratelimit-requests-limit"), "no requests limit")
		case http.StatusTooManyRequests:
			limited++
		}
	}
	assert.Equal(t, 1, ok, "a full bucket admits one call, the next waits until the debt is paid")
	assert.Equal(t, 5, limited)
	resp := post(t, t.Context(), s.BaseURL("openai"), "openai", "tok-o")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "120000", resp.Header.Get("x-ratelimit-limit-tokens"), "OpenAI's one tokens limit: input plus output")
}

func TestOutage(t *testing.T) {
	s, clk := startLimited(t, fakeprovider.Tier{}, fakeprovider.Outage{Start: 2 * time.Second, Duration: 5 * time.Second})
	require.Equal(t, http.StatusOK, post(t, t.Context(), s.BaseURL("anthropic"), "anthropic", "o-1").StatusCode)
	clk.Advance(2 * time.Second)
	for _, d := range dialects() {
		p := d.Provider
		resp := post(t, t.Context(), s.BaseURL(p), p, "o-"+p)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, p)
		assert.Empty(t, resp.Header.Get("anthropic-ratelimit-requests-limit"), "no tier, no headers")
	}
	clk.Advance(5*time.Second - time.Nanosecond)
	assert.Equal(t, http.StatusServiceUnavailable, post(t, t.Context(), s.BaseURL("openai"), "openai", "o-2").StatusCode)
	clk.Advance(time.Nanosecond)
	assert.Equal(t, http.StatusOK, post(t, t.Context(), s.BaseURL("openai"), "openai", "o-3").StatusCode)
	assert.Equal(t, int64(4), s.Truth().Total.Outcomes[fakeprovider.FaultOutage])
}

func TestLimitsValidation(t *testing.T) {
	for _, o := range []fakeprovider.Options{
		{Tier: fakeprovider.Tier{RequestsPerMinute: -1}},
		{Tier: fakeprovider.Tier{Burst: -time.Second}},
		{Outage: fakeprovider.Outage{Start: -time.Second, Duration: time.Second}},
	} {
		o.Dialects = dialects()
		_, err := fakeprovider.New(o)
		require.ErrorIs(t, err, fakeprovider.ErrInvalidOptions)
	}
}
