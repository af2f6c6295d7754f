package fakeprovider_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
)

func TestMixValidate(t *testing.T) {
	tests := []struct {
		name  string
		mix   fakeprovider.Mix
		field string // "" means valid
	}{
		{"zero", fakeprovider.Mix{}, ""},
		{"default", fakeprovider.DefaultMix(), ""},
		{"all rate limits", fakeprovider.Mix{RateLimit: 1, BadRequest: 1}, ""},
		{"negative", fakeprovider.Mix{Overload: -0.1}, "mix.overload"},
		{"above one", fakeprovider.Mix{BadRequest: 1.5}, "mix.bad_request"},
		{"NaN", fakeprovider.Mix{ServerError: math.NaN()}, "mix.server_error"},
		{"sum above one", fakeprovider.Mix{RateLimit: 0.5, BilledTimeout: 0.6}, "must not exceed 1"},
		{"broken streams above one", fakeprovider.Mix{BrokenStream: 1.2}, "mix.broken_stream"},
		{"sum with broken streams above one", fakeprovider.Mix{RateLimit: 0.5, BrokenStream: 0.6}, "must not exceed 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.mix.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, fakeprovider.ErrInvalidOptions)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

func TestNewRejectsInvalidMix(t *testing.T) {
	_, err := fakeprovider.New(fakeprovider.Options{Mix: fakeprovider.Mix{RateLimit: 2}})
	require.ErrorIs(t, err, fakeprovider.ErrInvalidOptions)
}

func TestPlanIsDeterministic(t *testing.T) {
	a := fakeprovider.Plan{Seed: 7, Mix: fakeprovider.DefaultMix()}
	b := fakeprovider.Plan{Seed: 7, Mix: fakeprovider.DefaultMix()}
	other := fakeprovider.Plan{Seed: 8, Mix: fakeprovider.DefaultMix()}
	differs := false
	for i := range 200 {
		id := fmt.Sprintf("r-%d", i)
		for n := range 3 {
			assert.Equal(t, a.Decide(id, n), b.Decide(id, n))
		}
		for _, cw := range []bool{true, false} {
			assert.Equal(t, a.Usage(id, cw), b.Usage(id, cw))
			differs = differs || a.Usage(id, cw) != other.Usage(id, cw)
		}
	}
	assert.True(t, differs, "another seed gives other token counts")
}

func TestPlanUsageRanges(t *testing.T) {
	p := fakeprovider.Plan{Seed: 3}
	var sawCacheRead, sawCacheWrite bool
	for i := range 2000 {
		id := fmt.Sprintf("r-%d", i)
		for _, cacheWrites := range []bool{true, false} {
			u := p.Usage(id, cacheWrites)
			require.GreaterOrEqual(t, u.InputTokens, int64(fakeprovider.MinInputTokens))
			require.LessOrEqual(t, u.InputTokens, int64(fakeprovider.MaxInputTokens))
			require.GreaterOrEqual(t, u.OutputTokens, int64(fakeprovider.MinOutputTokens))
			require.LessOrEqual(t, u.OutputTokens, int64(fakeprovider.MaxOutputTokens))
			require.LessOrEqual(t, u.CacheReadInputTokens+u.CacheCreationInputTokens, u.InputTokens,
				"cache tokens are a subset of the input")
			if !cacheWrites {
				require.Zero(t, u.CacheCreationInputTokens, "only a provider that bills cache writes reports them")
			}
			sawCacheRead = sawCacheRead || u.CacheReadInputTokens > 0
			sawCacheWrite = sawCacheWrite || u.CacheCreationInputTokens > 0
		}
	}
	assert.True(t, sawCacheRead)
	assert.True(t, sawCacheWrite)
}

func TestPlanFaultFrequencies(t *testing.T) {
	mix := fakeprovider.Mix{RateLimit: 0.1, Overload: 0.05, ServerError: 0.05, BilledTimeout: 0.1, BadRequest: 0.02}
	p := fakeprovider.Plan{Seed: 11, Mix: mix}
	const n = 20000
	counts := map[fakeprovider.Fault]int{}
	for i := range n {
		id := fmt.Sprintf("r-%d", i)
		d := p.Decide(id, 0)
		counts[d.Fault]++
		if d.Fault == fakeprovider.FaultBadRequest {
			assert.Equal(t, d, p.Decide(id, 1), "a bad request stays bad")
		}
		if d.Fault == fakeprovider.FaultRateLimit {
			require.GreaterOrEqual(t, d.RetryAfter, fakeprovider.MinRetryAfter)
			require.LessOrEqual(t, d.RetryAfter, fakeprovider.MaxRetryAfter)
		} else {
			require.Zero(t, d.RetryAfter)
		}
	}
	want := map[fakeprovider.Fault]float64{
		fakeprovider.FaultBadRequest:    mix.BadRequest,
		fakeprovider.FaultRateLimit:     (1 - mix.BadRequest) * mix.RateLimit,
		fakeprovider.FaultOverload:      (1 - mix.BadRequest) * mix.Overload,
		fakeprovider.FaultServerError:   (1 - mix.BadRequest) * mix.ServerError,
		fakeprovider.FaultBilledTimeout: (1 - mix.BadRequest) * mix.BilledTimeout,
	}
	for f, p := range want {
		got := float64(counts[f]) / n
		// Five standard deviations of a binomial proportion.
		tol := 5 * math.Sqrt(p*(1-p)/n)
		assert.InDelta(t, p, got, tol, "frequency of %s", f)
	}
}

func TestNoFaultsWithZeroMix(t *testing.T) {
	p := fakeprovider.Plan{Seed: 5}
	for i := range 1000 {
		require.Equal(t, fakeprovider.FaultNone, p.Decide(fmt.Sprintf("r-%d", i), i%4).Fault)
	}
}

// The plan's token counts are pinned: these are what the plan gave before
// the dialects moved into the provider folders (Usage(provider, id) for
// Anthropic, which bills cache writes, and for OpenAI), so that a seed
// still gives the same truth.
func TestPlanUsageIsPinned(t *testing.T) {
	p := fakeprovider.Plan{Seed: 7, Mix: fakeprovider.DefaultMix()}
	tests := []struct {
		id          string
		cacheWrites bool
		want        events.Usage
	}{
		{"r-1", true, events.Usage{InputTokens: 1896, OutputTokens: 347, CacheCreationInputTokens: 515}},
		{"r-1", false, events.Usage{InputTokens: 1896, OutputTokens: 347}},
		{"r-2", true, events.Usage{InputTokens: 940, OutputTokens: 1239, CacheReadInputTokens: 231, CacheCreationInputTokens: 43}},
		{"r-2", false, events.Usage{InputTokens: 940, OutputTokens: 1239, CacheReadInputTokens: 231}},
		{"r-3", true, events.Usage{InputTokens: 1918, OutputTokens: 1144, CacheReadInputTokens: 213}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, p.Usage(tt.id, tt.cacheWrites), "%s, cache writes %v", tt.id, tt.cacheWrites)
	}
}
