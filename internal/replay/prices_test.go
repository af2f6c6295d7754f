package replay

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/testkit"
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

// modelFile prices model "m" as catalogFile("0.8") does, and each model
// of more from its date at $2 per million input and $4 per million
// output tokens.
func modelFile(more ...[2]string) []byte {
	body := `{"entries": [{"provider": "openai", "model": "m", "effective_from": "2023-01-01",
 "input": "0.8", "output": "0.32", "source": "test", "read_on": "2026-12-04"}`
	for _, m := range more {
		body += `, {"provider": "openai", "model": "` + m[0] + `", "effective_from": "` + m[1] + `",
 "input": "2", "output": "4", "source": "test", "read_on": "2026-12-04"}`
	}
	return []byte(body + `]}`)
}

// money is what a request record says of money.
type money struct {
	UsageCost      int64 `json:"usage_cost"`
	BilledCost     int64 `json:"billed_cost"`
	UnpricedBilled int64 `json:"unpriced_billed_tokens"`
}

func requestMoney(t *testing.T, js jetstream.JetStream, id string) money {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), names.RequestsBucket)
	require.NoError(t, err)
	e, err := kv.Get(context.Background(), id)
	require.NoError(t, err)
	var m money
	require.NoError(t, json.Unmarshal(e.Value(), &m))
	return m
}

// A catalog that only adds a model's price from after the latest attempt
// the ledger priced is adopted by the RUNNING aggregator, at a batch
// boundary, without a restart: the checkpoint records it with the first
// batch priced by it, the next attempts of the model are priced, the
// records before are unchanged (the model's earlier attempt stays
// unpriced, as the new catalog prices it too), and verify says identical.
// A catalog loaded next that dates a model's price before an attempt of
// it the ledger counted as unpriced is not adopted (before issue 19's fix
// ForwardOnly accepted any new model's price, whatever its date, and
// verify then reported the drift it makes).
func TestForwardOnlyCatalogAdoptedByTheRunningTerm(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	book, err := pricebook.Open(ctx, js, topology.Config{}, nil)
	require.NoError(t, err)
	first, err := book.Load(ctx, modelFile(), "first.json", time.Now())
	require.NoError(t, err)

	nov2023 := time.Unix(1_700_000_000, 0).UTC() // event's own started_at: 2023-11-14
	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: event(1, "s1", "r1", 0, true, 1000, 500)},                        // m: priced
		{Event: onModel(event(2, "s1", "r2", 0, true, 2000, 100), "n", nov2023)}, // n: no price yet
		{Event: onModel(event(3, "s1", "r-o", 0, true, 500, 50), "o", nov2023)},  // o: no price
	})
	logs := &testkit.Logs{}
	ledgertest.RunAggregator(t, js, projection.Config{BatchSize: 13, Logger: logs.JSONLogger(slog.LevelInfo)})
	ledgertest.WaitCaughtUp(t, js)
	v, err := projection.LedgerPrices(ctx, js)
	require.NoError(t, err)
	require.Equal(t, first.Version(), v)
	before := map[string]money{"r1": requestMoney(t, js, "r1"), "r2": requestMoney(t, js, "r2")}
	require.Equal(t, money{UnpricedBilled: 2100}, before["r2"], "n has no price: never $0")

	// n priced from 2024-01-01, after the latest attempt priced.
	next, err := book.Load(ctx, modelFile([2]string{"n", "2024-01-01"}), "next.json", time.Now())
	require.NoError(t, err)
	probe := 100
	// Each probe (a request on m) makes a batch; the watch of
	// ledger_prices reaches the running term in its own time.
	untilLogged := func(s string) {
		t.Helper()
		require.Eventually(t, func() bool {
			probe++
			ledgertest.Publish(t, js, []ledgertest.Message{{Event: event(probe, "s2", "probe-"+strconv.Itoa(probe), 0, true, 10, 1)}})
			ledgertest.WaitCaughtUp(t, js)
			return logs.Contains(s)
		}, 20*time.Second, time.Millisecond)
	}
	untilLogged("the ledger adopts the current price catalog")
	v, err = projection.LedgerPrices(ctx, js)
	require.NoError(t, err)
	require.Equal(t, next.Version(), v, "the running term adopted it, and its checkpoint says so")

	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: onModel(event(4, "s1", "r3", 0, true, 3000, 200), "n", time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))},
	})
	ledgertest.WaitCaughtUp(t, js)
	// By hand: 3,000 input at $2/M and 200 output at $4/M: 6,000,000 +
	// 800,000 nano-USD.
	require.Equal(t, money{UsageCost: 6_800_000, BilledCost: 6_800_000}, requestMoney(t, js, "r3"), "n's next attempt is priced")
	for id, m := range before {
		require.Equal(t, m, requestMoney(t, js, id), "%s is unchanged", id)
	}
	// 1,000 input at $0.80/M and 500 output at $0.32/M.
	require.Equal(t, int64(960_000), before["r1"].BilledCost)
	d := verify(t, js, Options{})
	require.True(t, d.Identical(), "%+v", d.Diffs)
	require.Equal(t, next.Version(), d.LedgerPrices)

	// o priced from 2023-01-01: its attempt of 2023-11-14, already
	// counted as unpriced, would be priced. Not adopted: a rebuild is.
	bad, err := book.Load(ctx, modelFile([2]string{"n", "2024-01-01"}, [2]string{"o", "2023-01-01"}), "bad.json", time.Now())
	require.NoError(t, err)
	untilLogged("changes the price of attempts the ledger has applied")
	v, err = projection.LedgerPrices(ctx, js)
	require.NoError(t, err)
	require.Equal(t, next.Version(), v, "the ledger keeps its catalog")
	d = verify(t, js, Options{})
	require.False(t, d.Identical(), "verify shows what the bad catalog would change")
	require.Equal(t, bad.Version(), d.Prices)
	// 500 input at $2/M and 50 output at $4/M: what o's attempt would cost.
	require.Equal(t, pricing.Money(-1_200_000), d.BilledCostDelta)
}
