package projection

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
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
