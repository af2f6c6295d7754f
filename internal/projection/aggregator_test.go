package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/names"
)

// The design note's case: the provider billed the failed attempt's input
// (500 in), then the retry succeeded (500 in, 1200 out). Usage counts the
// logical call once; billed counts both attempts.
func TestBilledFailedAttemptThenSuccess(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	e.publish(
		evSpec{n: 1, session: "S1", request: "req-xyz", attempt: 0, in: 500}.wire(t),
		evSpec{n: 2, session: "S1", request: "req-xyz", attempt: 1, success: true, in: 500, out: 1200}.wire(t),
	)
	e.waitCheckpoint(2)
	reqs, sess := e.ledger()
	s := sess["S1"]
	require.Equal(t, events.Usage{InputTokens: 500, OutputTokens: 1200}, s.Usage)
	require.Equal(t, events.Usage{InputTokens: 1000, OutputTokens: 1200}, s.Billed)
	require.EqualValues(t, 1, s.Requests)
	require.EqualValues(t, 2, s.Attempts)
	require.EqualValues(t, 1, s.Succeeded)
	r := reqs["req-xyz"]
	require.Equal(t, StatusSucceeded, r.Status)
	require.Equal(t, 1, r.WinningAttempt)
	require.Equal(t, 2, r.Attempts)
}

// An event without request_id is rejected as invalid_field, recorded once,
// and never counted; the aggregator keeps going.
func TestEventWithoutRequestIDIsRejected(t *testing.T) {
	e := newEnv(t)
	e.start(Config{})
	bad := []byte(`{"schema":"ledger.attempt.v1","event_id":"` + ulidAt(1) + `","session_id":"S1","attempt":0,"outcome":"success","final":true,"provider":"openai","model":"gpt","usage":{"input_tokens":100,"output_tokens":200},"started_at":"2026-11-30T12:00:00Z","finished_at":"2026-11-30T12:00:01Z"}`)
	e.publish(wire{subject: "ledger.attempts.S1.missing", data: bad},
		evSpec{n: 2, session: "S1", request: "ok", attempt: 0, success: true, in: 7, out: 3}.wire(t))
	e.waitCheckpoint(2)
	rej := e.rejections()
	require.Equal(t, map[uint64][]string{1: {string(events.ReasonInvalidField)}}, rej)
	_, sess := e.ledger()
	require.Equal(t, events.Usage{InputTokens: 7, OutputTokens: 3}, sess["S1"].Usage)
	require.EqualValues(t, 1, sess["S1"].Requests)
}

// Each reject reason yields exactly one LEDGER_REJECTED record with the
// original body and headers, and valid events around them still count.
func TestEachRejectReasonRecordedOnce(t *testing.T) {
	e := newEnv(t)
	good := evSpec{n: 1, session: "S1", request: "R1", attempt: 0, success: true, in: 10, out: 5}
	v2 := []byte(`{"schema":"ledger.attempt.v9","event_id":"x"}`)
	badField := evSpec{n: 3, session: "S1", request: "R2", attempt: 0, success: true, in: 10}.event()
	badField.Usage.InputTokens = -1
	badFieldData, err := events.Marshal(badField)
	require.NoError(t, err)
	conflict := evSpec{n: 4, session: "S2", request: "R1", attempt: 1, success: true, in: 10}
	ws := []wire{
		good.wire(t),
		{subject: "ledger.attempts.S1.R9", data: []byte(`{"schema": "ledger.attempt.v1", `)},
		{subject: "ledger.attempts.S1.R9", data: v2},
		{subject: "ledger.attempts.S1.R2", data: badFieldData},
		{subject: "ledger.attempts.S9.R1", data: good.wire(t).data}, // subject names another session
		conflict.wire(t),
		evSpec{n: 5, session: "S1", request: "R3", attempt: 0, success: true, in: 1, out: 1}.wire(t),
	}
	e.publish(ws...)
	e.start(Config{})
	e.waitCheckpoint(uint64(len(ws)))
	require.Equal(t, map[uint64][]string{
		2: {string(events.ReasonMalformedJSON)},
		3: {string(events.ReasonUnknownSchema)},
		4: {string(events.ReasonInvalidField)},
		5: {string(events.ReasonSubjectMismatch)},
		6: {string(events.ReasonSessionConflict)},
	}, e.rejections())
	e.requireLedger(buildModel(ws))

	// The body is unchanged and the headers say what happened.
	s, err := e.js.Stream(context.Background(), names.RejectedStream)
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(context.Background(), events.RejectedSubject(events.ReasonInvalidField, 4))
	require.NoError(t, err)
	require.Equal(t, badFieldData, m.Data)
	require.Equal(t, "ledger.attempts.S1.R2", m.Header.Get(events.HeaderOriginalSubject))
	require.Contains(t, m.Header.Get(events.HeaderRejectDetail), "usage.input_tokens")
}

