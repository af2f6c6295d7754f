package projection

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/topology"
)

func billedIn(n int64) Totals { return Totals{Billed: events.Usage{InputTokens: n}} }

func TestTotalsArithmeticSaturates(t *testing.T) {
	sat := func(x Totals) Totals { x.Saturated = true; return x }
	tests := []struct {
		name string
		got  Totals
		want Totals
	}{
		{"exact", Totals{Requests: 2, Billed: events.Usage{InputTokens: 5}}.Add(Totals{Requests: 1, Billed: events.Usage{InputTokens: 7}}),
			Totals{Requests: 3, Billed: events.Usage{InputTokens: 12}}},
		{"exactly the ceiling is exact", billedIn(Ceiling - 5).Add(billedIn(5)), billedIn(Ceiling)},
		{"an exact ceiling can go down", billedIn(Ceiling).Sub(billedIn(1)), billedIn(Ceiling - 1)},
		{"past the ceiling stops there", billedIn(Ceiling - 5).Add(billedIn(10)), sat(billedIn(Ceiling))},
		{"the other fields stay exact", Totals{Requests: 4, Billed: events.Usage{InputTokens: Ceiling, OutputTokens: 3}}.Add(Totals{Requests: 1, Billed: events.Usage{InputTokens: 1, OutputTokens: 2}}),
			Totals{Requests: 5, Billed: events.Usage{InputTokens: Ceiling, OutputTokens: 5}, Saturated: true}},
		{"a saturated sum stays when taken from", sat(billedIn(Ceiling)).Add(billedIn(-3)), sat(billedIn(Ceiling))},
		{"a saturated sum stays under Sub", sat(billedIn(Ceiling)).Sub(billedIn(3)), sat(billedIn(Ceiling))},
		{"adding a saturated sum saturates", billedIn(7).Add(sat(billedIn(Ceiling))), sat(billedIn(Ceiling))},
		{"adding nothing keeps the flag", sat(billedIn(Ceiling)).Add(Totals{}), sat(billedIn(Ceiling))},
		{"the flag carries over from the right", billedIn(1).Add(sat(Totals{})), sat(billedIn(1))},
		{"below the floor stops there", billedIn(math.MinInt64 + 5).Add(billedIn(-10)), sat(billedIn(math.MinInt64))},
		{"Sub past the floor", billedIn(math.MinInt64 + 5).Sub(billedIn(10)), sat(billedIn(math.MinInt64))},
		{"Sub past the ceiling", billedIn(Ceiling - 5).Sub(billedIn(-10)), sat(billedIn(Ceiling))},
		{"counts saturate too", Totals{Requests: Ceiling}.Add(Totals{Requests: 1, Pending: 1}), Totals{Requests: Ceiling, Pending: 1, Saturated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

// TestTotalsSumIsOrderFree folds the same request deltas into a session
// the two ways the code does: one at a time (the in-memory replay) and in
// batches whose deltas are summed first (the aggregator), with sums that
// pass the ceiling. Both must give the same session, saturated.
func TestTotalsSumIsOrderFree(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			deltas := requestDeltas(rng, 30_000)

			var oneByOne Totals
			for _, d := range deltas {
				oneByOne = oneByOne.Add(d)
			}
			var batched Totals
			for i := 0; i < len(deltas); {
				n := 1 + rng.IntN(25_000)
				var delta Totals
				for _, d := range deltas[i:min(i+n, len(deltas))] {
					delta = delta.Add(d)
				}
				batched = batched.Add(delta)
				i += n
			}
			require.Equal(t, oneByOne, batched)
			require.True(t, batched.Saturated)
			require.Equal(t, int64(Ceiling), batched.Billed.InputTokens)
			require.Equal(t, int64(len(deltas)/2), batched.Requests, "counts stay exact")
		})
	}
}

// requestDeltas returns what n/2 requests add to their session as their
// events arrive: each first pending with a billed failure, then succeeded
// with a retry, at up to the contract's 10^12 tokens per attempt (a
// thousand attempts' worth for some). Token deltas are never negative;
// the status counts move.
func requestDeltas(rng *rand.Rand, n int) []Totals {
	out := make([]Totals, 0, n)
	for range n / 2 {
		first := events.Usage{InputTokens: 1e12 * (500 + rng.Int64N(501)), OutputTokens: rng.Int64N(1e12)}
		second := events.Usage{InputTokens: 1e12, OutputTokens: rng.Int64N(1e12)}
		out = append(out,
			Totals{Requests: 1, Pending: 1, Attempts: 1, Billed: first},
			Totals{Pending: -1, Succeeded: 1, Attempts: 1, Usage: second, Billed: second})
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestSessionCodecSaturated(t *testing.T) {
	s := &Session{SessionView: SessionView{SessionID: "s", Totals: Totals{Requests: 2, Billed: events.Usage{InputTokens: Ceiling}, Saturated: true}}, Seq: 9}
	data, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"saturated":true`)
	var back Session
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, *s, back)

	s.Saturated = false
	data, err = json.Marshal(s)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "saturated", "an exact record keeps its layout")
}

// TestAggregatorSaturatedSessionKeepsGoing: a session whose sums pass the
// ceiling is stored saturated, and the aggregator goes on applying events
// to it and to every other session. (Passing the ceiling with events alone
// takes nine million of them, so the session is seeded near it.)
func TestAggregatorSaturatedSessionKeepsGoing(t *testing.T) {
	for _, batch := range []int{1, 0} {
		t.Run("batch "+strconv.Itoa(batch), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			kv, err := topology.EnsureBucket(ctx, e.js, topology.Config{}, names.SessionsBucket, "")
			require.NoError(t, err)
			seed := &Session{SessionView: SessionView{SessionID: "big", Totals: Totals{
				Requests: 1, Succeeded: 1, Attempts: 1,
				Usage:  events.Usage{InputTokens: Ceiling - 1e12 + 1, OutputTokens: 10},
				Billed: events.Usage{InputTokens: Ceiling - 1e12 + 1, OutputTokens: 10},
			}}}
			_, err = kv.Put(ctx, "big", seed.appendJSON(nil))
			require.NoError(t, err)

			e.publish(
				evSpec{n: 1, session: "big", request: "r1", success: true, in: 1e12, out: 5}.wire(t),
				evSpec{n: 2, session: "small", request: "r2", success: true, in: 7, out: 1}.wire(t),
				evSpec{n: 3, session: "big", request: "r3", attempt: 0, in: 3, out: 1}.wire(t),
				evSpec{n: 4, session: "big", request: "r3", attempt: 1, success: true, in: 4, out: 2}.wire(t),
			)
			run := e.start(Config{BatchSize: batch})
			e.waitCheckpoint(e.lastSeq())

			_, sess := e.ledger()
			cost := func(n int, in, out int64) pricing.Money {
				c, ok := modelPrice(pricing.Default(), evSpec{n: n, in: in, out: out}.event())
				require.True(t, ok, "event %d is priced", n)
				return c
			}
			// Event 3 is on a model without a price (testModel): 3 + 1
			// tokens unpriced.
			assert.Equal(t, Totals{
				Requests: 3, Succeeded: 3, Attempts: 4,
				Usage:     events.Usage{InputTokens: Ceiling, OutputTokens: 17},
				Billed:    events.Usage{InputTokens: Ceiling, OutputTokens: 18},
				UsageCost: cost(1, 1e12, 5) + cost(4, 4, 2), BilledCost: cost(1, 1e12, 5) + cost(4, 4, 2),
				UnpricedBilledTokens: 4,
				Saturated:            true,
			}, sess["big"].Totals)
			assert.Equal(t, Totals{Requests: 1, Succeeded: 1, Attempts: 1,
				Usage: events.Usage{InputTokens: 7, OutputTokens: 1}, Billed: events.Usage{InputTokens: 7, OutputTokens: 1},
				UsageCost: cost(2, 7, 1), BilledCost: cost(2, 7, 1)},
				sess["small"].Totals)
			entry, err := kv.Get(ctx, "big")
			require.NoError(t, err)
			assert.Contains(t, string(entry.Value()), `"saturated":true`)

			e.publish(evSpec{n: 5, session: "small", request: "r5", success: true, in: 1, out: 1}.wire(t))
			e.waitCheckpoint(e.lastSeq())
			select {
			case err := <-run.done:
				t.Fatalf("the aggregator stopped: %v", err)
			default:
			}
		})
	}
}

var benchTotals Totals

// BenchmarkTotalsAddSub is what the aggregator does for each request a
// batch changes, and the in-memory replay for each event: session +=
// contribution(after) - contribution(before).
//
//	go test -run '^$' -bench TotalsAddSub ./internal/projection/
func BenchmarkTotalsAddSub(b *testing.B) {
	s := Totals{Requests: 100, Succeeded: 90, Failed: 5, Pending: 5, Attempts: 150,
		Usage: events.Usage{InputTokens: 1e9, OutputTokens: 1e8}, Billed: events.Usage{InputTokens: 2e9, OutputTokens: 2e8}}
	after := Totals{Requests: 1, Succeeded: 1, Attempts: 2,
		Usage: events.Usage{InputTokens: 1200, OutputTokens: 300}, Billed: events.Usage{InputTokens: 2400, OutputTokens: 400}}
	before := Totals{Requests: 1, Pending: 1, Attempts: 1, Billed: events.Usage{InputTokens: 1200, OutputTokens: 100}}
	for b.Loop() {
		s = s.Add(after.Sub(before))
	}
	benchTotals = s
}
