package projection

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/topology"
)

// ReadRollups returns the cells whose hour is in [Since, Until), a bound
// inside an hour included: a cell's hour is its start, so Since 12:30
// leaves out the cell of 12:00 and Until 14:30 keeps the one of 14:00.
// The fence marker is not a cell; a ledger without rollups says so.
func TestReadRollupsFilter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := openResources(ctx, e.js, topology.Config{}, LiveNames(), nil)
	require.NoError(t, err)
	_, err = res.rollups.fence(ctx, 1)
	require.NoError(t, err)
	var puts []put
	for h := range 4 { // 12:00, 13:00, 14:00, 15:00
		c := &Rollup{Cell: Cell{Hour: t0.Add(time.Duration(h) * time.Hour), Provider: "anthropic", Model: "m", Labels: api.Labels{"team": "a"}},
			Totals: Totals{Requests: int64(h + 1)}, Seq: 3}
		puts = append(puts, put{key: c.Key(), value: c.appendJSON(nil)})
	}
	require.NoError(t, res.rollups.putAll(ctx, puts, nil))
	hours := func(f RollupFilter) []int {
		t.Helper()
		all, err := ReadRollups(ctx, e.js, LiveNames(), f)
		require.NoError(t, err)
		var out []int
		for _, c := range all {
			out = append(out, int(c.Hour.Sub(t0)/time.Hour))
			require.Equal(t, c.Requests, int64(c.Hour.Sub(t0)/time.Hour)+1)
			require.Equal(t, api.Labels{"team": "a"}, c.Labels)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    RollupFilter
		want []int
	}{
		{"all", RollupFilter{}, []int{0, 1, 2, 3}},
		{"since on the hour", RollupFilter{Since: t0.Add(time.Hour)}, []int{1, 2, 3}},
		{"since inside an hour", RollupFilter{Since: t0.Add(30 * time.Minute)}, []int{1, 2, 3}},
		{"until on the hour", RollupFilter{Until: t0.Add(2 * time.Hour)}, []int{0, 1}},
		{"until inside an hour", RollupFilter{Until: t0.Add(2*time.Hour + 30*time.Minute)}, []int{0, 1, 2}},
		{"both, another zone", RollupFilter{Since: t0.Add(time.Hour).In(time.FixedZone("UTC+5:30", 19800)), Until: t0.Add(3 * time.Hour)}, []int{1, 2}},
		{"empty", RollupFilter{Since: t0.Add(2 * time.Hour), Until: t0.Add(2 * time.Hour)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, hours(tc.f)) })
	}
	none := LiveNames()
	none.Rollups = ""
	_, err = ReadRollups(ctx, e.js, none, RollupFilter{})
	require.ErrorIs(t, err, ErrNoRollups)
}

// Without rollups (Names.Rollups empty, the benchmark's comparison) the
// aggregator projects requests and sessions as ever and creates no
// rollups bucket.
func TestAggregatorWithoutRollups(t *testing.T) {
	e := newEnv(t)
	ws := sessionEvents(t, 1, 5)
	e.publish(ws...)
	n := LiveNames()
	n.Rollups = ""
	e.start(Config{Names: n})
	e.waitCheckpoint(e.lastSeq())
	m := buildModel(ws)
	reqs, sess := e.ledger()
	require.Equal(t, m.requests, reqs)
	require.Equal(t, m.sessions, sess)
	_, err := e.js.KeyValue(context.Background(), n.Requests)
	require.NoError(t, err)
	_, err = e.js.KeyValue(context.Background(), LiveNames().Rollups)
	require.Error(t, err, "no rollups bucket")
}

// A rollup reads back exactly through the plain layout's reader and
// through encoding/json alike: escaped strings, labels, a saturated sum,
// numbers past int64 (seq) and an unknown member go the slow way.
func TestRollupCodec(t *testing.T) {
	base := Rollup{Cell: Cell{Hour: t0, Provider: "openai", Model: "gpt-4.1", Labels: api.Labels{"team": "search", "user": "u-1"}},
		Totals: Totals{Requests: 3, Succeeded: 2, Failed: 1, Attempts: 5, Usage: events.Usage{InputTokens: 10, OutputTokens: 2, ReasoningTokens: 1},
			Billed:               events.Usage{InputTokens: 30, OutputTokens: 4, CacheCreationInputTokens: 3, CacheCreation1hInputTokens: 1, ReasoningTokens: 1},
			EstimatedInputTokens: 7, UsageCost: 100, BilledCost: 300, UnpricedUsageTokens: 1, UnpricedBilledTokens: 2, LabelConflicts: 1},
		Seq: 42, Rules: RulesVersion}
	escaped := base
	escaped.Model, escaped.Labels = "gpt-\"4\" <mini>", api.Labels{"team": "s\u2028x"}
	saturated := base
	saturated.Labels, saturated.Attempts, saturated.Saturated = nil, Ceiling, true
	for _, c := range []Rollup{base, escaped, saturated} {
		data := c.appendJSON(nil)
		var fast Rollup
		require.Equal(t, c.Model != escaped.Model, fastRollup(data, &fast), string(data))
		var back Rollup
		require.NoError(t, json.Unmarshal(data, &back))
		require.Equal(t, c, back, string(data))
	}
	var back Rollup
	require.NoError(t, json.Unmarshal([]byte(`{"hour":"2026-11-30T12:00:00Z","provider":"p","model":"m","requests":1,"seq":18446744073709551615,"other":[1]}`), &back))
	require.Equal(t, Rollup{Cell: Cell{Hour: t0, Provider: "p", Model: "m"}, Totals: Totals{Requests: 1}, Seq: math.MaxUint64}, back)
	require.Error(t, json.Unmarshal([]byte(`{"hour":"2026-11-30T12:00:00Z","requests":"x"}`), &back))
}