// Duplicates — the same event stored twice (no Nats-Msg-Id), and two
// events for one attempt number with different event_ids — count once;
// the smaller event_id wins whatever the order.
func TestDuplicatesCountOnce(t *testing.T) {
	e := newEnv(t)
	first := evSpec{n: 1, session: "S", request: "R", attempt: 0, in: 100}.wire(t)
	first.msgID = ""
	later := evSpec{n: 9, session: "S", request: "R", attempt: 0, in: 999}.wire(t) // same attempt, bigger event_id
	win := evSpec{n: 2, session: "S", request: "R", attempt: 1, success: true, in: 100, out: 50}.wire(t)
	ws := []wire{later, first, first, win, win}
	win.msgID = ""
	ws = append(ws, win)
	e.publish(ws...)
	e.start(Config{BatchSize: 2})
	e.waitCheckpoint(e.lastSeq())
	reqs, _ := e.ledger()
	require.Equal(t, events.Usage{InputTokens: 200, OutputTokens: 50}, reqs["R"].Billed)
	require.Equal(t, 2, reqs["R"].Attempts)
	e.requireLedger(buildModel(wireStored(ws)))
}

// wireStored drops the copies JetStream's duplicate window discards.
func wireStored(ws []wire) []wire {
	seen := map[string]bool{}
	var out []wire
	for _, w := range ws {
		if w.msgID != "" {
			if seen[w.msgID] {
				continue
			}
			seen[w.msgID] = true
		}
		out = append(out, w)
	}
	return out
}

// workloadLabels are the label sets genWorkload draws from.
var workloadLabels = []api.Labels{nil, {"team": "search"}, {"team": "ads"}, {"team": "search", "user": "u-42"}}

// genWorkload makes a random set of attempt events: sessions, requests,
// several attempts each, outcomes, duplicates (re-sent with and without a
// msg id), competing events for one attempt number, occasional session
// conflicts and invalid events, labels (sometimes conflicting with the
// request's), attempts in up to four hours and fallbacks to another model
// (testModel); then shuffles it.
func genWorkload(t testing.TB, rng *rand.Rand, nSessions, nRequests int) []wire {
	t.Helper()
	var ws []wire
	n := 0
	for r := 0; r < nRequests; r++ {
		session := fmt.Sprintf("s%d", rng.IntN(nSessions))
		request := fmt.Sprintf("r%d", r)
		attempts := 1 + rng.IntN(4)
		labels := workloadLabels[rng.IntN(len(workloadLabels))]
		hour := rng.IntN(3)
		for a := 0; a < attempts; a++ {
			n++
			last := a == attempts-1
			spec := evSpec{n: n, session: session, request: request, attempt: a,
				in: int64(rng.IntN(2000)), out: int64(rng.IntN(1000)), labels: labels, hour: hour}
			if rng.IntN(5) == 0 { // labels that conflict with the request's
				spec.labels = workloadLabels[rng.IntN(len(workloadLabels))]
			}
			if rng.IntN(4) == 0 { // a retry in the next hour
				spec.hour++
			}
			spec.cacheRead = spec.in / 4
			switch {
			case last && rng.IntN(4) > 0:
				spec.success = true
			case last:
				spec.final = rng.IntN(2) == 0 // sometimes pending: no final event yet
			}
			if !spec.success && rng.IntN(3) == 0 {
				spec.out = 0
			}
			w := spec.wire(t)
			ws = append(ws, w)
			switch rng.IntN(10) {
			case 0: // re-sent with the same msg id (the window drops it)
				ws = append(ws, w)
			case 1: // stored twice: no msg id
				w.msgID = ""
				ws = append(ws, w)
			case 2: // a competing event for the same attempt number
				n++
				c := spec
				c.n = n
				c.in += 7
				if rng.IntN(2) == 0 { // other labels: which event wins decides the conflict
					c.labels = workloadLabels[rng.IntN(len(workloadLabels))]
				}
				ws = append(ws, c.wire(t))
			case 3: // the same request under another session
				n++
				c := spec
				c.n = n
				c.session = session + "x"
				ws = append(ws, c.wire(t))
			}
		}
		if rng.IntN(25) == 0 {
			ws = append(ws, wire{subject: "ledger.attempts." + session + "." + request, data: []byte(`{"schema":"ledger.attempt.v1","attempt":"zero"}`)})
		}
	}
	rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	return ws
}

