package projection

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
)

// The mark a catalog change is judged against: the latest started_at
// priced, rounded up to the second, never lowered; a ledger that has
// applied events but whose checkpoint has no mark stands for every time
// (nothing is judged forward-only against it), and stays so.
func TestStartedMark(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		through time.Time
		seq     uint64
		observe []time.Time
		want    time.Time
	}{
		{"an empty ledger", time.Time{}, 0, nil, pricedNone},
		{"an empty ledger, then attempts", time.Time{}, 0, []time.Time{at, at.Add(-time.Hour)}, at},
		{"rounded up to the second", time.Time{}, 0, []time.Time{at.Add(time.Millisecond)}, at.Add(time.Second)},
		{"from the checkpoint, never lowered", at, 9, []time.Time{at.Add(-time.Hour)}, at},
		{"raised", at, 9, []time.Time{at.Add(time.Hour)}, at.Add(time.Hour)},
		{"a checkpoint without a mark", time.Time{}, 9, []time.Time{at}, pricedUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m startedMark
			m.set(tc.through, tc.seq)
			apply := m.tracking(func(*Request, *events.Attempt) bool { return true })
			for _, o := range tc.observe {
				require.True(t, apply(nil, &events.Attempt{StartedAt: o}))
			}
			require.Equal(t, tc.want, m.through())
		})
	}
}

// BenchmarkStartedMark is what tracking adds to each event's apply: the
// mark raised by attempts a millisecond apart (the mark moves once a
// second of started_at).
func BenchmarkStartedMark(b *testing.B) {
	var m startedMark
	m.set(time.Time{}, 0)
	apply := m.tracking(func(*Request, *events.Attempt) bool { return true })
	ev := &events.Attempt{StartedAt: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	b.ReportAllocs()
	for b.Loop() {
		ev.StartedAt = ev.StartedAt.Add(time.Millisecond)
		apply(nil, ev)
	}
}
