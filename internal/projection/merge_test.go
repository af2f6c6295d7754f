package projection

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// Property: a request record is a function of its first event (which
// fixes its labels and cell) and the set of its events: any order after
// the first, any number of duplicates, gives the same record.
func TestApplyIsOrderAndDuplicateIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for round := 0; round < 500; round++ {
		var evs []*events.Attempt
		n := 1 + rng.IntN(8)
		for i := 0; i < n; i++ {
			spec := evSpec{n: rng.IntN(50), session: "S", request: "R", attempt: rng.IntN(4),
				success: rng.IntN(3) == 0, final: rng.IntN(2) == 0, in: int64(rng.IntN(100)), out: int64(rng.IntN(100)),
				labels: workloadLabels[rng.IntN(len(workloadLabels))]}
			evs = append(evs, spec.event())
		}
		want := NewRequest("R", "S")
		for _, ev := range evs {
			want.Apply(ev)
		}
		for perm := 0; perm < 5; perm++ {
			shuffled := append([]*events.Attempt(nil), evs...)
			for _, i := range rng.Perm(len(evs))[:rng.IntN(len(evs)+1)] {
				shuffled = append(shuffled, evs[i]) // duplicates
			}
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			// The first event fixes the labels and the cell (stream
			// order); everything else is a join: any order, any
			// duplicates, label conflicts included.
			got := NewRequest("R", "S")
			for _, ev := range append([]*events.Attempt{evs[0]}, shuffled...) {
				got.Apply(ev)
			}
			require.Equal(t, want, got, "round %d", round)
		}
	}
}

func TestDerivedFields(t *testing.T) {
	tests := []struct {
		name     string
		specs    []evSpec
		status   string
		winning  int
		attempts int
		usage    events.Usage
		billed   events.Usage
	}{
		{"pending while retrying", []evSpec{{n: 1, attempt: 0, in: 10}}, StatusPending, -1, 1, events.Usage{}, events.Usage{InputTokens: 10}},
		{"failed on a final error", []evSpec{{n: 1, attempt: 0, in: 10}, {n: 2, attempt: 1, final: true, in: 10}}, StatusFailed, -1, 2, events.Usage{}, events.Usage{InputTokens: 20}},
		{"a success wins over a final error", []evSpec{{n: 1, attempt: 0, final: true, in: 5}, {n: 2, attempt: 1, success: true, in: 7, out: 3}}, StatusSucceeded, 1, 2, events.Usage{InputTokens: 7, OutputTokens: 3}, events.Usage{InputTokens: 12, OutputTokens: 3}},
		{"highest success wins", []evSpec{{n: 1, attempt: 0, success: true, in: 1, out: 1}, {n: 2, attempt: 2, success: true, in: 2, out: 2}}, StatusSucceeded, 2, 2, events.Usage{InputTokens: 2, OutputTokens: 2}, events.Usage{InputTokens: 3, OutputTokens: 3}},
		{"smaller event id wins an attempt number", []evSpec{{n: 5, attempt: 0, success: true, in: 50}, {n: 4, attempt: 0, in: 40}}, StatusPending, -1, 1, events.Usage{}, events.Usage{InputTokens: 40}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRequest("R", "S")
			for _, s := range tc.specs {
				s.session, s.request = "S", "R"
				r.Apply(s.event())
			}
			require.Equal(t, tc.status, r.Status)
			require.Equal(t, tc.winning, r.WinningAttempt)
			require.Equal(t, tc.attempts, r.Attempts)
			require.Equal(t, tc.usage, r.Usage)
			require.Equal(t, tc.billed, r.Billed)
		})
	}
}
