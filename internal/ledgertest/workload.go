package ledgertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/projection"
)

// T0 is the time of the first event of every workload.
var T0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Message is one publish: the event and whether it goes out without
// Nats-Msg-Id (a redelivery JetStream cannot deduplicate).
type Message struct {
	Event   *events.Attempt
	NoMsgID bool
}

// Workload is a list of messages in publish order and the ledger a correct
// projection of all of them gives.
type Workload struct {
	Messages []Message
	Requests map[string]projection.RequestView
	Sessions map[string]projection.Totals
}

// Spec shapes a generated workload.
type Spec struct {
	Sessions, Calls int
	// Prefix starts every request ID, and FirstEvent numbers the first
	// event ID, so that several workloads can share one stream.
	Prefix     string
	FirstEvent int
}

// Generate makes s.Calls logical calls spread over s.Sessions sessions
// ("sess-0" onwards). A call has 0 to 2 failed attempts (half of them billed: a timeout after the
// input was sent) and then succeeds, fails for good, or is still pending;
// about one message in ten is published a second time without dedup. The
// attempts of different calls are interleaved.
func Generate(rng *rand.Rand, s Spec) *Workload {
	w := &Workload{Requests: map[string]projection.RequestView{}, Sessions: map[string]projection.Totals{}}
	if s.Prefix == "" {
		s.Prefix = "req-"
	}
	var perCall [][]*events.Attempt
	n := s.FirstEvent
	next := func() int { n++; return n }
	for c := range s.Calls {
		sid := fmt.Sprintf("sess-%d", rng.IntN(s.Sessions))
		rid := fmt.Sprintf("%s%d", s.Prefix, c)
		in := int64(100 + rng.IntN(900))
		failures := rng.IntN(3)
		end := rng.IntN(10) // 0: fails for good, 1: pending, else succeeds
		var atts []*events.Attempt
		v := projection.RequestView{RequestID: rid, SessionID: sid, Provider: "anthropic", Model: "claude-test", WinningAttempt: -1}
		for a := range failures + 1 {
			ev := attempt(next(), sid, rid, a)
			last := a == failures
			switch {
			case last && end >= 2:
				ev.Usage = events.Usage{InputTokens: in, OutputTokens: int64(10 + rng.IntN(500))}
				v.WinningAttempt, v.Usage, v.Status = a, ev.Usage, projection.StatusSucceeded
				v.UnpricedUsageTokens = ev.Usage.InputTokens + ev.Usage.OutputTokens
			case last && end == 1:
				continue // pending: the last attempt has not ended yet
			default:
				ev.Outcome, ev.Final = events.OutcomeError, last
				ev.Error = &events.AttemptError{Kind: events.KindTimeout, Retryable: !last, Message: "timed out"}
				if rng.IntN(2) == 0 {
					ev.Usage = events.Usage{InputTokens: in} // billed although it failed
				}
				if last {
					v.Status = projection.StatusFailed
				}
			}
			v.Billed = v.Billed.Add(ev.Usage)
			// Model claude-test has no price: its tokens are unpriced.
			v.UnpricedBilledTokens += ev.Usage.InputTokens + ev.Usage.OutputTokens
			if len(atts) == 0 { // the first accepted event: it fixes the rollup cell
				v.FirstStartedAt = ev.StartedAt
				v.Cell = &projection.RecordCell{Hour: ev.StartedAt.UTC().Truncate(time.Hour), Provider: ev.Provider, Model: ev.Model}
			}
			v.LastFinishedAt = ev.FinishedAt
			atts = append(atts, ev)
		}
		if len(atts) == 0 {
			continue // a call whose only attempt is still running leaves no event
		}
		if v.Status == "" {
			v.Status = projection.StatusPending
		}
		v.Attempts = len(atts)
		w.Requests[rid] = v
		t := w.Sessions[sid]
		t.Requests++
		t.Attempts += int64(v.Attempts)
		t.Usage = t.Usage.Add(v.Usage)
		t.Billed = t.Billed.Add(v.Billed)
		t.UnpricedUsageTokens += v.UnpricedUsageTokens
		t.UnpricedBilledTokens += v.UnpricedBilledTokens
		switch v.Status {
		case projection.StatusSucceeded:
			t.Succeeded++
		case projection.StatusFailed:
			t.Failed++
		default:
			t.Pending++
		}
		w.Sessions[sid] = t
		perCall = append(perCall, atts)
	}
	// Interleave the calls, each call's attempts in order.
	for len(perCall) > 0 {
		i := rng.IntN(len(perCall))
		ev := perCall[i][0]
		w.Messages = append(w.Messages, Message{Event: ev})
		if rng.IntN(10) == 0 {
			w.Messages = append(w.Messages, Message{Event: ev, NoMsgID: true})
		}
		if perCall[i] = perCall[i][1:]; len(perCall[i]) == 0 {
			last := len(perCall) - 1
			perCall[i], perCall = perCall[last], perCall[:last]
		}
	}
	return w
}

// Merge returns the workload of w's messages followed by o's; their
// request IDs must differ.
func (w *Workload) Merge(o *Workload) *Workload {
	m := &Workload{Messages: append(append([]Message(nil), w.Messages...), o.Messages...),
		Requests: map[string]projection.RequestView{}, Sessions: map[string]projection.Totals{}}
	for _, x := range []*Workload{w, o} {
		for id, r := range x.Requests {
			m.Requests[id] = r
		}
		for id, t := range x.Sessions {
			m.Sessions[id] = m.Sessions[id].Add(t)
		}
	}
	return m
}

func attempt(n int, sid, rid string, a int) *events.Attempt {
	var id ulid.ULID
	_ = id.SetTime(uint64(T0.UnixMilli()) + uint64(n))
	start := T0.Add(time.Duration(n) * time.Second)
	return &events.Attempt{Schema: events.SchemaV1, EventID: id.String(), RequestID: rid, SessionID: sid,
		Attempt: a, Outcome: events.OutcomeSuccess, Final: true, Provider: "anthropic", Model: "claude-test",
		StartedAt: start, FinishedAt: start.Add(500 * time.Millisecond)}
}

// Publish publishes msgs to LEDGER_ATTEMPTS (which must exist), waiting
// for each acknowledgement.
func Publish(t testing.TB, js jetstream.JetStream, msgs []Message) {
	t.Helper()
	ctx := context.Background()
	for _, msg := range msgs {
		data, err := events.Marshal(msg.Event)
		if err != nil {
			t.Fatalf("ledgertest: marshal: %v", err)
		}
		m := nats.NewMsg(events.Subject(msg.Event.SessionID, msg.Event.RequestID))
		m.Data = data
		if !msg.NoMsgID {
			m.Header.Set(nats.MsgIdHdr, msg.Event.EventID)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("ledgertest: publish: %v", err)
		}
	}
}

// SumEveryAttempt is the classic bug, for tests that need a ledger
// projected by wrong code: the usage of a request sums every attempt, the
// failed ones included, so a retried call's usage counts its input once per
// attempt. A session's usage then equals its billed tokens, and the correct
// usage is lower by exactly the retry overhead.
func SumEveryAttempt(r *projection.Request, ev *events.Attempt) bool {
	changed := r.Apply(ev)
	r.Usage = r.Billed
	return changed
}
