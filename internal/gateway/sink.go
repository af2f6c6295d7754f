package gateway

import (
	"context"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// callKey is the context key of a call's callState.
type callKey struct{}

// callState is what the gateway learns of a call from its events: the
// middleware hands each event to the sink on the call's goroutine, with
// the call's context (without its cancellation), so no lock is needed.
type callState struct {
	requestID string
	last      int // the highest attempt number published; -1 before any
	events    int
	billed    events.Usage
	final     events.Outcome
	kind      events.ErrorKind
}

func newCallState() *callState { return &callState{last: -1} }

func (s *callState) note(ev *events.Attempt) {
	s.requestID = ev.RequestID
	s.last = max(s.last, ev.Attempt)
	s.events++
	s.billed = s.billed.Add(ev.Usage)
	s.final = ev.Outcome
	s.kind = ""
	if ev.Error != nil {
		s.kind = ev.Error.Kind
	}
}

// trackingSink hands every event on to the gateway's sink and tells the
// call's state about it, so that the gateway knows which attempt numbers
// the call used (the middleware numbers attempts that never ran too: one
// the breaker rejected takes a number).
type trackingSink struct {
	next retry.Sink
}

func (s trackingSink) Publish(ctx context.Context, ev *events.Attempt) error {
	if st, ok := ctx.Value(callKey{}).(*callState); ok {
		st.note(ev)
	}
	return s.next.Publish(ctx, ev)
}
