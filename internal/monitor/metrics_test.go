package monitor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/projection"
)

type fakeSource struct{ stats projection.Stats }

func (f *fakeSource) Applied() uint64         { return 0 }
func (f *fakeSource) Leading() bool           { return false }
func (f *fakeSource) Stats() projection.Stats { return f.stats }

// ledger_aggregator_gap_events is the number of events past the
// checkpoint the stream no longer holds: from a poll of the stream's first
// sequence, or from the gap the aggregator itself stopped at.
func TestGapEventsMetric(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		first, last, checkpoint uint64
		aggregatorGap           uint64
		want                    float64
	}{
		{"empty stream", 0, 0, 0, 0, 0},
		{"whole stream", 1, 9, 3, 0, 0},
		{"head removed, all applied", 7, 9, 6, 0, 0},
		{"head removed past the checkpoint", 6, 9, 3, 0, 2},
		{"everything removed", 10, 9, 3, 0, 6},
		{"the aggregator found a gap inside", 1, 20, 12, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMetrics(&fakeSource{stats: projection.Stats{GapEvents: tc.aggregatorGap}}, UsageOptions{})
			require.NoError(t, err)
			m.setPosition(tc.first, tc.last, tc.checkpoint)
			got, err := testutil.GatherAndCount(m.Registry, "ledger_aggregator_gap_events")
			require.NoError(t, err)
			require.Equal(t, 1, got)
			mfs, err := m.Registry.Gather()
			require.NoError(t, err)
			for _, mf := range mfs {
				if mf.GetName() == "ledger_aggregator_gap_events" {
					require.Equal(t, tc.want, mf.GetMetric()[0].GetGauge().GetValue())
				}
			}
		})
	}
}
