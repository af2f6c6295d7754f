package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// A call that continues a request numbers its attempts from FirstAttempt,
// and the policy's retries count from its own first attempt.
func TestDoFirstAttemptContinuesTheNumbering(t *testing.T) {
	h := newHarness(t, nil) // 2 retries
	call := testCall
	call.RequestID = "req-continued"
	call.FirstAttempt = 3
	s := &scripted{clock: h.clock, steps: []step{{err: statusErr(500, 0)}, {err: statusErr(500, 1)}, {err: statusErr(500, 2)}}}
	_, err := Do(context.Background(), h.m, call, s.fn)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopExhausted, ce.Reason)
	assert.Equal(t, 3, ce.Attempts, "MaxRetries counts from this call's first attempt")

	evs := h.sink.Events()
	require.Len(t, evs, 3)
	for i, ev := range evs {
		assert.Equal(t, 3+i, ev.Attempt)
		assert.Equal(t, i == 2, ev.Final)
		assert.Equal(t, "req-continued", ev.RequestID)
		require.NoError(t, ev.Validate())
	}
	for i, a := range s.calls() {
		assert.Equal(t, 3+i, a.Number, "fn sees the contract's attempt number")
	}
	p := DefaultPolicy()
	assert.Equal(t, []time.Duration{Delay(p, 0, 0.75), Delay(p, 1, 0.75)}, h.clock.Sleeps(),
		"the backoff grows from this call's first retry")
}

// An attempt the breaker rejects takes the next number too.
func TestDoFirstAttemptRejectedAttemptIsNumbered(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Breakers = mustGroup(t, breaker.Config{Now: o.Clock.Now, FailureThreshold: 1})
	})
	call := testCall
	call.RequestID = "req-open"
	call.FirstAttempt = 7
	s := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	_, err := Do(context.Background(), h.m, call, s.fn)
	require.ErrorIs(t, err, ErrCircuitOpen)
	evs := h.sink.Events()
	require.Len(t, evs, 2)
	assert.Equal(t, 7, evs[0].Attempt)
	assert.Equal(t, 8, evs[1].Attempt)
	assert.Equal(t, events.KindCircuitOpen, evs[1].Error.Kind)
	assert.True(t, evs[1].Final)
}

func TestDoFirstAttemptOutOfRange(t *testing.T) {
	h := newHarness(t, nil) // 2 retries: the last first attempt is 998
	for _, first := range []int{-1, events.MaxAttempt - 1, events.MaxAttempt + 5} {
		call := testCall
		call.FirstAttempt = first
		s := &scripted{steps: []step{{}}}
		_, err := Do(context.Background(), h.m, call, s.fn)
		var fe *events.FieldError
		require.True(t, errors.As(err, &fe), "first %d: %v", first, err)
		assert.Equal(t, "first_attempt", fe.Field)
		assert.Contains(t, err.Error(), "must be from 0 to 998")
		assert.Empty(t, s.calls())
	}
	assert.Zero(t, h.sink.Len(), "a refused call publishes nothing")

	call := testCall
	call.FirstAttempt = events.MaxAttempt - 2
	_, err := Do(context.Background(), h.m, call, (&scripted{steps: []step{{}}}).fn)
	require.NoError(t, err)
	assert.Equal(t, events.MaxAttempt-2, h.sink.Events()[0].Attempt)
}
