package replay

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// startJS starts a server with the attempt stream.
func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, _, js := natstest.StartJS(t)
	_, err := topology.EnsureAttempts(context.Background(), js, topology.Config{})
	require.NoError(t, err)
	return js
}

// project runs an aggregator (with apply, nil for the current code) until
// it has applied the whole stream, then stops it.
func project(t *testing.T, js jetstream.JetStream, apply func(*projection.Request, *events.Attempt) bool) {
	t.Helper()
	stop := ledgertest.RunAggregator(t, js, projection.Config{Apply: apply, BatchSize: 13})
	ledgertest.WaitCaughtUp(t, js)
	stop()
}

func verify(t *testing.T, js jetstream.JetStream, o Options) *Drift {
	t.Helper()
	d, err := Verify(context.Background(), js, o)
	require.NoError(t, err)
	return d
}

// A ledger projected by the classic bug (usage sums every attempt) is
// reported session by session and request by request, with the exact
// deltas: the retry overhead the bug counted as usage.
func TestVerifyReportsTheBug(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(1, 2)), ledgertest.Spec{Sessions: 8, Calls: 120})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, ledgertest.SumEveryAttempt)

	d := verify(t, js, Options{})
	require.False(t, d.Identical())
	require.Equal(t, len(w.Sessions), d.SessionsChecked)
	require.Equal(t, len(w.Requests), d.RequestsChecked)

	wantSess := map[string]int64{} // session -> usage input delta
	var wantUsage events.Usage
	for id, s := range w.Sessions {
		over := s.Billed.Sub(s.Usage)
		wantUsage = wantUsage.Add(over)
		if !over.IsZero() {
			wantSess[id] = over.InputTokens
		}
	}
	wantReqs := 0
	for _, r := range w.Requests {
		if r.Billed != r.Usage {
			wantReqs++
		}
	}
	require.Equal(t, len(wantSess), d.SessionsDiffer)
	require.Equal(t, wantReqs, d.RequestsDiffer)
	require.Equal(t, wantUsage, d.UsageDelta)
	require.Equal(t, wantUsage.InputTokens+wantUsage.OutputTokens, d.UsageTokenDelta)
	require.Zero(t, d.BilledTokenDelta, "the bug does not touch what was billed")

	gotSess := map[string]int64{}
	for _, df := range d.Diffs {
		require.Contains(t, []string{"usage.input_tokens", "usage.output_tokens"}, df.Field, "%+v", df)
		if df.Kind == KindSession && df.Field == "usage.input_tokens" {
			gotSess[df.ID] = *df.Delta
		}
	}
	require.Equal(t, wantSess, gotSess)

	// Recomputed under the same wrong code, the ledger agrees with itself.
	require.True(t, verify(t, js, Options{Apply: ledgertest.SumEveryAttempt}).Identical())
}

// Verify compares both sides at one stream sequence per record, so it
// finds no drift while the live aggregator keeps applying events and
// publishers keep publishing (rejected events too), whether it holds
// everything in memory or almost nothing.
func TestVerifyWhileLive(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(3, 4)), ledgertest.Spec{Sessions: 10, Calls: 300})
	ledgertest.RunAggregator(t, js, projection.Config{BatchSize: 7})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < len(w.Messages); i += 10 {
			ledgertest.Publish(t, js, w.Messages[i:min(i+10, len(w.Messages))])
			if _, err := js.Publish(context.Background(), "ledger.attempts.sess-0.bad", []byte("{")); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
		}
	}()
	tiny := limits{batch: 5, open: 3, sessions: 2, late: 10, drift: 1, window: 4}
	runs := 0
	for busy := true; busy; runs++ {
		select {
		case <-done:
			busy = false
		default:
		}
		o := Options{}
		if runs%2 == 1 {
			o.bounds = tiny
		}
		d := verify(t, js, o)
		require.True(t, d.Identical(), "run %d: %+v", runs, d.Diffs)
	}
	ledgertest.WaitCaughtUp(t, js)
	for _, o := range []Options{{}, {bounds: tiny}} {
		d := verify(t, js, o)
		require.True(t, d.Identical(), "%+v", d.Diffs)
		require.Equal(t, len(w.Requests), d.RequestsChecked)
		require.Equal(t, len(w.Sessions), d.SessionsChecked)
		require.Equal(t, (len(w.Messages)+9)/10, d.RejectionsChecked)
	}
	t.Logf("%d verifications while publishing", runs)
}

