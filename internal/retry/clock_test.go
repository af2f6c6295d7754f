package retry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// TestDoEventTimesSurviveClockSteps steps the wall clock back (an NTP step,
// an operator fixing the time) in the middle of attempts on every path that
// records an event: each event still has finished_at >= started_at, measured
// on the monotonic clock, decodes as a valid event, and the events of one
// call do not go back in time.
func TestDoEventTimesSurviveClockSteps(t *testing.T) {
	fail := statusErr(503, 0)
	circuitAfterOne := func(o *Options) {
		o.Breakers = mustGroup(t, breaker.Config{FailureThreshold: 1, Cooldown: time.Hour, Now: o.Clock.Now})
	}
	tests := []struct {
		name string
		mod  func(*Options)
		// cancelInWait: the clock holds the first wait, the wall clock
		// steps back meanwhile and the caller cancels.
		cancelInWait bool
		steps        []step
		panics       bool
		want         []time.Duration // finished_at - started_at per event
	}{
		{
			name:  "success",
			steps: []step{{wall: -time.Hour, advance: 250 * time.Millisecond}},
			want:  []time.Duration{250 * time.Millisecond},
		},
		{
			name: "retry then success",
			steps: []step{
				{err: fail, wall: -time.Hour, advance: 100 * time.Millisecond},
				{wall: -2 * time.Hour, advance: 200 * time.Millisecond},
			},
			want: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		},
		{
			name:  "retries exhausted",
			mod:   func(o *Options) { o.Policy.MaxRetries = 1 },
			steps: []step{{err: fail, wall: -time.Minute, advance: 100 * time.Millisecond}},
			want:  []time.Duration{100 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name:  "circuit opens before the retry",
			mod:   circuitAfterOne,
			steps: []step{{err: fail, wall: -time.Hour, advance: 100 * time.Millisecond}},
			want:  []time.Duration{100 * time.Millisecond, 0},
		},
		{
			name:         "canceled in the wait",
			cancelInWait: true,
			steps:        []step{{err: fail, advance: 100 * time.Millisecond}},
			want:         []time.Duration{100 * time.Millisecond, 0},
		},
		{
			name:   "fn panics",
			steps:  []step{{wall: -time.Hour, advance: 100 * time.Millisecond, panic: "boom"}},
			panics: true,
			want:   []time.Duration{100 * time.Millisecond},
		},
		{
			name:  "broken clock: the monotonic reading goes back",
			steps: []step{{mono: -time.Hour, wall: -time.Hour}},
			want:  []time.Duration{0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.mod)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelInWait {
				held := h.clock.HoldSleeps()
				go func() {
					<-held
					h.clock.StepWall(-time.Hour)
					cancel()
				}()
			}
			s := &scripted{clock: h.clock, steps: tt.steps}
			p := callRecovering(func() { _, _ = Do(ctx, h.m, testCall, s.fn) })
			assert.Equal(t, tt.panics, p != nil, "panic: %v", p)

			evs := h.sink.Events()
			requireCallEvents(t, evs, testCall)
			got := make([]time.Duration, len(evs))
			for i, ev := range evs {
				got[i] = ev.FinishedAt.Sub(ev.StartedAt)
				data, err := events.Marshal(&ev)
				require.NoError(t, err)
				_, err = events.Decode(data)
				require.NoError(t, err, "event %d is refused by the aggregator's decoder", i)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestDoDefaultBreakerOnMonotonicClock: the middleware's own breakers
// measure their cooldown on the monotonic clock, so a wall clock stepped
// back does not keep a circuit open for longer.
func TestDoDefaultBreakerOnMonotonicClock(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Policy.MaxRetries = 0 })
	fails := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	for range breaker.DefaultFailureThreshold {
		_, err := Do(context.Background(), h.m, testCall, fails.fn)
		require.Error(t, err)
	}
	_, err := Do(context.Background(), h.m, testCall, fails.fn)
	require.ErrorIs(t, err, ErrCircuitOpen)

	h.clock.StepWall(-time.Hour)
	h.clock.Advance(breaker.DefaultCooldown)
	ok := &scripted{steps: []step{{}}}
	_, err = Do(context.Background(), h.m, testCall, ok.fn)
	require.NoError(t, err, "the probe is admitted after the cooldown")
}

// callRecovering calls f and returns what it panicked with, or nil.
func callRecovering(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
func TestSystemClockMonotonic(t *testing.T) {
	prev := SystemClock.Monotonic()
	for range 1000 {
		now := SystemClock.Monotonic()
		require.GreaterOrEqual(t, now, prev)
		prev = now
	}
	start := SystemClock.Monotonic()
	require.NoError(t, SystemClock.Sleep(context.Background(), time.Millisecond))
	assert.GreaterOrEqual(t, SystemClock.Monotonic()-start, time.Millisecond)
}
