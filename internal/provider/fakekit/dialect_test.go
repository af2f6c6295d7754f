package fakekit_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

func valid() *fakekit.Dialect {
	return &fakekit.Dialect{
		Provider:  "acme",
		Prefix:    "/acme",
		BasePath:  "/v1/",
		Endpoints: []fakekit.Endpoint{{Path: "/v1/complete", Handle: func(fakekit.Server, http.ResponseWriter, *http.Request) {}}},
	}
}

func TestDialectValidate(t *testing.T) {
	require.NoError(t, valid().Validate())
	tests := []struct {
		name   string
		change func(d *fakekit.Dialect)
		field  string
	}{
		{"no provider", func(d *fakekit.Dialect) { d.Provider = "" }, "Provider"},
		{"provider name against the rule", func(d *fakekit.Dialect) { d.Provider = "Acme AI" }, "Provider"},
		{"prefix without slash", func(d *fakekit.Dialect) { d.Prefix = "acme" }, "Prefix"},
		{"prefix with a trailing slash", func(d *fakekit.Dialect) { d.Prefix = "/acme/" }, "Prefix"},
		{"root prefix", func(d *fakekit.Dialect) { d.Prefix = "/" }, "Prefix"},
		{"base path", func(d *fakekit.Dialect) { d.BasePath = "v1" }, "BasePath"},
		{"no endpoints", func(d *fakekit.Dialect) { d.Endpoints = nil }, "Endpoints"},
		{"endpoint without handler", func(d *fakekit.Dialect) { d.Endpoints[0].Handle = nil }, "Endpoints[0]"},
		{"sim without model", func(d *fakekit.Dialect) { d.Sim = &fakekit.Sim{} }, "Sim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := valid()
			tt.change(d)
			err := d.Validate()
			require.ErrorIs(t, err, fakekit.ErrInvalidDialect)
			assert.Contains(t, err.Error(), tt.field)
		})
	}
}

func TestBaseURLAndDimensions(t *testing.T) {
	d := valid()
	assert.Equal(t, "http://127.0.0.1:1/acme/v1/", d.BaseURL("http://127.0.0.1:1"))
	tier := fakekit.Tier{RequestsPerMinute: 1, InputTokensPerMinute: 20, OutputTokensPerMinute: 300}
	u := events.Usage{InputTokens: 7, OutputTokens: 5}

	split := d.Dimensions(tier) // the default
	require.Len(t, split, 3)
	assert.Equal(t, []string{"requests", "input-tokens", "output-tokens"}, []string{split[0].Name, split[1].Name, split[2].Name})
	assert.Equal(t, []float64{1, 7, 5}, []float64{split[0].Cost(u), split[1].Cost(u), split[2].Cost(u)})

	d.Limits = fakekit.CombinedLimits
	combined := d.Dimensions(tier)
	require.Len(t, combined, 2)
	assert.Equal(t, "tokens", combined[1].Name)
	assert.Equal(t, int64(320), combined[1].Limit, "input plus output")
	assert.Equal(t, float64(12), combined[1].Cost(u))
}