// A ledger projected before the coarser grains (RulesVersion 7) keeps
// only its hour cells, and reports may read only those, until a rebuild:
// day and model-hour cells begun mid-life would hold only the requests
// since. The rebuild projects them from the first event and the ledger
// then says it has them all.
func TestLedgerProjectedBeforeTheGrains(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	ws := genWorkload(t, rng, 5, 80)
	half := len(ws) / 2
	e := newEnv(t)
	e.publish(ws[:half]...)
	first := e.start(Config{InstanceID: "old", BatchSize: 9})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, first.stop(t))
	all, err := LedgerRollupGrains(ctx, e.js)
	require.NoError(t, err)
	require.True(t, all, "a ledger projected from its first event has every grain")

	// As version 6 left it: no coarser cells, a checkpoint without
	// all_grains.
	kv, err := e.js.KeyValue(ctx, names.RollupsBucket)
	require.NoError(t, err)
	for _, g := range Grains[1:] {
		cells, err := ReadRollups(ctx, e.js, LiveNames(), RollupFilter{Grain: g})
		require.NoError(t, err)
		require.NotEmpty(t, cells)
		for _, c := range cells {
			require.NoError(t, kv.Purge(ctx, c.Key()))
		}
	}
	state, err := e.js.KeyValue(ctx, names.StateBucket)
	require.NoError(t, err)
	cp, rev, err := readCheckpoint(ctx, state)
	require.NoError(t, err)
	cp.AllGrains, cp.Rules = false, 6
	_, err = state.Update(ctx, names.CheckpointKey, mustJSON(cp), rev)
	require.NoError(t, err)

	e.publish(ws[half:]...)
	live := e.start(Config{InstanceID: "live", BatchSize: 9})
	e.waitCheckpoint(e.lastSeq())
	all, err = LedgerRollupGrains(ctx, e.js)
	require.NoError(t, err)
	require.False(t, all)
	m := buildModel(wireStored(ws))
	got := e.rollups()
	for k, c := range m.rollups {
		if c.Grain != GrainHour {
			delete(m.rollups, k)
		}
	}
	require.Equal(t, m.rollups, got, "only the hour cells, all of them")

	require.NoError(t, Rebuild(ctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, BatchSize: 13}))
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, live.agg.Leading, 5*time.Second, 5*time.Millisecond, "the live aggregator resumes")
	all, err = LedgerRollupGrains(ctx, e.js)
	require.NoError(t, err)
	require.True(t, all, "a rebuilt ledger has every grain")
	e.requireLedger(buildModel(wireStored(ws)))
}

// The keys the batch computes (one hash for the hour and day cells, a
// kept one for model-hour cells, the time token written by hand) are
// Cell.Key's, for every grain, hours of every digit, with and without
// labels, and years at the edges of the contract.
func TestCellKeysAreKey(t *testing.T) {
	var ck CellKeys
	for _, hour := range []time.Time{t0, time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC), t0.In(time.FixedZone("UTC-3", -3*3600))} {
		for _, labels := range []api.Labels{nil, {"team": "a"}, {"z": "1", "a": "2", "m": "3"}} {
			for _, model := range []string{"m", "other"} {
				c := Cell{Hour: hour, Provider: "anthropic", Model: model, Labels: labels}
				keys := ck.Keys(c)
				for _, g := range Grains {
					require.Equal(t, c.In(g).Key(), keys[g], "%s %v %s", g, hour, labels)
					token := strings.TrimPrefix(keys[g], keyPrefix[g])[:len(g.timeLayout())]
					require.Equal(t, c.In(g).Hour.UTC().Format(g.timeLayout()), token, "time token")
				}
				again := ck.Keys(c)
				require.Equal(t, keys, again)
			}
		}
	}
}
