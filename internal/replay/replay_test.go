package replay

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/report"
	"github.com/agentledger/ledger/internal/topology"
)

func event(n int, session, request string, attempt int, success bool, in, out int64) *events.Attempt {
	var id ulid.ULID
	_ = id.SetTime(uint64(1_700_000_000_000 + n))
	a := &events.Attempt{Schema: events.SchemaV1, EventID: id.String(), RequestID: request, SessionID: session,
		Attempt: attempt, Outcome: events.OutcomeSuccess, Final: true, Provider: "openai", Model: "m",
		Usage:     events.Usage{InputTokens: in, OutputTokens: out},
		StartedAt: time.Unix(1_700_000_000, 0).UTC(), FinishedAt: time.Unix(1_700_000_001, 0).UTC()}
	if !success {
		a.Outcome, a.Final = events.OutcomeError, false
		a.Error = &events.AttemptError{Kind: events.KindTimeout, Retryable: true}
	}
	return a
}

// report --at and --at-seq give the totals of exactly the events up to the
// point, and the full replay equals the live ledger.
func TestLedgerAtPoint(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	stream, err := topology.EnsureAttempts(ctx, js, topology.Config{})
	require.NoError(t, err)
	pub := func(a *events.Attempt) uint64 {
		data, err := events.Marshal(a)
		require.NoError(t, err)
		ack, err := js.Publish(ctx, events.Subject(a.SessionID, a.RequestID), data)
		require.NoError(t, err)
		return ack.Sequence
	}
	pub(event(1, "S1", "R1", 0, false, 500, 0))
	cut := pub(event(2, "S1", "R1", 1, true, 500, 1200))
	m, err := stream.GetMsg(ctx, cut)
	require.NoError(t, err)
	cutTime := m.Time
	require.Eventually(t, func() bool { return time.Now().After(cutTime) }, time.Second, time.Millisecond)
	pub(event(3, "S1", "R2", 0, true, 100, 10))
	pub(event(4, "S2", "R3", 0, true, 7, 3))
	pub(event(5, "S2", "R1", 2, true, 9, 9)) // session conflict: never counted

	want := projection.Totals{Requests: 1, Succeeded: 1, Attempts: 2,
		Usage: events.Usage{InputTokens: 500, OutputTokens: 1200}, Billed: events.Usage{InputTokens: 1000, OutputTokens: 1200},
		// Model "m" has no price: its tokens are unpriced, never $0.
		UnpricedUsageTokens: 1700, UnpricedBilledTokens: 2200}
	for _, p := range []Point{{Seq: cut}, {At: cutTime}} {
		l, err := Ledger(ctx, js, p, Options{})
		require.NoError(t, err)
		require.Equal(t, cut, l.Seq)
		require.Len(t, l.Sessions, 1)
		require.Equal(t, want, l.Sessions[0].Totals, "at %+v", p)
	}
	none, err := Ledger(ctx, js, Point{At: cutTime.Add(-time.Hour)}, Options{})
	require.NoError(t, err)
	require.Empty(t, none.Sessions)
	_, err = Ledger(ctx, js, Point{}, Options{})
	require.ErrorIs(t, err, ErrInvalidPoint)

	// The whole stream, replayed, equals what the live aggregator projects.
	agg, err := projection.New(projection.Config{JS: js})
	require.NoError(t, err)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agg.Run(actx) }()
	_, last, err := projection.WaitCaughtUp(ctx, js, 5*time.Millisecond)
	require.NoError(t, err)
	live, err := report.Load(ctx, js, "")
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	full, err := Ledger(ctx, js, Point{Seq: last}, Options{})
	require.NoError(t, err)
	require.Equal(t, live.Sessions, full.Sessions)
	require.Equal(t, live.Total, full.Total)
}
