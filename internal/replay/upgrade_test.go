package replay

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricebook"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/testkit"
)

// buildCatalog is the default catalog of a build: file parsed.
func buildCatalog(t *testing.T, file []byte) *pricing.Catalog {
	t.Helper()
	c, err := pricing.Parse(file)
	require.NoError(t, err)
	return c
}

// runBuild runs an aggregator of a build whose default catalog is def
// until it has applied the whole stream, and returns its logs and stop.
func runBuild(t *testing.T, js jetstream.JetStream, def *pricing.Catalog) (*testkit.Logs, func()) {
	t.Helper()
	logs := &testkit.Logs{}
	stop := ledgertest.RunAggregator(t, js, projection.Config{BatchSize: 13, Catalog: def, Logger: logs.JSONLogger(slog.LevelInfo)})
	ledgertest.WaitCaughtUp(t, js)
	return logs, stop
}

// waitLogged waits until the logs say s (the new term has begun).
func waitLogged(t *testing.T, logs *testkit.Logs, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return logs.Contains(s) }, 10*time.Second, time.Millisecond, "logged: %q", s)
}

func ledgerPrices(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	v, err := projection.LedgerPrices(context.Background(), js)
	require.NoError(t, err)
	return v
}

// A ledger priced by a build whose default catalog is A (no file ever
// loaded) is taken over by a build whose default is A plus a new model
// priced from after the ledger's latest attempt: the new build starts,
// stores its default as a catalog version, adopts it (forward-only),
// prices the new model's later attempts, and verify says identical.
// Before, ledger_prices kept only user files and the new build could not
// rebuild A (pricebook.ErrUnavailable): it refused to start.
func TestUpgradeWithADefaultThatAddsAModel(t *testing.T) {
	js := startJS(t)
	a := buildCatalog(t, modelFile())
	b := buildCatalog(t, modelFile([2]string{"n", "2024-01-01"}))
	nov2023 := time.Unix(1_700_000_000, 0).UTC()
	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: event(1, "s1", "r1", 0, true, 1000, 500)},
		{Event: onModel(event(2, "s1", "r2", 0, true, 2000, 100), "n", nov2023)},
	})
	_, stop := runBuild(t, js, a)
	stop()
	require.Equal(t, a.Version(), ledgerPrices(t, js))
	before := map[string]money{"r1": requestMoney(t, js, "r1"), "r2": requestMoney(t, js, "r2")}
	require.Equal(t, money{UnpricedBilled: 2100}, before["r2"])
	note, pending, err := ExplainPrices(context.Background(), js, b)
	require.NoError(t, err)
	require.Equal(t, "the ledger prices with the current catalog\n", note)
	require.Contains(t, pending, "is catalog "+b.Version()+", not the current one", "verify and `aggregator prices` of build B say what its aggregator will do")

	logs, stop := runBuild(t, js, b)
	defer stop()
	waitLogged(t, logs, "the ledger adopts the current price catalog")
	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: onModel(event(3, "s1", "r3", 0, true, 3000, 200), "n", time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))},
	})
	ledgertest.WaitCaughtUp(t, js)
	require.Equal(t, b.Version(), ledgerPrices(t, js), "the new build's default is adopted")
	// 3,000 input at $2/M and 200 output at $4/M.
	require.Equal(t, money{UsageCost: 6_800_000, BilledCost: 6_800_000}, requestMoney(t, js, "r3"))
	for id, m := range before {
		require.Equal(t, m, requestMoney(t, js, id), "%s is unchanged", id)
	}
	d := verify(t, js, Options{Catalog: b})
	require.True(t, d.Identical(), "%+v", d.Diffs)
	require.Equal(t, b.Version(), d.Prices)
}

