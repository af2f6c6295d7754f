package projection

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// withSubsets returns the event of s with the usage subsets of issue 19:
// c1h of its cache write kept 1 hour, rsn of its output spent reasoning.
func withSubsets(s evSpec, cacheWrite, c1h, rsn int64) *events.Attempt {
	a := s.event()
	a.Usage.InputTokens += cacheWrite
	a.Usage.CacheCreationInputTokens = cacheWrite
	a.Usage.CacheCreation1hInputTokens = c1h
	a.Usage.ReasoningTokens = rsn
	return a
}

// The usage subsets (reasoning, the 1-hour cache write) are part of the
// record: usage is the winner's, billed sums every attempt's, the
// overhead (billed - usage) is the failed attempt's, field by field; the
// session sums them; and they survive the stored form (the older code
// read them back as 0).
func TestUsageSubsetsProjectAndSurviveTheRecord(t *testing.T) {
	const ses, req = "agent-1", "req-1"
	r := NewRequest(req, ses)
	failed := withSubsets(evSpec{n: 1, session: ses, request: req, attempt: 0, in: 1000, out: 300, cacheRead: 200}, 500, 120, 250)
	won := withSubsets(evSpec{n: 2, session: ses, request: req, attempt: 1, success: true, in: 1000, out: 900, cacheRead: 700}, 100, 40, 600)
	for _, ev := range []*events.Attempt{failed, won} {
		require.NoError(t, ev.Validate())
		require.True(t, r.Apply(ev))
	}
	require.Equal(t, won.Usage, r.Usage)
	require.Equal(t, events.Usage{InputTokens: 2600, OutputTokens: 1200, CacheReadInputTokens: 900,
		CacheCreationInputTokens: 600, CacheCreation1hInputTokens: 160, ReasoningTokens: 850}, r.Billed)
	require.Equal(t, failed.Usage, r.Billed.Sub(r.Usage), "the overhead is the failed attempt's, subsets included")

	data := r.appendJSON(nil)
	var back Request
	require.NoError(t, json.Unmarshal(data, &back), string(data))
	require.Equal(t, normalise(r), normalise(&back), string(data))
	var view struct {
		Usage  map[string]int64 `json:"usage"`
		Billed map[string]int64 `json:"billed"`
	}
	require.NoError(t, json.Unmarshal(data, &view))
	require.Equal(t, int64(850), view.Billed["reasoning_tokens"], "contract readers see the subsets")
	require.Equal(t, int64(160), view.Billed["cache_creation_1h_input_tokens"])

	// A second request in the same session: the session sums both.
	r2 := NewRequest("req-2", ses)
	require.True(t, r2.Apply(withSubsets(evSpec{n: 3, session: ses, request: "req-2", attempt: 0, success: true, in: 10, out: 9}, 4, 4, 9)))
	sum := r.Contribution().Add(r2.Contribution())
	require.Equal(t, int64(600+9), sum.Usage.ReasoningTokens)
	require.Equal(t, int64(40+4), sum.Usage.CacheCreation1hInputTokens)
	require.Equal(t, int64(850+9), sum.Billed.ReasoningTokens)
	require.Equal(t, int64(160+4), sum.Billed.CacheCreation1hInputTokens)
	require.Equal(t, sum, sum.Sub(r2.Contribution()).Add(r2.Contribution()))
}