// Records changed behind the aggregator's back are found field by field.
func TestVerifyFindsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, reqs, sess jetstream.KeyValue, w *ledgertest.Workload)
		want   []Diff
	}{
		{
			name: "request deleted",
			tamper: func(t *testing.T, reqs, _ jetstream.KeyValue, _ *ledgertest.Workload) {
				require.NoError(t, reqs.Delete(context.Background(), "req-3"))
			},
			want: []Diff{{Kind: KindRequest, ID: "req-3", Field: FieldRecord, Live: "absent", Recomputed: "present"}},
		},
		{
			name: "session billed changed",
			tamper: func(t *testing.T, _, sess jetstream.KeyValue, _ *ledgertest.Workload) {
				editSession(t, sess, "sess-1", func(s *projection.Session) { s.Billed.OutputTokens += 5 })
			},
			want: []Diff{{Kind: KindSession, ID: "sess-1", Field: "billed.output_tokens", Delta: ptr(5)}},
		},
		{
			name: "session the stream does not have",
			tamper: func(t *testing.T, _, sess jetstream.KeyValue, _ *ledgertest.Workload) {
				data, err := json.Marshal(projection.Session{SessionView: projection.SessionView{SessionID: "ghost",
					Totals: projection.Totals{Requests: 1, Pending: 1, Attempts: 1}}})
				require.NoError(t, err)
				_, err = sess.Put(context.Background(), "ghost", data)
				require.NoError(t, err)
			},
			want: []Diff{
				{Kind: KindSession, ID: "ghost", Field: FieldRecord, Live: "present", Recomputed: "absent"},
				{Kind: KindSession, ID: "ghost", Field: "requests", Delta: ptr(1)},
				{Kind: KindSession, ID: "ghost", Field: "pending", Delta: ptr(1)},
				{Kind: KindSession, ID: "ghost", Field: "attempts", Delta: ptr(1)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := startJS(t)
			w := ledgertest.Generate(rand.New(rand.NewPCG(5, 6)), ledgertest.Spec{Sessions: 3, Calls: 20})
			ledgertest.Publish(t, js, w.Messages)
			project(t, js, nil)
			ctx := context.Background()
			reqs, err := js.KeyValue(ctx, names.RequestsBucket)
			require.NoError(t, err)
			sess, err := js.KeyValue(ctx, names.SessionsBucket)
			require.NoError(t, err)
			tc.tamper(t, reqs, sess, w)

			d := verify(t, js, Options{})
			require.Len(t, d.Diffs, len(tc.want), "%+v", d.Diffs)
			for i, want := range tc.want {
				got := d.Diffs[i]
				require.Equal(t, want.Kind, got.Kind)
				require.Equal(t, want.ID, got.ID)
				require.Equal(t, want.Field, got.Field)
				if want.Live != "" {
					require.Equal(t, want.Live, got.Live)
					require.Equal(t, want.Recomputed, got.Recomputed)
				}
				require.Equal(t, want.Delta, got.Delta)
			}
		})
	}
}

func editSession(t *testing.T, kv jetstream.KeyValue, id string, edit func(*projection.Session)) {
	t.Helper()
	ctx := context.Background()
	e, err := kv.Get(ctx, id)
	require.NoError(t, err)
	var s projection.Session
	require.NoError(t, json.Unmarshal(e.Value(), &s))
	edit(&s)
	data, err := json.Marshal(s)
	require.NoError(t, err)
	_, err = kv.Update(ctx, id, data, e.Revision())
	require.NoError(t, err)
}

func ptr(n int64) *int64 { return &n }

