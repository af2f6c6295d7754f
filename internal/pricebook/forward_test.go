package pricebook

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/pricing"
)

func catalog(t *testing.T, entries ...string) *pricing.Catalog {
	t.Helper()
	body := `{"entries": [`
	for i, e := range entries {
		if i > 0 {
			body += ","
		}
		body += `{` + e + `, "source": "test", "read_on": "2026-12-01"}`
	}
	c, err := pricing.Parse([]byte(body + `]}`))
	require.NoError(t, err)
	return c
}

// A catalog change is adopted mid-ledger only when it prices every past
// attempt as before.
func TestForwardOnly(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a := `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "1", "output": "2"`
	prev := catalog(t, a)
	for _, tc := range []struct {
		name string
		next *pricing.Catalog
		want bool
	}{
		{"the same prices", catalog(t, a), true},
		{"the same prices, another source", catalog(t, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "1.00", "output": "2", "note": "re-read"`), true},
		{"a new model", catalog(t, a, `"provider": "openai", "model": "gpt-y", "effective_from": "2025-01-01", "input": "5", "output": "5"`), true},
		{"a future price", catalog(t, a, `"provider": "openai", "model": "gpt-x", "effective_from": "2027-01-01", "input": "3", "output": "3"`), true},
		{"a past price rewritten", catalog(t, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "0.1", "output": "2"`), false},
		{"a new price already in effect", catalog(t, a, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-06-01", "input": "3", "output": "3"`), false},
		{"an exact ID shadowing its family", catalog(t, a, `"provider": "openai", "model": "gpt-x-2026-03-01", "effective_from": "2026-01-01", "input": "9", "output": "9"`), false},
		{"a price removed", catalog(t, `"provider": "openai", "model": "gpt-y", "effective_from": "2025-01-01", "input": "5", "output": "5"`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ForwardOnly(prev, tc.next, now))
		})
	}
}
