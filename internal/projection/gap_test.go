package projection

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/topology"
)

// newCappedEnv is an env whose LEDGER_ATTEMPTS keeps only its last
// maxMsgs events: retention that removes events deterministically (as a
// MaxAge does after a while).
func newCappedEnv(t *testing.T, maxMsgs int64) *env {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t)
	require.NoError(t, e.js.DeleteStream(ctx, names.AttemptsStream))
	cfg, err := topology.AttemptsStreamConfig(topology.Config{})
	require.NoError(t, err)
	cfg.MaxMsgs = maxMsgs
	_, err = e.js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	return e
}

// sessionEvents are n successful requests of session S, 1000 input tokens
// each, numbered from first.
func sessionEvents(t *testing.T, first, n int) []wire {
	t.Helper()
	var ws []wire
	for i := first; i < first+n; i++ {
		ws = append(ws, evSpec{n: i, session: "S", request: fmt.Sprintf("R%d", i), success: true, in: 1000, out: 10}.wire(t))
	}
	return ws
}

// stoppedOrCaughtUp waits until r stops by itself (its error) or the
// checkpoint reaches last (nil, false).
func (e *env) stoppedOrCaughtUp(r *running, last uint64) (error, bool) {
	e.t.Helper()
	var err error
	stopped := false
	require.Eventually(e.t, func() bool {
		select {
		case err = <-r.done:
			r.done <- err // for the cleanup
			stopped = true
			return true
		default:
		}
		cp, cerr := ReadCheckpoint(context.Background(), e.js)
		return cerr == nil && cp >= last
	}, time.Minute, 5*time.Millisecond)
	return err, stopped
}

// Issue 15, case 5: an aggregator down while retention removed events
// past its checkpoint used to resume from the stream's first sequence and
// skip them in silence (checkpoint 3, then 6..9 applied, 4 and 5 never).
// It stops with a GapError naming the range and the ways to recover, and
// writes nothing; `rebuild --accept-loss` then rebuilds from what is left
// and records the loss.
func TestAgedOutGapStopsAggregator(t *testing.T) {
	ctx := context.Background()
	e := newCappedEnv(t, 4)
	e.publish(sessionEvents(t, 1, 3)...)
	r := e.start(Config{InstanceID: "live-1"})
	e.waitCheckpoint(3)
	require.NoError(t, r.stop(t))

	// Down while six more arrive: the stream keeps 6..9, so 4 and 5 are
	// gone before they were applied.
	e.publish(sessionEvents(t, 4, 6)...)
	require.EqualValues(t, 9, e.lastSeq())

	r = e.start(Config{InstanceID: "live-2"})
	err, stopped := e.stoppedOrCaughtUp(r, 9)
	require.True(t, stopped, "the aggregator skipped events 4 and 5 in silence")
	var gap *GapError
	require.ErrorAs(t, err, &gap)
	require.ErrorIs(t, err, ErrGap)
	require.Equal(t, GapError{From: 4, To: 5, Checkpoint: 3}, *gap)
	for _, want := range []string{"events 4 to 5", "restore LEDGER_ATTEMPTS", "aggregator rebuild --accept-loss", `key "loss"`} {
		require.Contains(t, err.Error(), want)
	}
	require.EqualValues(t, 2, r.agg.Stats().GapEvents)
	cp, err := ReadCheckpoint(ctx, e.js)
	require.NoError(t, err)
	require.EqualValues(t, 3, cp, "nothing past the gap is applied")
	_, sess := e.ledger()
	require.EqualValues(t, 3, sess["S"].Requests)

	// A plain rebuild refuses; --accept-loss rebuilds from 6..9 and
	// records 1..5 as lost.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = Rebuild(rctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second})
	require.ErrorIs(t, err, ErrStreamIncomplete)
	require.Contains(t, err.Error(), "--accept-loss")
	require.NoError(t, Rebuild(rctx, RebuildConfig{JS: e.js, LeaseTTL: time.Second, AcceptLoss: true, Now: func() time.Time { return t0 }}))
	loss, err := ReadLoss(ctx, e.js)
	require.NoError(t, err)
	require.Len(t, loss, 1)
	require.Equal(t, LossRange{From: 1, To: 5, RecordedAt: t0}, LossRange{From: loss[0].From, To: loss[0].To, RecordedAt: loss[0].RecordedAt})
	require.Contains(t, loss[0].By, "rebuild-")
	require.True(t, LossCovers(loss, 5))

	e.start(Config{InstanceID: "live-3"})
	e.publish(sessionEvents(t, 10, 1)...)
	e.waitCheckpoint(10)
	e.requireLedger(buildModel(sessionEvents(t, 6, 5)))
}