// Verify refuses to compare what it cannot: a ledger in the middle of a
// rebuild's switch, or a stream that lost its first events.
func TestVerifyRefuses(t *testing.T) {
	ctx := context.Background()
	t.Run("switch in progress", func(t *testing.T) {
		js := startJS(t)
		w := ledgertest.Generate(rand.New(rand.NewPCG(7, 8)), ledgertest.Spec{Sessions: 2, Calls: 5})
		ledgertest.Publish(t, js, w.Messages)
		project(t, js, nil)
		state, err := js.KeyValue(ctx, names.StateBucket)
		require.NoError(t, err)
		// A rebuild's switch recorded in the live checkpoint.
		e, err := state.Get(ctx, "checkpoint")
		require.NoError(t, err)
		var cp map[string]any
		require.NoError(t, json.Unmarshal(e.Value(), &cp))
		cp["switch"] = map[string]any{"checkpoint": 1}
		data, err := json.Marshal(cp)
		require.NoError(t, err)
		_, err = state.Update(ctx, "checkpoint", data, e.Revision())
		require.NoError(t, err)
		_, err = Verify(ctx, js, Options{})
		require.ErrorIs(t, err, ErrSwitching)
	})
	t.Run("stream start aged out", func(t *testing.T) {
		// Retention removes the first events once the ledger has applied
		// them (a cap on the messages: deterministic, unlike a MaxAge that
		// could remove them before the aggregator reads them on a busy
		// machine, which is a gap the aggregator stops at).
		js := startJS(t)
		w := ledgertest.Generate(rand.New(rand.NewPCG(9, 10)), ledgertest.Spec{Sessions: 2, Calls: 20})
		ledgertest.Publish(t, js, w.Messages)
		project(t, js, nil)
		s, err := js.Stream(ctx, names.AttemptsStream)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		cfg := info.Config
		cfg.MaxMsgs = int64(info.State.Msgs) - 3
		_, err = js.UpdateStream(ctx, cfg)
		require.NoError(t, err)
		info, err = s.Info(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 4, info.State.FirstSeq)
		_, err = Verify(ctx, js, Options{})
		require.ErrorIs(t, err, ErrIncomplete)
	})
}

// Verify compares every cell of ledger_rollups with the sum of its
// recomputed requests: a cell whose totals drifted and a cell that is
// gone are each reported, as kind rollup under its key, with the delta.
func TestVerifyReportsRollupDrift(t *testing.T) {
	ctx := context.Background()
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(9, 2)), ledgertest.Spec{Sessions: 4, Calls: 60})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, nil)
	d := verify(t, js, Options{})
	require.True(t, d.Identical(), "%+v", d.Diffs)
	// Every grain holds every request once; verify checks every cell.
	grains := map[projection.Grain][]projection.Rollup{}
	checked := 0
	for _, g := range projection.Grains {
		cells, err := projection.ReadRollups(ctx, js, projection.LiveNames(), projection.RollupFilter{Grain: g})
		require.NoError(t, err)
		require.NotEmpty(t, cells)
		var requests int64
		for _, c := range cells {
			requests += c.Requests
		}
		require.Equal(t, int64(len(w.Requests)), requests, "every request is in one cell of grain %s", g)
		grains[g] = cells
		checked += len(cells)
	}
	require.Equal(t, checked, d.RollupsChecked)

	// An hour cell changed, a day cell deleted.
	kv, err := js.KeyValue(ctx, names.RollupsBucket)
	require.NoError(t, err)
	changed := grains[projection.GrainHour][0]
	changed.Attempts += 3
	data, err := json.Marshal(&changed)
	require.NoError(t, err)
	_, err = kv.Put(ctx, changed.Key(), data)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, grains[projection.GrainDay][0].Key()))

	d = verify(t, js, Options{})
	require.False(t, d.Identical())
	require.Zero(t, d.SessionsDiffer)
	require.Zero(t, d.RequestsDiffer)
	require.Equal(t, 2, d.RollupsDiffer)
	var found bool
	for _, df := range d.Diffs {
		require.Equal(t, KindRollup, df.Kind, "%+v", df)
		if df.ID == changed.Key() {
			require.Equal(t, "attempts", df.Field)
			require.Equal(t, int64(3), *df.Delta)
			found = true
		}
	}
	require.True(t, found, "%+v", d.Diffs)
}
