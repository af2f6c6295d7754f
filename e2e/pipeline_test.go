package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/emit"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/report"
	"github.com/agentledger/ledger/internal/sim"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/topology"
)

// The simulated fleet against the aggregator: every session's report
// equals the fake provider's ground truth of what it charged, and the
// ledger shows retry overhead (billed > usage) from billed failed attempts.
func TestFleetLedgerEqualsGroundTruth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, js := natstest.StartJS(t)

	agg, err := projection.New(projection.Config{JS: js, BatchSize: 64, LeaseTTL: time.Second})
	require.NoError(t, err)
	aggCtx, stopAgg := context.WithCancel(ctx)
	aggDone := make(chan error, 1)
	go func() { aggDone <- agg.Run(aggCtx) }()
	defer func() {
		stopAgg()
		require.NoError(t, <-aggDone)
	}()

	pub, err := emit.New(js, emit.WithEnsureStream(topology.Config{}))
	require.NoError(t, err)
	mix := fakeprovider.Mix{RateLimit: 0.1, Overload: 0.05, ServerError: 0.08, BilledTimeout: 0.1, BadRequest: 0.03}
	// A generous attempt timeout: on a starved CI machine a 250 ms one can
	// expire after the provider answered, which bills what no event shows.
	policy := sim.Policy()
	policy.AttemptTimeout = time.Second
	fleet, err := sim.New(sim.Config{Agents: 6, Sessions: 12, CallsPerSession: 15, Seed: 7, Mix: mix, Sink: pub, Policy: policy})
	require.NoError(t, err)
	res, err := fleet.Run(ctx)
	require.NoError(t, err)
	stats, err := pub.Close(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.Undelivered)

	_, last, err := projection.WaitCaughtUp(ctx, js, 10*time.Millisecond)
	require.NoError(t, err)
	require.EqualValues(t, res.Counts.Attempts, last, "every attempt is one event in the stream")
	require.Zero(t, res.Counts.SinkErrors)

	l, err := report.Load(ctx, js, "")
	require.NoError(t, err)
	require.Len(t, l.Sessions, len(res.Truth.Sessions))
	for _, s := range l.Sessions {
		want, ok := res.Truth.Sessions[s.SessionID]
		require.True(t, ok, "session %s is not in the ground truth", s.SessionID)
		require.Equal(t, want.Requests, s.Requests, "session %s requests", s.SessionID)
		require.Equal(t, want.RequestsSucceeded, s.Succeeded, "session %s succeeded", s.SessionID)
		require.Equal(t, want.Attempts, s.Attempts, "session %s attempts", s.SessionID)
		require.Equal(t, want.Usage, s.Usage, "session %s usage", s.SessionID)
		require.Equal(t, want.Billed, s.Billed, "session %s billed", s.SessionID)
	}
	require.Equal(t, res.Truth.Total.Usage, l.Total.Usage)
	require.Equal(t, res.Truth.Total.Billed, l.Total.Billed)
	require.Greater(t, l.Total.Billed.InputTokens, l.Total.Usage.InputTokens, "billed failed attempts must show as overhead")
	require.Positive(t, l.Total.Failed, "permanent 400s fail their requests")
	require.Zero(t, l.Total.Pending)
}
