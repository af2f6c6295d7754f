package guard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

func TestEstimate(t *testing.T) {
	var e Estimate
	assert.False(t, e.Known())
	assert.Equal(t, Cost{Requests: 1}, e.Cost(), "unknown: one request, no tokens")
	e.Add(Cost{Requests: 1, InputTokens: 1000})
	assert.True(t, e.Known())
	assert.Equal(t, Cost{Requests: 1, InputTokens: 1000}, e.Cost(), "one attempt: its cost, no deviation yet")
	e.Add(Cost{Requests: 1, InputTokens: 2000})
	// mean 1000 + 0.2 (2000 - 1000) = 1200; deviation 0.2 * |2000 - 1000| = 200.
	assert.InDelta(t, 1200+2*200, e.Cost()[InputTokens], 1e-9, "the mean plus twice the deviation")
	assert.InDelta(t, 1, e.Cost()[Requests], 1e-9)
	for range 100 {
		e.Add(Cost{Requests: 1, InputTokens: 500})
	}
	assert.InDelta(t, 500, e.Cost()[InputTokens], 1, "steady costs: the deviation fades")
}

// A Guard whose own attempts have not told it their cost reserves the
// fleet's estimate, and its own once it has one.
func TestReserveUsesTheFleetsEstimateUntilItsOwn(t *testing.T) {
	up := &stubUpstream{estimate: Cost{Requests: 1, InputTokens: 700, Tokens: 700}}
	sh := &stubShared{healthy: true, processes: 2, up: up}
	s, _ := newSet(t, Config{RateLimits: true, Shared: sh, Limits: map[string]Limits{key: {InputTokens: 600000}}})
	g := s.Get(key)
	res, wait, _ := g.Reserve()
	require.Zero(t, wait)
	g.Settle(&res, Outcome{Made: true, Success: true, Usage: events.Usage{InputTokens: 500}})
	res, wait, _ = g.Reserve()
	require.Zero(t, wait)
	g.Settle(&res, Outcome{Made: true, Success: true, Usage: events.Usage{InputTokens: 500}})
	require.Len(t, up.observed, 2)
	assert.Equal(t, 700.0, up.observed[0].Cost[InputTokens], "the fleet's estimate")
	assert.Equal(t, 500.0, up.observed[1].Cost[InputTokens], "its own")
}