// A gap in the middle of what the consumer delivers (events removed
// while the aggregator was reading) stops the batch, unless the gap is
// accepted (a rebuild with --accept-loss), which goes on past it.
func TestSplitRefusesGap(t *testing.T) {
	js := newEnv(t).js
	ev := func(seq uint64) fetched { return fetched{seq: seq, ev: &events.Attempt{RequestID: "R"}} }
	for _, tc := range []struct {
		name     string
		prepared uint64
		msgs     []fetched
		gap      *GapError
		q        uint64
	}{
		{"consecutive", 3, []fetched{ev(2), ev(3), ev(4), ev(5)}, nil, 5},
		{"redelivered only", 3, []fetched{ev(1), ev(3)}, nil, 0},
		{"gap at the start", 3, []fetched{ev(6), ev(7)}, &GapError{From: 4, To: 5, Checkpoint: 3}, 0},
		{"gap inside", 3, []fetched{ev(4), ev(5), ev(9)}, &GapError{From: 6, To: 8, Checkpoint: 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, accept := range []bool{false, true} {
				var accepted [][2]uint64
				cfg := Config{JS: js}
				if accept {
					cfg.AcceptGap = func(from, to uint64) error { accepted = append(accepted, [2]uint64{from, to}); return nil }
				}
				a, err := New(cfg)
				require.NoError(t, err)
				b := &batcher{agg: a, prepared: tc.prepared}
				_, _, q, err := b.split(tc.msgs)
				switch {
				case tc.gap == nil:
					require.NoError(t, err)
					require.Equal(t, tc.q, q)
					require.Empty(t, accepted)
				case accept:
					require.NoError(t, err)
					require.Equal(t, [][2]uint64{{tc.gap.From, tc.gap.To}}, accepted)
					require.Equal(t, tc.msgs[len(tc.msgs)-1].seq, q)
				default:
					var gap *GapError
					require.ErrorAs(t, err, &gap)
					require.Equal(t, *tc.gap, *gap)
				}
			}
		})
	}
}

// The loss record merges overlapping and adjacent ranges and keeps them
// sorted; LossCovers says whether they cover 1..to.
func TestLossRecord(t *testing.T) {
	rg := func(from, to uint64) LossRange { return LossRange{From: from, To: to} }
	var l lossRecord
	require.True(t, l.add(rg(10, 12)))
	require.False(t, l.add(rg(11, 12)), "covered already")
	require.True(t, l.add(rg(1, 4)))
	require.True(t, l.add(rg(5, 6)))
	require.Equal(t, []LossRange{rg(1, 6), rg(10, 12)}, l.Ranges)
	require.True(t, LossCovers(l.Ranges, 6))
	require.False(t, LossCovers(l.Ranges, 7))
	require.True(t, l.add(rg(7, 9)))
	require.Equal(t, []LossRange{rg(1, 12)}, l.Ranges)
	require.True(t, LossCovers(l.Ranges, 12))
	require.False(t, LossCovers(nil, 1))
	require.True(t, LossCovers(nil, 0))
}

// Issue 15, case 6: a ledger_requests created with a TTL (nats kv add
// --ttl) used to be used as it was; its records expired and the next
// event of an expired request counted it again. The aggregator refuses to
// start on it, naming the command that fixes it.
func TestAggregatorRefusesBucketWithTTL(t *testing.T) {
	e := newEnv(t)
	_, err := e.js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: names.RequestsBucket, TTL: time.Hour})
	require.NoError(t, err)
	e.publish(sessionEvents(t, 1, 3)...)
	r := e.start(Config{})
	err, stopped := e.stoppedOrCaughtUp(r, 3)
	require.True(t, stopped, "the aggregator ran on a bucket whose records expire")
	require.ErrorIs(t, err, topology.ErrBucketSettings)
	require.Contains(t, err.Error(), "nats stream edit KV_ledger_requests --max-age 0")
}
