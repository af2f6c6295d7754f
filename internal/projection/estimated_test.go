package projection

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
)

// withEstimate returns the event of s with est input tokens estimated.
func withEstimate(s evSpec, est int64) *events.Attempt {
	a := s.event()
	a.EstimatedInputTokens = est
	return a
}

// An attempt's estimated input (an OpenAI stream cut before its usage) is
// summed apart: the request's and the session's estimated_input_tokens,
// never their usage or billed input. It survives the stored form, and a
// record without any is written as before (no member). Before issue 19
// the projection dropped it: the record said nothing of it.
func TestEstimatedInputIsKeptApart(t *testing.T) {
	const ses, req = "agent-1", "req-1"
	for _, tc := range []struct {
		name           string
		cut, won       int64 // the estimates of the cut attempt and of the winner
		wantRequest    int64
		wantBilledIn   int64
		wantMemberSeen bool
	}{
		{"a cut stream, then a success", 812, 0, 812, 1000, true},
		{"two estimates", 812, 40, 852, 1000, true},
		{"no estimate", 0, 0, 0, 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRequest(req, ses)
			cut := withEstimate(evSpec{n: 1, session: ses, request: req, attempt: 0, in: 0, out: 3}, tc.cut)
			won := withEstimate(evSpec{n: 2, session: ses, request: req, attempt: 1, success: true, in: 1000, out: 900}, tc.won)
			for _, ev := range []*events.Attempt{cut, won} {
				require.NoError(t, ev.Validate())
				require.True(t, r.Apply(ev))
			}
			assert.Equal(t, tc.wantRequest, r.EstimatedInputTokens)
			assert.Equal(t, tc.wantBilledIn, r.Billed.InputTokens, "the estimate is not billed input")
			assert.Equal(t, int64(1000), r.Usage.InputTokens)
			c := r.Contribution()
			assert.Equal(t, tc.wantRequest, c.EstimatedInputTokens)
			assert.Equal(t, c, c.Add(c).Sub(c), "sums and differences")

			data := r.appendJSON(nil)
			var back Request
			require.NoError(t, json.Unmarshal(data, &back), string(data))
			assert.Equal(t, normalise(r), normalise(&back), string(data))
			var view map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(data, &view))
			_, seen := view["estimated_input_tokens"]
			assert.Equal(t, tc.wantMemberSeen, seen, string(data))

			s := appendTotals(nil, c)
			var tot Totals
			require.NoError(t, json.Unmarshal(s, &tot))
			assert.Equal(t, c, tot, string(s))
		})
	}
}

// A log entry carries the estimate and the cost together: the cost after
// finished_at, the indexes into names, then one object of the usage's
// subsets and the estimate ({"rsn":…,"est":…}), 13 members in all; both
// survive the stored form, and the estimate is neither in the priced
// usage nor in billed. (The estimate and cost branches each wrote
// entries the other's decoder would have read without the other's field.)
func TestLogEntryCarriesEstimateAndCost(t *testing.T) {
	cat := pricing.Default()
	r := NewRequest("r", "s")
	cut := withSubsets(evSpec{n: 1, session: "s", request: "r", attempt: 0, out: 5}, 0, 0, 2)
	cut.Provider, cut.Model, cut.EstimatedInputTokens = "openai", "gpt-6-luna", 812
	won := evSpec{n: 2, session: "s", request: "r", attempt: 1, success: true, in: 1000, out: 900}.event()
	for _, ev := range []*events.Attempt{cut, won} {
		require.NoError(t, ev.Validate())
		require.True(t, r.ApplyPriced(ev, cat))
	}
	wantCut, ok := modelPrice(cat, cut)
	require.True(t, ok, "gpt-6-luna has a price")
	wantWon, ok := modelPrice(cat, won)
	require.True(t, ok, "the winner's model has a price")
	require.Equal(t, wantCut, r.Log[0].Cost, "the cut attempt priced at its own usage: the estimate is not priced")
	require.Equal(t, wantCut+wantWon, r.BilledCost)
	require.Equal(t, int64(812), r.EstimatedInputTokens)

	data := r.appendJSON(nil)
	var raw struct {
		Log [][]json.RawMessage `json:"log"`
	}
	require.NoError(t, json.Unmarshal(data, &raw), string(data))
	require.Len(t, raw.Log[0], 13, string(data))
	require.Equal(t, fmt.Sprint(int64(wantCut)), string(raw.Log[0][9]), "the cost follows finished_at")
	require.JSONEq(t, `{"rsn":2,"est":812}`, string(raw.Log[0][12]))
	require.Len(t, raw.Log[1], 10, string(data))
	var back Request
	require.NoError(t, json.Unmarshal(data, &back), string(data))
	require.Equal(t, normalise(r), normalise(&back))
	require.Equal(t, int64(812), back.Log[0].EstimatedInput)
	require.Equal(t, wantCut, back.Log[0].Cost)
	require.False(t, back.Log[0].Unpriced)
}
