package retry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
)

// Every attempt's event carries the call's labels merged over the
// middleware's defaults, a key of the call's winning.
func TestDoLabelsOnEveryAttempt(t *testing.T) {
	tests := []struct {
		name           string
		defaults, call api.Labels
		want           api.Labels
	}{
		{"none", nil, nil, nil},
		{"defaults only", api.Labels{"team": "search"}, nil, api.Labels{"team": "search"}},
		{"call only", nil, api.Labels{"user": "u-42"}, api.Labels{"user": "u-42"}},
		{"the call's key wins", api.Labels{"team": "search", "env": "prod"}, api.Labels{"team": "ads", "user": "u-42"},
			api.Labels{"team": "ads", "env": "prod", "user": "u-42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Labels = tt.defaults })
			call := testCall
			call.Labels = tt.call
			fn := (&scripted{steps: []step{{err: statusErr(500, 0)}, {}}, clock: h.clock}).fn
			_, err := Do(context.Background(), h.m, call, fn)
			require.NoError(t, err)
			evs := h.sink.Events()
			require.Len(t, evs, 2, "a failed attempt and its retry")
			for _, ev := range evs {
				assert.Equal(t, tt.want, ev.Labels, "attempt %d", ev.Attempt)
				require.NoError(t, ev.Validate())
			}
		})
	}
}

// Default labels that break a rule are refused by New, naming the label
// and the rule (the calls' own are TestDoInvalidCall's).
func TestInvalidDefaultLabels(t *testing.T) {
	_, err := New(Options{Sink: NewMemorySink(), Labels: api.Labels{"team": ""}})
	require.ErrorIs(t, err, ErrInvalidOptions)
	var oe *OptionsError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "Labels", oe.Field)
	var le *api.LabelError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, "team", le.Key)
	assert.Contains(t, err.Error(), `labels["team"]: value must be 1 to 128 bytes, got 0`)
}

// The defaults are copied: changing the map given to New changes nothing.
func TestDefaultLabelsAreCopied(t *testing.T) {
	defaults := api.Labels{"team": "search"}
	h := newHarness(t, func(o *Options) { o.Labels = defaults })
	defaults["team"] = "changed"
	_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{}}, clock: h.clock}).fn)
	require.NoError(t, err)
	assert.Equal(t, api.Labels{"team": "search"}, h.sink.Events()[0].Labels)
}

// labels returns n pairs prefix0=v, prefix1=v...
func labels(n int, prefix string) api.Labels {
	l := api.Labels{}
	for i := range n {
		l[prefix+string(rune('a'+i))] = "v"
	}
	return l
}
