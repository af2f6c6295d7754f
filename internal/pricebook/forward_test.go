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

// A catalog change is adopted mid-ledger only when it prices every
// attempt the ledger applied (the latest started on 2026-12-04 at noon)
// as before. Two rows failed before: a new model's price dated before the
// ledger's last attempt was judged forward-only, though an attempt of
// that model the ledger had counted as unpriced would be priced by it
// (verify would report a drift); and the judgement was against a clock,
// so an attempt started after the process's now was not protected.
func TestForwardOnly(t *testing.T) {
	through := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a := `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "1", "output": "2"`
	prev := catalog(t, a)
	for _, tc := range []struct {
		name string
		next *pricing.Catalog
		want bool
	}{
		{"the same prices", catalog(t, a), true},
		{"the same prices, another source", catalog(t, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "1.00", "output": "2", "note": "re-read"`), true},
		{"a new model from after the last attempt", catalog(t, a, `"provider": "openai", "model": "gpt-y", "effective_from": "2026-12-05", "input": "5", "output": "5"`), true},
		{"a new model dated before the last attempt", catalog(t, a, `"provider": "openai", "model": "gpt-y", "effective_from": "2025-01-01", "input": "5", "output": "5"`), false},
		{"a new model from the last attempt's day", catalog(t, a, `"provider": "openai", "model": "gpt-y", "effective_from": "2026-12-04", "input": "5", "output": "5"`), false},
		{"a future price", catalog(t, a, `"provider": "openai", "model": "gpt-x", "effective_from": "2027-01-01", "input": "3", "output": "3"`), true},
		{"a past price rewritten", catalog(t, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "0.1", "output": "2"`), false},
		{"a new price already in effect", catalog(t, a, `"provider": "openai", "model": "gpt-x", "effective_from": "2026-06-01", "input": "3", "output": "3"`), false},
		{"an exact ID shadowing its family", catalog(t, a, `"provider": "openai", "model": "gpt-x-2026-03-01", "effective_from": "2026-01-01", "input": "9", "output": "9"`), false},
		{"an exact ID from after the last attempt", catalog(t, a, `"provider": "openai", "model": "gpt-x-2026-03-01", "effective_from": "2026-12-05", "input": "9", "output": "9"`), true},
		{"a price removed", catalog(t, `"provider": "openai", "model": "gpt-y", "effective_from": "2025-01-01", "input": "5", "output": "5"`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ForwardOnly(prev, tc.next, through))
		})
	}
}

// What ForwardOnly promises, checked on the prices themselves: for a
// catalog it accepts, every attempt started up to the mark (each model,
// dated ID, tier and day of 2026) costs the same in both catalogs; for
// the exact ID from after the mark, the first attempt after its date
// costs its own price.
func TestForwardOnlyPricesTheAppliedAttemptsAlike(t *testing.T) {
	through := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	a := `"provider": "openai", "model": "gpt-x", "effective_from": "2026-01-01", "input": "1", "output": "2"`
	prev := catalog(t, a)
	next := catalog(t, a,
		`"provider": "openai", "model": "gpt-y", "effective_from": "2026-12-05", "input": "5", "output": "5"`,
		`"provider": "openai", "model": "gpt-x-2026-03-01", "effective_from": "2026-12-05", "input": "9", "output": "9"`,
		`"provider": "openai", "model": "gpt-x", "effective_from": "2027-01-01", "input": "3", "output": "3"`)
	require.True(t, ForwardOnly(prev, next, through))
	u := pricing.Attempt{Provider: "openai"}
	u.Usage.InputTokens, u.Usage.OutputTokens = 1000, 100
	for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !at.After(through); at = at.Add(7 * time.Hour) {
		for _, m := range []string{"gpt-x", "gpt-y", "gpt-x-2026-03-01"} {
			u.Model, u.At = m, at
			p, pok := prev.Price(u)
			n, nok := next.Price(u)
			require.Equal(t, pok, nok, "%s at %s", m, at)
			require.Equal(t, p, n, "%s at %s", m, at)
		}
	}
	u.Model, u.At = "gpt-x-2026-03-01", time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	n, ok := next.Price(u)
	require.True(t, ok)
	require.Equal(t, pricing.Money(9*1000*1000+9*100*1000), n.Total)
}