// Property: random sets of events, published in random order and projected
// in random batch sizes, give records equal to the in-memory model.
func TestPropertyProjectionEqualsModel(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			ws := genWorkload(t, rng, 1+rng.IntN(6), 20+rng.IntN(60))
			e := newEnv(t)
			e.publish(ws...)
			e.start(Config{BatchSize: 1 + rng.IntN(40), CacheSize: rng.IntN(3) * 16})
			e.waitCheckpoint(e.lastSeq())
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}

// Crash safety: the aggregator stops abruptly at every write point of a
// batch — between the two bucket writes, after the writes and before the
// checkpoint, mid-batch — then restarts on the same server; the final
// records equal the model: nothing lost, nothing counted twice.
func TestCrashAtEveryWritePoint(t *testing.T) {
	for _, point := range FaultPoints {
		t.Run(string(point), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(point))))
			ws := genWorkload(t, rng, 4, 60)
			e := newEnv(t)
			e.publish(ws...)
			last := e.lastSeq()
			crashes := 0
			for hit := 1; ; hit++ {
				// Crash at the hit-th time the point is reached, then
				// restart; stop once a run gets through without reaching it.
				seen := 0
				r := e.start(Config{InstanceID: "agg-1", BatchSize: 9, Faults: func(p FaultPoint) error {
					if p != point {
						return nil
					}
					seen++
					if seen == hit {
						return errors.New("injected crash at " + string(p))
					}
					return nil
				}})
				if e.crashedOrCaughtUp(r, last) {
					crashes++
					continue
				}
				break
			}
			require.Positive(t, crashes, "the fault point was never reached")
			e.requireLedger(buildModel(wireStored(ws)))
		})
	}
}

// The same batch crashing again and again at one point, each restart
// redoing what the last left half done: with three rollup cells per
// request (its hour, day and model-hour cells) written in that order, a
// crash in the middle of the rollups leaves them apart by one more cell
// each time, and each cell must still get exactly what it lacks (the
// request record keeps what each held apart: held_cell, held_day,
// held_model_hour).
func TestRepeatedCrashAtEveryWritePoint(t *testing.T) {
	for _, point := range FaultPoints {
		t.Run(string(point), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(8, uint64(len(point))))
			for _, batch := range []int{1, 5} {
				ws := genWorkload(t, rng, 3, 12)
				e := newEnv(t)
				e.publish(ws...)
				last := e.lastSeq()
				crashes := 0
				for ; crashes < 4; crashes++ {
					r := e.start(Config{InstanceID: "agg-1", BatchSize: batch, Faults: func(p FaultPoint) error {
						if p == point {
							return errors.New("injected crash at " + string(p))
						}
						return nil
					}})
					if !e.crashedOrCaughtUp(r, last) {
						break
					}
				}
				require.Positive(t, crashes, "the fault point was never reached")
				r := e.start(Config{InstanceID: "agg-1", BatchSize: batch})
				e.waitCheckpoint(last)
				require.NoError(t, r.stop(t))
				e.requireLedger(buildModel(wireStored(ws)))
			}
		})
	}
}

// crashedOrCaughtUp waits until the aggregator r crashes (true) or the
// checkpoint reaches last (false).
func (e *env) crashedOrCaughtUp(r *running, last uint64) bool {
	e.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-r.done:
			r.done <- err // for the cleanup
			var crash crashError
			require.ErrorAs(e.t, err, &crash)
			return true
		case <-tick.C:
			if cp, err := ReadCheckpoint(context.Background(), e.js); err == nil && cp >= last {
				return false
			}
		case <-deadline:
			e.t.Fatalf("neither a crash nor checkpoint %d within a minute", last)
		}
	}
}

