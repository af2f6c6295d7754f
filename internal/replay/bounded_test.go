package replay

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/ledgertest"
	"github.com/agentledger/ledger/internal/names"
	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/projection"
	"github.com/agentledger/ledger/internal/topology"
)

// publishRaw publishes a body on a subject of LEDGER_ATTEMPTS and returns
// its stream sequence.
func publishRaw(t *testing.T, js jetstream.JetStream, subject string, body []byte) uint64 {
	t.Helper()
	ack, err := js.Publish(context.Background(), subject, body)
	require.NoError(t, err)
	return ack.Sequence
}

// marshal encodes an event.
func marshal(t *testing.T, ev *events.Attempt) []byte {
	t.Helper()
	data, err := events.Marshal(ev)
	require.NoError(t, err)
	return data
}

// invalidMix publishes events the aggregator rejects, one of each reason,
// between the events of w, and returns the sequence of each.
func invalidMix(t *testing.T, js jetstream.JetStream, w *ledgertest.Workload) map[events.Reason]uint64 {
	t.Helper()
	half := len(w.Messages) / 2
	ledgertest.Publish(t, js, w.Messages[:half])
	ev := *w.Messages[0].Event // a request already recorded under its session
	other := ev
	other.SessionID = "sess-other"
	other.EventID = "01KB0000000000000000000000"
	bad := ev
	bad.Usage.InputTokens = -5
	seqs := map[events.Reason]uint64{
		events.ReasonMalformedJSON:   publishRaw(t, js, "ledger.attempts.sess-x.req-x", []byte("{not json")),
		events.ReasonUnknownSchema:   publishRaw(t, js, "ledger.attempts.sess-x.req-y", []byte(`{"schema":"ledger.attempt.v9"}`)),
		events.ReasonSubjectMismatch: publishRaw(t, js, "ledger.attempts.sess-x.req-z", marshal(t, &ev)),
		events.ReasonSessionConflict: publishRaw(t, js, events.Subject(other.SessionID, other.RequestID), marshal(t, &other)),
	}
	data := strings.Replace(string(marshal(t, &bad)), `"input_tokens":0`, `"input_tokens":-5`, 1)
	seqs[events.ReasonInvalidField] = publishRaw(t, js, events.Subject(bad.SessionID, bad.RequestID), []byte(data))
	ledgertest.Publish(t, js, w.Messages[half:])
	return seqs
}

// LEDGER_REJECTED is compared record by record: identical for a ledger
// the aggregator projected, and every record missing, added or changed is
// a difference of kind rejection.
func TestVerifyComparesRejections(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(11, 12)), ledgertest.Spec{Sessions: 4, Calls: 60})
	seqs := invalidMix(t, js, w)
	project(t, js, nil)
	d := verify(t, js, Options{})
	require.True(t, d.Identical(), "%+v", d.Diffs)
	require.Equal(t, len(seqs), d.RejectionsChecked)
	require.Equal(t, len(w.Requests), d.RequestsChecked)

	ctx := context.Background()
	rejected, err := js.Stream(ctx, names.RejectedStream)
	require.NoError(t, err)
	record := func(reason events.Reason) *jetstream.RawStreamMsg {
		m, err := rejected.GetLastMsgForSubject(ctx, events.RejectedSubject(reason, seqs[reason]))
		require.NoError(t, err)
		return m
	}
	republish := func(m *jetstream.RawStreamMsg, body []byte) {
		out := nats.NewMsg(m.Subject)
		out.Data = body
		for k, v := range m.Header {
			// Not the message ID (JetStream would drop it as a duplicate)
			// nor the writer's expectations of the stream.
			if k != nats.MsgIdHdr && !strings.HasPrefix(k, "Nats-Expected") {
				out.Header[k] = v
			}
		}
		_, err := js.PublishMsg(ctx, out)
		require.NoError(t, err)
	}
	// Drop the malformed event's record; record the invalid one (the
	// last) again with another body; record the conflict twice; record an
	// accepted event as rejected.
	require.NoError(t, rejected.DeleteMsg(ctx, record(events.ReasonMalformedJSON).Sequence))
	invalid := record(events.ReasonInvalidField)
	require.NoError(t, rejected.DeleteMsg(ctx, invalid.Sequence))
	republish(invalid, []byte("{}"))
	republish(record(events.ReasonSessionConflict), record(events.ReasonSessionConflict).Data)
	last := publishRaw(t, js, events.Subject(w.Messages[0].Event.SessionID, "req-late"), marshal(t, event(500, w.Messages[0].Event.SessionID, "req-late", 0, true, 1, 1)))
	project(t, js, nil)
	fake := nats.NewMsg(events.RejectedSubject(events.ReasonInvalidField, last))
	fake.Data = []byte("x")
	_, err = js.PublishMsg(ctx, fake)
	require.NoError(t, err)

	d = verify(t, js, Options{})
	require.False(t, d.Identical())
	require.Equal(t, 4, d.RejectionsDiffer, "%+v", d.Diffs)
	id := func(r events.Reason) string { return strconv.FormatUint(seqs[r], 10) }
	require.Equal(t, []Diff{
		{Kind: KindRejection, ID: id(events.ReasonMalformedJSON), Field: FieldRecord, Live: "absent", Recomputed: "present", Seq: last},
		{Kind: KindRejection, ID: id(events.ReasonSessionConflict), Field: FieldRecord, Live: "recorded again, out of order", Recomputed: "absent", Seq: last},
		{Kind: KindRejection, ID: id(events.ReasonInvalidField), Field: "body", Live: describeBody([]byte("{}")), Recomputed: describeBody(invalid.Data), Seq: last},
		{Kind: KindRejection, ID: strconv.FormatUint(last, 10), Field: FieldRecord, Live: "present", Recomputed: "absent", Seq: last},
	}, d.Diffs)
}