// A ledger priced by a build whose default catalog is A is taken over by
// a build whose default corrects a past price (m's input, $0.80 -> $0.08
// per million): the new build starts and writes, keeps pricing with the
// recorded version A (read from ledger_prices), says at WARN that verify
// shows the drift; verify shows it in money, a rebuild re-prices, verify
// says identical. Before, the new build refused to start.
func TestUpgradeWithADefaultThatCorrectsAPrice(t *testing.T) {
	js := startJS(t)
	a := buildCatalog(t, catalogFile("0.8"))
	fixed := buildCatalog(t, catalogFile("0.08"))
	ledgertest.Publish(t, js, []ledgertest.Message{
		{Event: event(1, "s1", "r1", 0, true, 1000, 500)},
	})
	_, stop := runBuild(t, js, a)
	stop()

	logs, stop := runBuild(t, js, fixed)
	waitLogged(t, logs, "changes the price of attempts the ledger has applied")
	require.True(t, logs.Contains("`aggregator verify` shows the drift in money"))
	ledgertest.Publish(t, js, []ledgertest.Message{{Event: event(2, "s1", "r2", 0, true, 2000, 100)}})
	ledgertest.WaitCaughtUp(t, js)
	stop()
	require.Equal(t, a.Version(), ledgerPrices(t, js), "the ledger keeps the recorded version")
	// r2, written by the new build, is priced with A: 2,000 input at
	// $0.80/M and 100 output at $0.32/M.
	require.Equal(t, int64(1_632_000), requestMoney(t, js, "r2").BilledCost)

	d := verify(t, js, Options{Catalog: fixed})
	require.False(t, d.Identical())
	require.Equal(t, a.Version(), d.LedgerPrices)
	require.Equal(t, fixed.Version(), d.Prices)
	// 3,000 input tokens at $0.80/M live, at $0.08/M recomputed.
	require.Equal(t, pricing.Money(2_160_000), d.BilledCostDelta)
	require.Contains(t, d.PricesNote, "changes the price of attempts the ledger has applied")
	require.Contains(t, d.PricesNote, "the ledger keeps pricing with catalog "+a.Version())
	require.Empty(t, d.DefaultPricesNote, "build C's default is current already")

	require.NoError(t, projection.Rebuild(context.Background(), projection.RebuildConfig{JS: js, LeaseTTL: time.Second, Catalog: fixed}))
	d = verify(t, js, Options{Catalog: fixed})
	require.True(t, d.Identical(), "after the rebuild: %+v", d.Diffs)
	require.Equal(t, fixed.Version(), d.LedgerPrices)
}

// onModel sets an event's model and started_at.
func onModel(ev *events.Attempt, model string, started time.Time) *events.Attempt {
	ev.Model, ev.StartedAt, ev.FinishedAt = model, started, started.Add(time.Second)
	return ev
}

// A ledger priced by an older build that never stored its default catalog
// (as every build did before ledger_prices kept resolved catalogs) cannot
// be priced by a build whose default differs: it refuses to write, saying
// why and what to do (pricebook.ErrUnavailable); `aggregator rebuild`
// re-prices the history with the new build's default, which its refused
// term made current, and the new build then runs on it.
func TestUpgradeFromADefaultNeverStored(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	a := buildCatalog(t, catalogFile("0.8"))
	b := buildCatalog(t, modelFile([2]string{"n", "2024-01-01"}))
	ledgertest.Publish(t, js, []ledgertest.Message{{Event: event(1, "s1", "r1", 0, true, 1000, 500)}})
	_, stop := runBuild(t, js, a)
	stop()
	// What the older build left: no catalog stored, none current.
	kv, err := js.KeyValue(ctx, names.PricesBucket)
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	for k := range keys.Keys() {
		require.NoError(t, kv.Purge(ctx, k))
	}

	agg, err := projection.New(projection.Config{JS: js, LeaseTTL: 300 * time.Millisecond, Catalog: b})
	require.NoError(t, err)
	err = agg.Run(ctx)
	require.ErrorIs(t, err, pricebook.ErrUnavailable)
	require.ErrorContains(t, err, "is not stored in ledger_prices")
	require.ErrorContains(t, err, "`aggregator rebuild`")

	require.NoError(t, projection.Rebuild(ctx, projection.RebuildConfig{JS: js, LeaseTTL: time.Second, Catalog: b}))
	require.Equal(t, b.Version(), ledgerPrices(t, js))
	_, stop = runBuild(t, js, b)
	ledgertest.Publish(t, js, []ledgertest.Message{{Event: event(2, "s1", "r2", 0, true, 2000, 100)}})
	ledgertest.WaitCaughtUp(t, js)
	stop()
	d := verify(t, js, Options{Catalog: b})
	require.True(t, d.Identical(), "%+v", d.Diffs)
}
