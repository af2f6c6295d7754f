package fakeprovider

import (
	"maps"
	"slices"
	"sync"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// Truth is the ground truth of what the server charged, as JSON it is the
// simulator's --truth file. Billed sums every attempt the server served
// (failed ones that billed included); Usage sums, per logical call, the
// tokens of its successful attempt. Overhead is Billed - Usage: what the
// retries cost.
type Truth struct {
	Seed uint64 `json:"seed"`
	Mix  Mix    `json:"mix"`
	// Total is the tally over every session.
	Total Tally `json:"total"`
	// Sessions holds the tally of each session, by session ID.
	Sessions map[string]Tally `json:"sessions"`
	// Requests holds each logical call, by request ID.
	Requests map[string]RequestTruth `json:"requests"`
	// Unidentified counts requests without valid ledger headers; they are
	// answered 400 and are in no tally.
	Unidentified int64 `json:"unidentified"`
	// Abandoned counts requests whose client had gone before the server
	// got to them; they are not answered, not billed and in no tally.
	Abandoned int64 `json:"abandoned"`
}

// Tally is the ground truth of a set of logical calls.
type Tally struct {
	// Requests is the number of distinct logical calls (request IDs) seen.
	Requests int64 `json:"requests"`
	// RequestsSucceeded is the number of them that got a successful attempt.
	RequestsSucceeded int64 `json:"requests_succeeded"`
	// Attempts is the number of attempts served: Succeeded + Failed.
	Attempts  int64 `json:"attempts"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// Outcomes counts attempts by what they got.
	Outcomes map[Fault]int64 `json:"outcomes"`
	// Billed is what every attempt was charged.
	Billed events.Usage `json:"billed"`
	// Usage is the successful attempt's tokens of each call.
	Usage events.Usage `json:"usage"`
	// Unobservable is the part of Billed that no client could learn from
	// the answers (see AttemptTruth.Unobservable).
	Unobservable events.Usage `json:"unobservable,omitzero"`
}

// Overhead is what the retries cost: Billed - Usage.
func (t Tally) Overhead() events.Usage { return t.Billed.Sub(t.Usage) }

// RequestTruth is the ground truth of one logical call.
type RequestTruth struct {
	SessionID string         `json:"session_id"`
	Provider  string         `json:"provider"`
	Model     string         `json:"model"`
	Succeeded bool           `json:"succeeded"`
	Billed    events.Usage   `json:"billed"`
	Usage     events.Usage   `json:"usage"`
	Attempts  []AttemptTruth `json:"attempts"`
	// Unobservable sums the attempts' Unobservable.
	Unobservable events.Usage `json:"unobservable,omitzero"`
}

// AttemptTruth is what the server did with one attempt.
type AttemptTruth struct {
	Attempt int `json:"attempt"`
	// Model is the model the attempt's request named: a client's fallback
	// to another model under the same request ID makes its attempts
	// differ from RequestTruth.Model (the first attempt's).
	Model   string       `json:"model,omitempty"`
	Outcome Fault        `json:"outcome"`
	Billed  events.Usage `json:"billed"`
	// Unobservable is the part of Billed that the answer did not report
	// and no client could count: the input of an OpenAI stream that ended
	// before its usage chunk, the output an Anthropic stream generated
	// after its last usage report. What a client can know is Billed minus
	// Unobservable.
	Unobservable events.Usage `json:"unobservable,omitzero"`
}

// callID is what the ledger headers of a request say.
type callID = fakekit.Call

// ledger accumulates the truth. It is safe for concurrent use.
type ledger struct {
	mu           sync.Mutex
	requests     map[string]*RequestTruth
	unidentified int64
	abandoned    int64
}

func newLedger() *ledger { return &ledger{requests: make(map[string]*RequestTruth)} }

// record books one attempt. It is called before the bytes that carry the
// charge are written, so that the truth is complete by the time the client
// can observe anything.
func (l *ledger) record(c callID, provider, model string, outcome Fault, billed events.Usage) {
	l.recordPartly(c, provider, model, outcome, billed, events.Usage{})
}

// recordPartly is record for an attempt whose answer reported only part
// of what it billed: unobservable is the rest.
func (l *ledger) recordPartly(c callID, provider, model string, outcome Fault, billed, unobservable events.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rt := l.requests[c.RequestID]
	if rt == nil {
		rt = &RequestTruth{SessionID: c.SessionID, Provider: provider, Model: model}
		l.requests[c.RequestID] = rt
	}
	rt.Attempts = append(rt.Attempts, AttemptTruth{Attempt: c.Attempt, Model: model, Outcome: outcome, Billed: billed, Unobservable: unobservable})
	rt.Billed = rt.Billed.Add(billed)
	rt.Unobservable = rt.Unobservable.Add(unobservable)
	if outcome == FaultNone && !rt.Succeeded {
		// A call's tokens are the same on every attempt, so a second success
		// (a client that lost the first answer) adds no usage.
		rt.Succeeded = true
		rt.Usage = billed
	}
}

func (l *ledger) recordUnidentified() {
	l.mu.Lock()
	l.unidentified++
	l.mu.Unlock()
}

func (l *ledger) recordAbandoned() {
	l.mu.Lock()
	l.abandoned++
	l.mu.Unlock()
}

// snapshot returns a deep copy of the truth so far.
func (l *ledger) snapshot(plan Plan) *Truth {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &Truth{
		Seed:         plan.Seed,
		Mix:          plan.Mix,
		Total:        newTally(),
		Sessions:     make(map[string]Tally),
		Requests:     make(map[string]RequestTruth, len(l.requests)),
		Unidentified: l.unidentified,
		Abandoned:    l.abandoned,
	}
	// Sorted so that the float-free sums are built in a stable order and
	// the per-session maps are filled deterministically.
	for _, id := range slices.Sorted(maps.Keys(l.requests)) {
		rt := *l.requests[id]
		rt.Attempts = slices.Clone(rt.Attempts)
		t.Requests[id] = rt
		s, ok := t.Sessions[rt.SessionID]
		if !ok {
			s = newTally()
		}
		s.add(&rt)
		t.Sessions[rt.SessionID] = s
		t.Total.add(&rt)
	}
	return t
}

func newTally() Tally { return Tally{Outcomes: make(map[Fault]int64)} }

func (t *Tally) add(rt *RequestTruth) {
	t.Requests++
	if rt.Succeeded {
		t.RequestsSucceeded++
	}
	for _, a := range rt.Attempts {
		t.Attempts++
		if a.Outcome == FaultNone {
			t.Succeeded++
		} else {
			t.Failed++
		}
		t.Outcomes[a.Outcome]++
	}
	t.Billed = t.Billed.Add(rt.Billed)
	t.Usage = t.Usage.Add(rt.Usage)
	t.Unobservable = t.Unobservable.Add(rt.Unobservable)
}