// A request whose events are far apart in the stream, and a session
// conflict on a request finished long before, come out the same when
// verify keeps almost nothing in memory: requests in progress, sessions
// and the drift set go to scratch buckets, which verify deletes.
func TestVerifyBeyondItsMemoryBounds(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(13, 14)), ledgertest.Spec{Sessions: 9, Calls: 150})
	seqs := invalidMix(t, js, w)
	require.Len(t, seqs, 5)
	project(t, js, nil)
	tiny := limits{batch: 16, open: 4, sessions: 2, late: 10, drift: 1, window: 3}
	d := verify(t, js, Options{bounds: tiny})
	require.True(t, d.Identical(), "%+v", d.Diffs)
	require.Equal(t, len(w.Requests), d.RequestsChecked)
	require.Equal(t, len(w.Sessions), d.SessionsChecked)
	requireNoScratch(t, js)

	// The same with drift: the bug everywhere, and a request missing.
	js = startJS(t)
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, ledgertest.SumEveryAttempt)
	reqs, err := js.KeyValue(context.Background(), names.RequestsBucket)
	require.NoError(t, err)
	require.NoError(t, reqs.Delete(context.Background(), "req-3"))
	want := verify(t, js, Options{})
	got := verify(t, js, Options{bounds: tiny})
	require.Equal(t, want, got)
	require.Positive(t, got.RequestsDiffer)
	requireNoScratch(t, js)
}

func requireNoScratch(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	lister := js.KeyValueStoreNames(context.Background())
	for name := range lister.Name() {
		require.False(t, strings.HasPrefix(name, names.VerifyScratchPrefix), "scratch bucket %s left behind", name)
	}
	require.NoError(t, lister.Error())
}

// A live request record for a request the stream does not have is found,
// whether it claims to be older or newer than the checkpoint.
func TestVerifyFindsLiveOnlyRequests(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(15, 16)), ledgertest.Spec{Sessions: 3, Calls: 30})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, nil)
	cp, err := projection.ReadCheckpoint(context.Background(), js)
	require.NoError(t, err)
	reqs, err := js.KeyValue(context.Background(), names.RequestsBucket)
	require.NoError(t, err)
	for id, seq := range map[string]uint64{"ghost-old": cp, "ghost-new": cp + 1000} {
		r := projection.NewRequest(id, "sess-0")
		r.Apply(w.Messages[0].Event)
		r.RequestID, r.Seq = id, seq
		data, err := r.MarshalJSON()
		require.NoError(t, err)
		_, err = reqs.Put(context.Background(), id, data)
		require.NoError(t, err)
	}
	d := verify(t, js, Options{})
	require.Equal(t, 2, d.RequestsDiffer, "%+v", d.Diffs)
	require.Equal(t, []Diff{
		{Kind: KindRequest, ID: "ghost-new", Field: FieldRecord, Live: "present", Recomputed: "absent", Seq: cp + 1000},
		{Kind: KindRequest, ID: "ghost-old", Field: FieldRecord, Live: "present", Recomputed: "absent", Seq: cp},
	}, d.Diffs)
}

