package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/retry"
)

// Issue 20: a call's labels are the gateway's defaults, under the client
// key's, under the request's X-Ledger-Labels; every attempt's event
// carries them, and the header never goes upstream.
func TestLabelsReachTheEvents(t *testing.T) {
	keyA, _, err := NewKey()
	require.NoError(t, err)
	tests := []struct {
		name   string
		header []string // X-Ledger-Labels lines
		want   api.Labels
	}{
		{"the key's over the gateway's", nil, api.Labels{"team": "a", "env": "prod"}},
		{"the header's over the key's", []string{"team=search, user=u-42"}, api.Labels{"team": "search", "env": "prod", "user": "u-42"}},
		{"percent-encoded", []string{"note=caf%C3%A9%2C%20ok"}, api.Labels{"team": "a", "env": "prod", "note": "café, ok"}},
		{"two lines are one list", []string{"user=u-1", "env=dev"}, api.Labels{"team": "a", "env": "dev", "user": "u-1"}},
		{"an empty header adds none", []string{""}, api.Labels{"team": "a", "env": "prod"}},
	}
	var steps []step // each call: a 529, then its retry's answer
	for range tests {
		steps = append(steps, reply(529, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`), reply(200, anthropicOK))
	}
	up := startScripted(t, steps...)
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.Keys = keyFileFor(t, keyA, "lk-b") // team-a's key has labels {"team": "a"}
		c.Labels = api.Labels{"team": "gw", "env": "prod"}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.sink.Reset()
			n := len(up.requests())
			resp := h.postLines("/v1/messages", anthropicBody, tc.header, "X-Api-Key", keyA)
			require.Equal(t, 200, resp.StatusCode)
			evs := h.events()
			require.Len(t, evs, 2, "a 529 and its retry")
			for _, ev := range evs {
				assert.Equal(t, tc.want, ev.Labels, "attempt %d", ev.Attempt)
			}
			for _, r := range up.requests()[n:] {
				assert.Empty(t, r.Header.Values(HeaderLabels), "the header never goes upstream")
			}
			assert.Contains(t, h.logs.String(), `"labels":"`+api.FormatLabels(tc.want)+`"`, "the call's debug record names its labels")
		})
	}
}

// A bad X-Ledger-Labels is answered 400 before any attempt, with a body
// naming the header, the key and the rule, logged at WARN; nothing goes
// upstream and no event is published.
func TestBadLabelsHeader(t *testing.T) {
	up := startScripted(t, reply(200, anthropicOK))
	h := newHarness(t, up.srv.URL, func(c *Config) { c.Labels = labelsN("d", 7) })
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = fmt.Sprintf("k%d=v", i)
	}
	for _, tc := range []struct {
		name, header string
		want         []string // in the body
	}{
		{"key upper case", "Team=search", []string{`labels[\"Team\"]`, "key must be a lower-case letter"}},
		{"key with a dash", "team-a=x", []string{`labels[\"team-a\"]`, "key must be a lower-case letter"}},
		{"key too long", strings.Repeat("k", 33) + "=x", []string{strings.Repeat("k", 33), "key must be 1 to 32 bytes, got 33"}},
		{"empty key", "=x", []string{"key must be 1 to 32 bytes, got 0"}},
		{"empty value", "team=", []string{`labels[\"team\"]`, "value must be 1 to 128 bytes, got 0"}},
		{"value too long", "team=" + strings.Repeat("v", 129), []string{`labels[\"team\"]`, "value must be 1 to 128 bytes, got 129"}},
		{"control character", "team=a%0Ab", []string{`labels[\"team\"]`, "value must not hold control characters"}},
		{"invalid UTF-8", "team=%FF", []string{`labels[\"team\"]`, "value must be valid UTF-8"}},
		{"bad escape", "team=100%", []string{`labels[\"team\"]`, "bad percent escape"}},
		{"no equals sign", "team", []string{"pair 1", "has no '='"}},
		{"empty pair", "team=a,,user=b", []string{"pair 2 is empty"}},
		{"key twice", "team=a, team=b", []string{`labels[\"team\"]`, "key is given twice"}},
		{"seventeen pairs", strings.Join(seventeen, ","), []string{"must hold at most 16 pairs, got 17"}},
		{"seventeen with the defaults", "a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9,j=10", []string{"over the client key's and the gateway's labels", "must hold at most 16 pairs, got 17"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.post("/v1/messages", anthropicBody, HeaderLabels, tc.header)
			body, err := read(resp)
			require.NoError(t, err)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, "bad_request", resp.Header.Get(HeaderGatewayError))
			assert.Contains(t, body, HeaderLabels)
			assert.Contains(t, body, "invalid_request_error", "in the provider's error format")
			for _, w := range tc.want {
				assert.Contains(t, body, w)
			}
		})
	}
	assert.Empty(t, up.requests(), "no upstream call")
	assert.Empty(t, h.events(), "no event")
	logs := h.logs.String()
	assert.Contains(t, logs, `"level":"WARN","msg":"gateway: request refused"`)
	assert.Contains(t, logs, `"reason":"bad_labels"`)
	assert.Contains(t, logs, HeaderLabels)
}

// Labels of the gateway's or of a key that break a rule are refused when
// they are configured, naming them.
func TestConfiguredLabelsAreChecked(t *testing.T) {
	_, err := New(Config{Retry: retry.Options{Sink: retry.NewMemorySink()}, Labels: api.Labels{"team": ""}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Labels: labels["team"]: value must be 1 to 128 bytes, got 0`)
	var le *api.LabelError
	assert.ErrorAs(t, err, &le)

	h := `"sha256":"` + strings.Repeat("0", 64) + `"`
	_, err = ParseKeys(strings.NewReader(`{"keys":[{"name":"a",`+h+`,"labels":{"Team":"x"}}]}`), func(string) string { return "" })
	require.ErrorIs(t, err, ErrInvalidKeys)
	assert.Contains(t, err.Error(), `keys[0]: a: labels["Team"]: key must be a lower-case letter`)
	_, err = ParseKeys(strings.NewReader(`{"keys":[{"name":"a",`+h+`,"labels":{"team":7}}]}`), func(string) string { return "" })
	require.ErrorIs(t, err, ErrInvalidKeys)
	assert.Contains(t, err.Error(), "labels")
}

// labelsN returns n pairs PREFIX0=v, PREFIX1=v...
func labelsN(prefix string, n int) api.Labels {
	l := api.Labels{}
	for i := range n {
		l[fmt.Sprintf("%s%d", prefix, i)] = "v"
	}
	return l
}
