package gateway

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/pricing"
)

// The answer carries the attempt's cost, priced by hand: 10 uncached
// input tokens at $1/M, 90 cache reads at $0.10/M and 5 output tokens at
// $5/M are 10,000 + 9,000 + 25,000 nano-USD; a model without a price says
// so; without a catalog there is no header.
func TestCostHeader(t *testing.T) {
	cat, err := pricing.Parse([]byte(`{"entries": [{"provider": "anthropic", "model": "claude-test", "effective_from": "2020-01-01",
 "input": "1", "cache_read": "0.10", "output": "5", "source": "test", "read_on": "2026-12-04"}]}`))
	require.NoError(t, err)
	other, err := pricing.Parse([]byte(`{"entries": [{"provider": "anthropic", "model": "claude-other", "effective_from": "2020-01-01",
 "input": "1", "output": "5", "source": "test", "read_on": "2026-12-04"}]}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		prices *pricing.Catalog
		want   string
	}{
		{"priced", cat, "0.000044"},
		{"unpriced", other, "unpriced"},
		{"no catalog", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startScripted(t, reply(200, anthropicOK, "Request-Id", "req_ok"))
			h := newHarness(t, up.srv.URL, func(c *Config) { c.Prices = tc.prices })
			resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "sk-ant-test")
			_, err := read(resp)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, tc.want, resp.Header.Get(HeaderCost))
		})
	}
}