// Diffs keeps the first MaxDiffs differences in report order; the counts
// cover all of them.
func TestVerifyKeepsTheFirstDiffs(t *testing.T) {
	js := startJS(t)
	w := ledgertest.Generate(rand.New(rand.NewPCG(17, 18)), ledgertest.Spec{Sessions: 5, Calls: 80})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, ledgertest.SumEveryAttempt)
	all := verify(t, js, Options{})
	require.Equal(t, all.DiffCount, len(all.Diffs))
	for _, n := range []int{1, 7, all.DiffCount + 5} {
		d := verify(t, js, Options{MaxDiffs: n})
		require.Equal(t, all.DiffCount, d.DiffCount)
		require.Equal(t, all.Diffs[:min(n, len(all.Diffs))], d.Diffs, "MaxDiffs %d", n)
		require.Equal(t, all.UsageDelta, d.UsageDelta)
	}
}

// Two verifies at once keep their scratch buckets apart, and a scratch
// bucket whose verify stopped beating is removed by the next one.
func TestVerifyScratchBuckets(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	a, b := newScratch(js), newScratch(js)
	ba, err := a.bucket(ctx, "sessions")
	require.NoError(t, err)
	bb, err := b.bucket(ctx, "sessions")
	require.NoError(t, err)
	require.NotEqual(t, ba.kv.Bucket(), bb.kv.Bucket())
	require.NoError(t, ba.putMany(ctx, []kvPut{{key: "k", value: []byte("a")}}))
	got, err := bb.getMany(ctx, []string{"k"})
	require.NoError(t, err)
	require.Empty(t, got)

	// Later, with both heartbeats stale (their verifies died), the next
	// verify to need scratch space removes their buckets.
	c := newScratch(js)
	c.now = func() time.Time { return time.Now().Add(heartbeatStale + time.Minute) }
	_, err = c.bucket(ctx, "sessions")
	require.NoError(t, err)
	for _, name := range []string{ba.kv.Bucket(), bb.kv.Bucket()} {
		_, err = js.KeyValue(ctx, name)
		require.ErrorIs(t, err, jetstream.ErrBucketNotFound)
	}
	for _, s := range []*scratch{a, b, c} {
		require.NoError(t, s.close(ctx))
	}
	requireNoScratch(t, js)
}

// A session conflict on a request that verify finished and forgot long
// before is still a conflict: the live record vouches for the request's
// session, and when it cannot (deleted, or naming another session), the
// drift set remembers. A new request whose live record names another
// session is new all the same.
func TestVerifyConflictsAfterTheRequestFinished(t *testing.T) {
	tests := []struct {
		name   string
		tamper map[string]string // request -> session its live record is rewritten to; "" deletes it
		want   []Diff
	}{
		{name: "live records vouch"},
		{name: "records deleted", tamper: map[string]string{"x": "", "y": ""}, want: []Diff{
			{Kind: KindRequest, ID: "x", Field: FieldRecord, Live: "absent", Recomputed: "present"},
			{Kind: KindRequest, ID: "y", Field: FieldRecord, Live: "absent", Recomputed: "present"},
		}},
		{name: "records under the conflicting session", tamper: map[string]string{"x": "b", "y": "b"}, want: []Diff{
			{Kind: KindRequest, ID: "x", Field: "session_id", Live: "b", Recomputed: "a"},
			{Kind: KindRequest, ID: "y", Field: "session_id", Live: "b", Recomputed: "a"},
		}},
		{name: "new request under another session", tamper: map[string]string{"z": "c"}, want: []Diff{
			{Kind: KindRequest, ID: "z", Field: "session_id", Live: "c", Recomputed: "a"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := startJS(t)
			var msgs []ledgertest.Message
			add := func(n int, s, r string) {
				msgs = append(msgs, ledgertest.Message{Event: event(n, s, r, 0, true, int64(n), 1)})
			}
			add(1, "a", "x")
			add(2, "a", "y")
			for i := range 40 {
				add(10+i, "f", fmt.Sprintf("filler-%d", i))
			}
			add(60, "b", "x") // conflicts, long after x finished
			add(61, "b", "y")
			add(62, "a", "z")
			add(63, "b", "z")
			ledgertest.Publish(t, js, msgs)
			project(t, js, nil)
			for id, session := range tc.tamper {
				rewriteRequest(t, js, id, session)
			}
			for _, b := range []limits{defaultLimits, {batch: 8, open: 2, sessions: 2, late: 4, drift: 1, window: 2}} {
				d := verify(t, js, Options{bounds: b})
				require.Equal(t, 3, d.RejectionsChecked)
				require.Zero(t, d.RejectionsDiffer, "%+v", d.Diffs)
				require.Len(t, d.Diffs, len(tc.want), "%+v", d.Diffs)
				for i, want := range tc.want {
					got := d.Diffs[i]
					got.Seq = 0
					require.Equal(t, want, got)
				}
			}
			requireNoScratch(t, js)
		})
	}
}

// rewriteRequest rewrites a live request record under another session, or
// deletes it ("").
func rewriteRequest(t *testing.T, js jetstream.JetStream, id, session string) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, names.RequestsBucket)
	require.NoError(t, err)
	if session == "" {
		require.NoError(t, kv.Delete(ctx, id))
		return
	}
	e, err := kv.Get(ctx, id)
	require.NoError(t, err)
	var r projection.Request
	require.NoError(t, r.UnmarshalJSON(e.Value()))
	r.SessionID = session
	data, err := r.MarshalJSON()
	require.NoError(t, err)
	_, err = kv.Put(ctx, id, data)
	require.NoError(t, err)
}