// A log entry whose usage has no subsets is written as before they
// existed (11 members here, 9 for the record's own model), so records of old events do not change; an
// entry with subsets ends in their object.
func TestLogEntryLayoutWithSubsets(t *testing.T) {
	r := NewRequest("r", "s")
	r.Apply(evSpec{n: 1, session: "s", request: "r", attempt: 0, in: 5, out: 5}.event())
	r.Apply(withSubsets(evSpec{n: 2, session: "s", request: "r", attempt: 1, in: 5, out: 5}, 3, 0, 2))
	other := withSubsets(evSpec{n: 3, session: "s", request: "r", attempt: 2, success: true, in: 5, out: 5}, 3, 1, 0)
	other.Model = "claude-other"
	r.Apply(other)
	data := r.appendJSON(nil)
	var raw struct {
		Log [][]json.RawMessage `json:"log"`
	}
	require.NoError(t, json.Unmarshal(data, &raw), string(data))
	// The record's model is the winner's (attempt 2): the others carry
	// indexes into names. Each entry has its cost after finished_at.
	require.Len(t, raw.Log[0], 12, string(data))
	require.Len(t, raw.Log[1], 13, string(data))
	require.JSONEq(t, `{"rsn":2}`, string(raw.Log[1][12]))
	require.Len(t, raw.Log[2], 11, string(data))
	require.JSONEq(t, `{"c1h":1}`, string(raw.Log[2][10]))
	var back Request
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, normalise(r), normalise(&back))

	for _, bad := range []string{`[0,"` + ulidAt(1) + `",0,1,1,0,0,"2026-01-01T00:00:00Z","2026-01-01T00:00:00Z","x"]`,
		`[0,"` + ulidAt(1) + `",0,1,1,0,0,"2026-01-01T00:00:00Z","2026-01-01T00:00:00Z",{"rsn":"x"}]`} {
		var e Entry
		require.Error(t, r.decodeEntry(json.RawMessage(bad), nil, &e), bad)
	}
}

// Property: whatever the order and duplication of a request's events after
// its first (which fixes its cell), the record is the same, and billed is the field-by-field sum of the accepted
// attempts, subsets included.
func TestUsageSubsetsOrderFree(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 19))
			var evs []*events.Attempt
			var billed events.Usage
			n := 1 + rng.IntN(6)
			for i := range n {
				out := rng.Int64N(1000)
				cw := rng.Int64N(500)
				ev := withSubsets(evSpec{n: i + 1, session: "s", request: "r", attempt: i, success: i == n-1,
					in: rng.Int64N(1000), out: out}, cw, rng.Int64N(cw+1), rng.Int64N(out+1))
				require.NoError(t, ev.Validate())
				evs = append(evs, ev)
				billed = billed.Add(ev.Usage)
			}
			want := NewRequest("r", "s")
			for _, ev := range evs {
				want.Apply(ev)
			}
			require.Equal(t, billed, want.Billed)
			require.Equal(t, evs[n-1].Usage, want.Usage)
			for range 5 {
				shuffled := append(append([]*events.Attempt(nil), evs...), evs[rng.IntN(n)])
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				got := NewRequest("r", "s")
				for _, ev := range append([]*events.Attempt{evs[0]}, shuffled...) { // the first fixes the cell
					got.Apply(ev)
				}
				require.Equal(t, normalise(want), normalise(got))
			}
		})
	}
}

// Through the aggregator and its buckets: the subsets of a failed attempt
// and of its retry are in the stored request (billed) and session, and an
// old event without them projects beside them unchanged.
func TestUsageSubsetsThroughTheAggregator(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	failed := withSubsets(evSpec{n: 1, session: "S1", request: "req-a", attempt: 0, in: 500, out: 100}, 200, 150, 60)
	won := withSubsets(evSpec{n: 2, session: "S1", request: "req-a", attempt: 1, success: true, in: 500, out: 1200}, 100, 0, 900)
	old := evSpec{n: 3, session: "S1", request: "req-b", attempt: 0, success: true, in: 10, out: 5}
	var ws []wire
	for _, a := range []*events.Attempt{failed, won} {
		data, err := events.Marshal(a)
		require.NoError(t, err)
		ws = append(ws, wire{subject: events.Subject(a.SessionID, a.RequestID), data: data, msgID: a.EventID})
	}
	e.publish(append(ws, old.wire(t))...)
	e.waitCheckpoint(3)
	reqs, sess := e.ledger()
	r := reqs["req-a"]
	require.Equal(t, won.Usage, r.Usage)
	require.Equal(t, failed.Usage.Add(won.Usage), r.Billed)
	require.Equal(t, events.Usage{InputTokens: 10, OutputTokens: 5}, reqs["req-b"].Billed, "an event without the subsets")
	s := sess["S1"]
	require.Equal(t, won.Usage.Add(reqs["req-b"].Usage), s.Usage)
	require.Equal(t, int64(60+900), s.Billed.ReasoningTokens)
	require.Equal(t, int64(150), s.Billed.CacheCreation1hInputTokens)
	require.Equal(t, failed.Usage, s.Billed.Sub(s.Usage), "the retry overhead, field by field")
}
