package replay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// catalogFile prices openai model "m" at input dollars per million input
// tokens and $0.32 per million output tokens.
func catalogFile(input string) []byte {
	return []byte(`{"entries": [{"provider": "openai", "model": "m", "effective_from": "2023-01-01",
 "input": "` + input + `", "output": "0.32", "source": "test", "read_on": "2026-12-04"}]}`)
}

// The wrong-price story (LiteLLM #9833: 8e-07 instead of 8e-08 per
// token): the ledger is projected with a wrong input price; the price is
// fixed in the catalog; verify reports the drift in money, to the
// nano-dollar worked out by hand; a rebuild re-prices the whole history
// with the fixed catalog and records its version; verify says identical.
func TestWrongPriceStory(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	book, err := pricebook.Open(ctx, js, topology.Config{}, nil)
	require.NoError(t, err)
	wrong, err := book.Load(ctx, catalogFile("0.8"), "wrong.json", time.Now())
	require.NoError(t, err)

	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: event(1, "s1", "r1", 0, false, 1000, 0)},
		{Event: event(2, "s1", "r1", 1, true, 1000, 500)},
		{Event: event(3, "s1", "r2", 0, true, 2000, 100)},
	})
	project(t, js, nil)
	d := verify(t, js, Options{})
	require.True(t, d.Identical(), "the ledger is as the (wrong) catalog prices it: %+v", d.Diffs)
	require.Equal(t, wrong.Version(), d.LedgerPrices)

	fixed, err := book.Load(ctx, catalogFile("0.08"), "fixed.json", time.Now())
	require.NoError(t, err)
	d = verify(t, js, Options{})
	require.False(t, d.Identical())
	require.Equal(t, wrong.Version(), d.LedgerPrices)
	require.Equal(t, fixed.Version(), d.Prices)
	// By hand: billed input 4,000 tokens at $0.80/M = $0.0032 live, at
	// $0.08/M = $0.00032 recomputed: 2,880,000 nano-USD too much; usage
	// input 3,000 tokens (r1's winning attempt and r2): 2,160,000.
	require.Equal(t, pricing.Money(2_880_000), d.BilledCostDelta)
	require.Equal(t, pricing.Money(2_160_000), d.UsageCostDelta)
	require.Zero(t, d.BilledTokenDelta, "tokens do not drift, money does")
	byField := map[string]Diff{}
	for _, df := range d.Diffs {
		if df.Kind == KindRequest && df.ID == "r1" {
			byField[df.Field] = df
		}
	}
	// r1: attempt 0 (1,000 in) and attempt 1 (1,000 in, 500 out).
	require.Equal(t, "0.00176", byField["billed_cost"].Live, "US dollars")
	require.Equal(t, "0.00032", byField["billed_cost"].Recomputed)
	require.Equal(t, int64(1_440_000), *byField["billed_cost"].Delta, "nano-USD")

	require.NoError(t, projection.Rebuild(ctx, projection.RebuildConfig{JS: js, LeaseTTL: time.Second}))
	d = verify(t, js, Options{})
	require.True(t, d.Identical(), "after the rebuild: %+v", d.Diffs)
	require.Equal(t, fixed.Version(), d.LedgerPrices, "the switch records the rebuild's catalog")
}