// A request in progress survives a trip through the scratch bucket,
// events past the checkpoint included.
func TestOpenRequestRoundTrip(t *testing.T) {
	r := &openReq{rec: projection.NewRequest("x", "a"), last: 42, live: []byte(`{"x":1}`), inLive: true}
	r.rec.Apply(event(1, "a", "x", 0, false, 5, 0))
	r.base = cloneRequest(r.rec)
	second := event(2, "a", "x", 1, true, 7, 3)
	r.post = []postEvent{{seq: 40, ev: second}}
	r.rec.Apply(second)
	data, err := encodeOpen(r)
	require.NoError(t, err)
	got, err := decodeOpen(data)
	require.NoError(t, err)
	require.Equal(t, r.rec.View(), got.rec.View())
	require.Equal(t, r.base.View(), got.base.View())
	require.Equal(t, r.last, got.last)
	require.Equal(t, r.live, got.live)
	require.True(t, got.inLive)
	require.Len(t, got.post, 1)
	require.Equal(t, uint64(40), got.post[0].seq)
	require.Equal(t, second.EventID, got.post[0].ev.EventID)
	_, err = decodeOpen([]byte(`{}`))
	require.Error(t, err)
}

// The contract prefix verify compares is exactly the beginning of the
// stored form the aggregator writes, with and without an estimated input
// (a member only when not 0) and with the money members.
func TestAppendContractIsTheStoredPrefix(t *testing.T) {
	for _, est := range []int64{0, 812} {
		r := projection.NewRequest("req-\u00e9\"x", "sess-1")
		cut := event(3, "sess-1", "req-\u00e9\"x", 0, false, 40, 2)
		cut.EstimatedInputTokens = est
		if est != 0 { // labels, a label conflict and the cell too
			cut.Labels = api.Labels{"team": "s<e>arch", "user": "u-1"}
		}
		r.Apply(cut)
		r.Apply(event(4, "sess-1", "req-\u00e9\"x", 1, true, 41, 7))
		stored, err := r.MarshalJSON()
		require.NoError(t, err)
		prefix := appendContract(nil, &r.RequestView)
		require.True(t, strings.HasPrefix(string(stored), string(prefix)), "%s\n%s", stored, prefix)
		require.True(t, strings.HasSuffix(string(prefix), `,"log":`))
		require.Equal(t, est != 0, strings.Contains(string(prefix), `"estimated_input_tokens":812`), string(prefix))
		require.Contains(t, string(prefix), `"unpriced_billed_tokens":`)
		require.Contains(t, string(prefix), `"cell":{"hour":`)
		require.Equal(t, est != 0, strings.Contains(string(prefix), `"labels":{"team":"s\u003ce\u003earch","user":"u-1"},"label_conflicts":1,`), string(prefix))
	}
}

// A body over the contract's size in a stream created without MaxMsgSize
// (by an older build) is rejected as too_large with its body cut to
// 64 KiB and its original size in a header; verify cuts the recomputed
// body the same way and finds the ledger identical.
func TestVerifyTooLargeRejection(t *testing.T) {
	ctx := context.Background()
	_, _, js := natstest.StartJS(t)
	cfg, err := topology.AttemptsStreamConfig(topology.Config{})
	require.NoError(t, err)
	cfg.MaxMsgSize = -1 // as an older build created it
	_, err = js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	big := append([]byte(`{"schema":"ledger.attempt.v1","pad":"`), bytes.Repeat([]byte("x"), 100<<10)...)
	big = append(big, `"}`...)
	publishRaw(t, js, "ledger.attempts.S1.R1", big)
	w := ledgertest.Generate(rand.New(rand.NewPCG(71, 1)), ledgertest.Spec{Sessions: 2, Calls: 5})
	ledgertest.Publish(t, js, w.Messages)
	project(t, js, nil)
	d, err := Verify(ctx, js, Options{})
	require.NoError(t, err)
	require.True(t, d.Identical(), "differences: %+v", d.Diffs)
	require.Equal(t, 1, d.RejectionsChecked)
}