// Two instances on the same stream give the same records as one, also when
// the leader stops and the standby takes over mid-stream.
func TestTwoInstances(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	ws := genWorkload(t, rng, 5, 120)
	e := newEnv(t)
	a := e.start(Config{InstanceID: "a", BatchSize: 7})
	b := e.start(Config{InstanceID: "b", BatchSize: 11})
	half := len(ws) / 2
	e.publish(ws[:half]...)
	e.waitCheckpoint(e.lastSeq())

	leader, standby := a, b
	if b.agg.Leading() {
		leader, standby = b, a
	}
	require.True(t, leader.agg.Leading())
	require.False(t, standby.agg.Leading())
	require.NoError(t, leader.stop(t))
	e.publish(ws[half:]...)
	e.waitCheckpoint(e.lastSeq())
	require.Eventually(t, standby.agg.Leading, 30*time.Second, 5*time.Millisecond)
	e.requireLedger(buildModel(wireStored(ws)))
}

// A graceful stop finishes the batch in hand and releases the lease, so a
// restarted instance resumes from the checkpoint at once.
func TestGracefulStopAndResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	ws := genWorkload(t, rng, 3, 50)
	e := newEnv(t)
	r := e.start(Config{BatchSize: 5})
	e.publish(ws[:len(ws)/2]...)
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, r.stop(t))
	e.publish(ws[len(ws)/2:]...)
	e.start(Config{BatchSize: 5}) // a new instance ID: the lease was released
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(wireStored(ws)))
}

// A deleted last rejection (someone tampered with LEDGER_REJECTED) does
// not stop the next term: the floor is the last rejection there is.
func TestDeletedLastRejection(t *testing.T) {
	e := newEnv(t)
	bad := wire{subject: "ledger.attempts.S1.R9", data: []byte(`{"schema": "ledger.attempt.v1", `)}
	e.publish(bad, bad)
	r := e.start(Config{InstanceID: "a"})
	e.waitCheckpoint(e.lastSeq())
	require.NoError(t, r.stop(t))
	s, err := e.js.Stream(context.Background(), names.RejectedStream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.DeleteMsg(context.Background(), info.State.LastSeq))

	e.publish(bad, evSpec{n: 4, session: "S1", request: "R1", attempt: 0, success: true, in: 1, out: 1}.wire(t))
	e.start(Config{InstanceID: "b"})
	e.waitCheckpoint(e.lastSeq())
	rej := e.rejections()
	require.Equal(t, map[uint64][]string{1: {"malformed_json"}, 3: {"malformed_json"}}, rej)
}

// The rollups are a sum apart from the sessions, so a request must
// remember what each held (Held, HeldCell). A crash between a batch's
// sessions and its rollups leaves the session holding the request's new
// contribution and its rollup nothing; the redo rewrites the request and
// crashes between its requests and its sessions. Were the request's one
// Held (the session's) taken for the rollup's too, the next run would
// think the rollup already held that contribution and never add it.
func TestRollupsNeedTheirOwnHeld(t *testing.T) {
	e := newEnv(t)
	team := api.Labels{"team": "search"}
	ws := []wire{
		evSpec{n: 1, session: "s", request: "r", attempt: 0, in: 100, labels: team}.wire(t),
		evSpec{n: 2, session: "s", request: "r", attempt: 1, success: true, in: 100, out: 10, labels: team}.wire(t),
	}
	crashAt := func(point FaultPoint) func(FaultPoint) error {
		return func(p FaultPoint) error {
			if p == point {
				return errors.New("injected crash at " + string(p))
			}
			return nil
		}
	}
	e.publish(ws[0])
	require.ErrorContains(t, e.start(Config{InstanceID: "agg-1", Faults: crashAt(FaultAfterSessions)}).waitStopped(t), "injected crash")
	_, sess := e.ledger()
	require.Equal(t, int64(1), sess["s"].Requests, "the session was written")
	require.Empty(t, e.rollups(), "the rollup was not")
	e.publish(ws[1])
	require.ErrorContains(t, e.start(Config{InstanceID: "agg-1", Faults: crashAt(FaultBetweenBuckets)}).waitStopped(t), "injected crash")
	e.start(Config{InstanceID: "agg-1"})
	e.waitCheckpoint(e.lastSeq())
	e.requireLedger(buildModel(ws))
}
