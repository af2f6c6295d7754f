package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/bench"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		want      config
		wantError string
	}{
		{"defaults", nil, nil, config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"env", map[string]string{"BENCH_SCALE": "0.1", "BENCH_EVENTS": "5000", "BENCH_WORKLOADS": "c", "BENCH_FLEET": "off"}, nil,
			config{Rounds: 3, Labels: "none", Scale: 0.1, Events: 5000, Seed: 1, Workloads: []string{"c"}, Out: "bench/results", Fleet: "off", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"flags over env", map[string]string{"BENCH_SCALE": "0.1"}, []string{"--scale", "0.5", "--workloads", "a, b"},
			config{Rounds: 3, Labels: "none", Scale: 0.5, Seed: 1, Workloads: []string{"a", "b"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"fleet only", nil, []string{"--fleet", "only"},
			config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "only", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"fleet only from env", map[string]string{"BENCH_FLEET": "only"}, nil,
			config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "only", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"gateway only from env", map[string]string{"BENCH_GATEWAY": "only"}, nil,
			config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "only", Upload: "on", Durable: true}, ""},
		{"upload only, another gateway", map[string]string{"BENCH_UPLOAD": "only", "BENCH_GATEWAY_BIN": "/tmp/gw"}, nil,
			config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "only", GatewayBin: "/tmp/gw", Durable: true}, ""},
		{"bad upload", nil, []string{"--upload", "yes"}, config{}, `--upload (BENCH_UPLOAD) "yes" must be on, off or only`},
		{"durable off from env", map[string]string{"BENCH_DURABLE": "false"}, nil,
			config{Rounds: 3, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on"}, ""},
		{"bad durable", map[string]string{"BENCH_DURABLE": "maybe"}, nil, config{}, `BENCH_DURABLE "maybe" must be true or false`},
		{"bad fleet", map[string]string{"BENCH_FLEET": "0"}, nil, config{}, `BENCH_FLEET) "0" must be on, off or only`},
		{"bad gateway", nil, []string{"--gateway", "yes"}, config{}, `--gateway (BENCH_GATEWAY) "yes" must be on, off or only`},
		{"bad scale", map[string]string{"BENCH_SCALE": "x"}, nil, config{}, "BENCH_SCALE"},
		{"rounds and lease TTL from env", map[string]string{"BENCH_ROUNDS": "5", "BENCH_LEASE_TTL": "20s"}, nil,
			config{Rounds: 5, Labels: "none", LeaseTTL: 20 * time.Second, Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"rounds flag", nil, []string{"--rounds", "1"},
			config{Rounds: 1, Labels: "none", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"no rounds", nil, []string{"--rounds", "0"}, config{}, "--rounds 0 must be at least 1"},
		{"bad rounds", map[string]string{"BENCH_ROUNDS": "many"}, nil, config{}, `BENCH_ROUNDS "many" must be a positive integer`},
		{"short lease", nil, []string{"--lease-ttl", "500ms"}, config{}, "--lease-ttl 500ms must be 0 (the production default) or at least 1s"},
		{"bad lease", map[string]string{"BENCH_LEASE_TTL": "10"}, nil, config{}, `BENCH_LEASE_TTL "10" must be a duration`},
		{"unknown workload", nil, []string{"--workloads", "a,z"}, config{}, `unknown workload "z"`},
		{"labels from env", map[string]string{"BENCH_LABELS": "team,user"}, nil,
			config{Rounds: 3, Labels: "team,user", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"labels flag", map[string]string{"BENCH_LABELS": "team,user"}, []string{"--labels", "team"},
			config{Rounds: 3, Labels: "team", Scale: 1, Seed: 1, Workloads: []string{"a", "b", "c"}, Out: "bench/results", Fleet: "on", Gateway: "on", Upload: "on", Durable: true}, ""},
		{"bad labels", nil, []string{"--labels", "user"}, config{}, `--labels (BENCH_LABELS) "user" must be one of none, team, team,user`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"BENCH_SCALE", "BENCH_EVENTS", "BENCH_WORKLOADS", "BENCH_FLEET", "BENCH_GATEWAY", "BENCH_UPLOAD", "BENCH_GATEWAY_BIN", "BENCH_DURABLE", "BENCH_ROUNDS", "BENCH_LEASE_TTL", "BENCH_LABELS"} {
				t.Setenv(k, tt.env[k])
			}
			got, err := parseFlags(tt.args)
			if tt.wantError != "" {
				require.ErrorContains(t, err, tt.wantError)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestPartsRun(t *testing.T) {
	tests := []struct {
		fleet, gateway          string
		core, runFleet, runGate bool
	}{
		{"on", "on", true, true, true},
		{"off", "on", true, false, true},
		{"only", "on", false, true, false},
		{"on", "only", false, false, true},
		{"only", "only", false, true, true},
		{"off", "off", true, false, false},
	}
	for _, tt := range tests {
		c := config{Fleet: tt.fleet, Gateway: tt.gateway}
		assert.Equal(t, tt.core, !c.only(), "%s/%s: the core", tt.fleet, tt.gateway)
		assert.Equal(t, tt.runFleet, c.runs(c.Fleet), "%s/%s: the fleet", tt.fleet, tt.gateway)
		assert.Equal(t, tt.runGate, c.runs(c.Gateway), "%s/%s: the gateway", tt.fleet, tt.gateway)
	}
}

func TestResize(t *testing.T) {
	specs := bench.Standard(1)
	a := resize(specs[0], 100_000)
	assert.Equal(t, 100_000, a.Events)
	assert.Equal(t, 1_000, a.Sessions)
	c := resize(specs[2], 100_001)
	assert.Equal(t, 50_000, c.Requests)
	assert.Equal(t, 100_000, c.Events, "a whole number of attempts per request")
	assert.Equal(t, 10_000, c.Sessions)
	require.NoError(t, c.Validate())
}

func TestEvaluate(t *testing.T) {
	res := results{
		Workloads: []workloadResult{{Spec: bench.Spec{Name: "c"}, PublishRate: 200_000, Ratio: 0.4,
			RebuildRatio: 0.5, VerifyRatio: 0.49, VerifyVsAggregator: 1.2, Aggregator: childRun{PeakRSSBytes: 100 << 20},
			Verify:   childRun{PeakRSSBytes: 300 << 20},
			Features: []featureResult{newFeatureResult(feature{Name: "pricing", Target: 0.05}, []float64{92, 91, 93}, []float64{100, 100, 100})}}},
		Middleware: []middlewareResult{{Name: "mem", NsPerOp: 500, AllocsPerOp: 3, Target: true}, {Name: "nats", NsPerOp: 9000, AllocsPerOp: 40}},
	}
	got := map[string]bool{}
	for _, c := range evaluate(res) {
		got[c.Target] = c.Pass
	}
	assert.Equal(t, map[string]bool{
		"workload c: aggregator/raw >= 0.5":                    false,
		"workload c: rebuild/raw >= 0.5":                       true,
		"workload c: verify >= aggregator catch-up rate":       true,
		"workload c: verify peak RSS < 256 MiB":                false,
		"workload c: pricing costs <= 5% of the catch-up rate": false, // 8 %, the rounds agreeing within 2 %
		"workload c: publish >= 150000 ev/s":                   true,
		"workload c: aggregator peak RSS < 256 MiB":            true,
		"mem: < 2000 ns/op":                                    true,
		"mem: < 15 allocs/op":                                  true,
	}, got)
}

func TestEvaluateFleet(t *testing.T) {
	run := func(scenario, limits string, rateLimited, outage int64, wall float64, failed int64) fleetRun {
		r := fleetRun{Scenario: scenario, Limits: limits}
		r.Summary.RateLimited, r.Summary.OutageAttempts, r.Summary.WallSeconds = rateLimited, outage, wall
		r.Summary.Fleet.CallsFailed = failed
		return r
	}
	tests := []struct {
		name string
		runs []fleetRun
		want []bool // 429s, time, outage
	}{
		{"met", []fleetRun{run("tier", "off", 300, 0, 3, 160), run("tier", "none", 2000, 0, 10, 0), run("tier", "on", 30, 0, 10.9, 0),
			run("outage", "off", 0, 70, 8, 0), run("outage", "on", 0, 9, 8, 0)}, []bool{true, true, true}},
		{"missed", []fleetRun{run("tier", "off", 300, 0, 3, 160), run("tier", "none", 2000, 0, 10, 0), run("tier", "on", 31, 0, 11.1, 0),
			run("outage", "off", 0, 70, 8, 0), run("outage", "on", 0, 10, 8, 0)}, []bool{false, false, false}},
		{"none did not do every call", []fleetRun{run("tier", "off", 300, 0, 3, 160), run("tier", "none", 2000, 0, 8, 30), run("tier", "on", 0, 0, 8.1, 0)},
			[]bool{true, false}},
		{"no 429s off", []fleetRun{run("tier", "off", 0, 0, 3, 0), run("tier", "on", 0, 0, 3, 0)}, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []bool
			for _, c := range evaluateFleet(&fleetResult{Runs: tt.runs}) {
				got = append(got, c.Pass)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// The verdict of a with/without comparison uses the median of the paired
// costs, and says inconclusive, neither pass nor fail, when the rounds
// disagree by more than the target: the -14 %, -5 %, +25 % of three
// single runs on a loaded machine decide nothing.
func TestFeatureVerdict(t *testing.T) {
	pricing := feature{Name: "pricing", Target: 0.05}
	tests := []struct {
		name               string
		with, without      []float64
		cost, spread       float64
		pass, inconclusive bool
	}{
		{"within the target", []float64{98, 97, 99}, []float64{100, 100, 100}, 0.02, 0.02, true, false},
		{"over the target", []float64{90, 91, 92}, []float64{100, 100, 100}, 0.09, 0.02, false, false},
		{"paired, not pooled: the load moved both sides", []float64{49, 98, 196}, []float64{50, 100, 200}, 0.02, 0, true, false},
		{"noise", []float64{114, 105, 75}, []float64{100, 100, 100}, -0.05, 0.39, false, true},
		{"one round", []float64{99}, []float64{100}, 0.01, 0, false, true},
		{"even rounds: the mean of the middle two", []float64{99, 98, 97, 96}, []float64{100, 100, 100, 100}, 0.025, 0.03, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newFeatureResult(pricing, tt.with, tt.without)
			assert.InDelta(t, tt.cost, r.Cost, 1e-9)
			assert.InDelta(t, tt.spread, r.Spread, 1e-9)
			pass, inconclusive := r.verdict()
			assert.Equal(t, tt.pass, pass)
			assert.Equal(t, tt.inconclusive, inconclusive)
			c := r.check("a")
			assert.Equal(t, "workload a: pricing costs <= 5% of the catch-up rate", c.Target)
			assert.Equal(t, tt.pass, c.Pass)
			assert.Equal(t, tt.inconclusive, c.Inconclusive)
		})
	}
}

// The rounds interleave: every variant once a round, the run with every
// feature next to each run without one, the order reversed every other
// round, so a load that grows or fades during the rounds weighs on both
// sides alike.
func TestRoundOrder(t *testing.T) {
	one := []feature{{Name: "pricing"}}
	assert.Equal(t, []variant{{}, {"pricing"}}, roundOrder(one, 0))
	assert.Equal(t, []variant{{"pricing"}, {}}, roundOrder(one, 1))
	assert.Equal(t, roundOrder(one, 0), roundOrder(one, 2))
	two := []feature{{Name: "pricing"}, {Name: "rollups"}}
	assert.Equal(t, []variant{{"pricing"}, {}, {"rollups"}}, roundOrder(two, 0))
	assert.Equal(t, []variant{{"rollups"}, {}, {"pricing"}}, roundOrder(two, 1))
	assert.Equal(t, []variant{{}}, roundOrder(nil, 0))
}

func TestWithoutFeatures(t *testing.T) {
	var c projection.Config
	require.NoError(t, withoutFeatures(&c, ""))
	assert.Nil(t, c.Apply, "every feature on: the aggregator's own merge")
	require.NoError(t, withoutFeatures(&c, "pricing"))
	assert.NotNil(t, c.Apply, "without pricing: the merge without the catalog")
	c = projection.Config{Names: projection.ScratchNames("bench-0-rollups")}
	require.NotEmpty(t, c.Names.Rollups, "a run's set has every bucket the live ledger has")
	require.NoError(t, withoutFeatures(&c, "rollups"))
	assert.Empty(t, c.Names.Rollups, "without rollups: no rollups bucket")
	assert.Nil(t, c.Apply, "pricing stays on")
	require.ErrorContains(t, withoutFeatures(&c, "pricing,colour"), `unknown feature "colour"`)
}

// A run's set is deleted whole after the run, and nothing else: not the
// live ledger the verify and rebuild children read afterwards, not the
// set of another run whose name starts the same.
func TestDeleteSet(t *testing.T) {
	_, _, js := natstest.StartJS(t)
	ctx := context.Background()
	create := func(set string) {
		n := projection.ScratchNames(set)
		if set == "" {
			n = projection.LiveNames()
		}
		for _, b := range []string{n.Requests, n.Sessions, n.State, n.Rollups} {
			_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b})
			require.NoError(t, err)
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n.Rejected, Subjects: []string{n.RejectedPrefix + ">"}})
		require.NoError(t, err)
	}
	for _, set := range []string{"", "bench-1-all", "bench-1-all-x", "bench-11-all"} {
		create(set)
	}
	require.NoError(t, deleteSet(ctx, js, "bench-1-all"))
	var left []string
	for name := range js.StreamNames(ctx).Name() {
		left = append(left, name)
	}
	assert.ElementsMatch(t, []string{
		"KV_ledger_requests", "KV_ledger_sessions", "KV_ledger_state", "KV_ledger_rollups", "LEDGER_REJECTED",
		"KV_ledger_rebuild_bench-1-all-x_requests", "KV_ledger_rebuild_bench-1-all-x_sessions", "KV_ledger_rebuild_bench-1-all-x_state",
		"KV_ledger_rebuild_bench-1-all-x_rollups", "LEDGER_REBUILD_bench-1-all-x_REJECTED",
		"KV_ledger_rebuild_bench-11-all_requests", "KV_ledger_rebuild_bench-11-all_sessions", "KV_ledger_rebuild_bench-11-all_state",
		"KV_ledger_rebuild_bench-11-all_rollups", "LEDGER_REBUILD_bench-11-all_REJECTED",
	}, left)
}
