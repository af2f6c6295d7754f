package retry

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/testkit"
)

// probeHarness is a harness whose breaker opens after one failure, with a
// cooldown of one second on the fake clock, and a call that has already
// opened it and waited out the cooldown: the next attempt is the half-open
// probe.
func probeHarness(t *testing.T, mod func(*Options)) (*harness, *breaker.Breaker) {
	t.Helper()
	var group *breaker.Group
	h := newHarness(t, func(o *Options) {
		o.Policy.MaxRetries = 0
		group = mustGroup(t, breaker.Config{FailureThreshold: 1, Cooldown: time.Second, Now: o.Clock.Now})
		o.Breakers = group
		if mod != nil {
			mod(o)
		}
	})
	fails := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	_, err := Do(context.Background(), h.m, testCall, fails.fn)
	require.Error(t, err)
	br := group.Get("anthropic/claude-test")
	require.Equal(t, breaker.Open, br.State())
	h.clock.Advance(time.Second)
	require.Equal(t, breaker.HalfOpen, br.State())
	h.sink.Reset()
	return h, br
}

// requireProbeSlotFree shows that the half-open probe slot was given back:
// another call is admitted at once (no time passes on the fake clock) and,
// succeeding, closes the circuit.
func requireProbeSlotFree(t *testing.T, h *harness, br *breaker.Breaker) {
	t.Helper()
	require.Equal(t, breaker.HalfOpen, br.State(), "the probe's outcome must not have been counted")
	ok := &scripted{steps: []step{{}}}
	_, err := Do(context.Background(), h.m, testCall, ok.fn)
	require.NoError(t, err, "the probe slot is still held")
	require.Len(t, ok.calls(), 1)
	require.Equal(t, breaker.Closed, br.State())
}

var errClassifierBug = errors.New("classifier bug")

// panickyClassifier panics with value for errPanicky and knows no other
// error.
type panickyClassifier struct{ value any }

var errPanicky = errors.New("an error the classifier chokes on")

func (c panickyClassifier) Classify(err error, _ time.Time) (Classification, bool) {
	if errors.Is(err, errPanicky) {
		panic(c.value)
	}
	return Classification{}, false
}

// TestDoClassifierPanics: a Classifier that panics on the probe's error
// still leaves exactly one event for the attempt, gives the probe slot back,
// and ends the call with a *CallError that wraps ErrPanicked and carries the
// panic's value and stack.
func TestDoClassifierPanics(t *testing.T) {
	tests := []struct {
		name  string
		value any
		is    error // errors.Is must hold for the call's error, besides ErrPanicked
	}{
		{"a string", "classifier boom", nil},
		{"an error", errClassifierBug, errClassifierBug},
		{"nil", nil, nil}, // panic(nil) is a *runtime.PanicNilError since Go 1.21
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.Logs
			h, br := probeHarness(t, func(o *Options) {
				o.Classifier = Chain{panickyClassifier{tt.value}, sdkClassifier}
				o.Logger = logs.TextLogger(slog.LevelInfo)
			})
			s := &scripted{steps: []step{{err: errPanicky, report: Report{Usage: events.Usage{InputTokens: 7}}}}}
			var err error
			p := callRecovering(func() { _, err = Do(context.Background(), h.m, testCall, s.fn) })
			assert.Nil(t, p, "the classifier's panic escaped Do")
			evs := h.sink.Events()
			requireProbeSlotFree(t, h, br)

			require.ErrorIs(t, err, ErrPanicked)
			require.ErrorIs(t, err, errPanicky, "fn's error is still there")
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, StopPanicked, ce.Reason)
			assert.Equal(t, 1, ce.Attempts)
			var pe *PanicError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, "classifier", pe.Component)
			if tt.value != nil {
				assert.Equal(t, tt.value, pe.Value)
			} else {
				var pn *runtime.PanicNilError
				assert.ErrorAs(t, pe, &pn)
			}
			assert.Contains(t, string(pe.Stack), "panickyClassifier", "the stack is the classifier's")

			require.Len(t, evs, 1, "exactly one event for the attempt")
			requireCallEvents(t, evs, testCall)
			ev := evs[0]
			assert.Equal(t, events.KindOther, ev.Error.Kind)
			assert.False(t, ev.Error.Retryable)
			assert.Contains(t, ev.Error.Message, "classifier panicked")
			assert.Equal(t, int64(7), ev.Usage.InputTokens, "what fn reported is kept")
			assert.Equal(t, uint64(1), h.m.Stats().Panics)
			assert.Contains(t, logs.String(), "classifier panicked")
			assert.Contains(t, logs.String(), "stack=")
		})
	}
}

// panickySink panics in Publish for the attempts in panicOn, after keeping
// the event or (before) not, and counts every Publish per attempt.
type panickySink struct {
	MemorySink
	panicOn map[int]bool
	before  bool // panic before keeping the event

	mu    sync.Mutex
	calls map[string]int // Publish calls per request_id/attempt
}

func (s *panickySink) Publish(ctx context.Context, ev *events.Attempt) error {
	s.mu.Lock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[ev.RequestID+"/"+strconv.Itoa(ev.Attempt)]++
	s.mu.Unlock()
	if s.panicOn[ev.Attempt] && s.before {
		panic("sink boom")
	}
	err := s.MemorySink.Publish(ctx, ev)
	if s.panicOn[ev.Attempt] {
		panic("sink boom")
	}
	return err
}

func (s *panickySink) published() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// TestDoSinkPanics: a Sink that panics is a Sink that refused the event: the
// call's result is unchanged (a success stays a success, so the caller does
// not pay for the call again), the event was handed over exactly once, the
// panic is counted, logged with its stack and passed to OnSinkError, and the
// breaker permit is given back.
func TestDoSinkPanics(t *testing.T) {
	tests := []struct {
		name    string
		steps   []step
		retries int
		panicOn map[int]bool
		before  bool
		wantErr bool
	}{
		{"on a success", []step{{}}, 0, map[int]bool{0: true}, false, false},
		{"before keeping a success", []step{{}}, 0, map[int]bool{0: true}, true, false},
		{"on a retried failure", []step{{err: statusErr(503, 0)}, {}}, 1, map[int]bool{0: true}, false, false},
		{"on the final failure", []step{{err: statusErr(400, 0)}}, 0, map[int]bool{0: true}, false, true},
		{"on every attempt", []step{{err: statusErr(503, 0)}, {}}, 1, map[int]bool{0: true, 1: true}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &panickySink{panicOn: tt.panicOn, before: tt.before}
			var logs testkit.Logs
			var hooked []error
			h := newHarness(t, func(o *Options) {
				o.Sink = sink
				o.Policy.MaxRetries = tt.retries
				o.Logger = logs.TextLogger(slog.LevelInfo)
				o.OnSinkError = func(_ *events.Attempt, err error) { hooked = append(hooked, err) }
			})
			s := &scripted{steps: tt.steps}
			var err error
			p := callRecovering(func() { _, err = Do(context.Background(), h.m, testCall, s.fn) })
			require.Nil(t, p, "the sink's panic escaped Do")
			if tt.wantErr {
				var ce *CallError
				require.ErrorAs(t, err, &ce)
				assert.NotErrorIs(t, err, ErrPanicked, "the ledger's failure is not the call's")
			} else {
				require.NoError(t, err)
			}

			attempts := len(s.calls())
			calls := sink.published()
			require.Len(t, calls, attempts)
			for k, n := range calls {
				assert.Equal(t, 1, n, "attempt %s handed over %d times", k, n)
			}
			st := h.m.Stats()
			assert.Equal(t, uint64(len(tt.panicOn)), st.SinkErrors)
			assert.Equal(t, uint64(len(tt.panicOn)), st.Panics)
			require.Len(t, hooked, len(tt.panicOn))
			for _, e := range hooked {
				assert.ErrorIs(t, e, ErrPanicked)
				var pe *PanicError
				require.ErrorAs(t, e, &pe)
				assert.Equal(t, "sink", pe.Component)
				assert.Equal(t, "sink boom", pe.Value)
			}
			assert.Contains(t, logs.String(), "sink boom")
			assert.Contains(t, logs.String(), "panickySink")
		})
	}
}

// TestDoSinkPanicsOnProbe: the probe's event makes the sink panic; the
// probe's failure still reopens the circuit as it should, and after the
// cooldown the next probe is admitted.
func TestDoSinkPanicsOnProbe(t *testing.T) {
	sink := &panickySink{}
	h, br := probeHarness(t, func(o *Options) { o.Sink = sink })
	sink.panicOn = map[int]bool{0: true} // the probe's event, not the setup's
	s := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	p := callRecovering(func() { _, _ = Do(context.Background(), h.m, testCall, s.fn) })
	require.Nil(t, p, "the sink's panic escaped Do")
	require.Equal(t, breaker.Open, br.State(), "the probe's failure was reported")
	h.clock.Advance(time.Second)
	ok := &scripted{steps: []step{{}}}
	p = callRecovering(func() { _, _ = Do(context.Background(), h.m, testCall, ok.fn) })
	require.Nil(t, p)
	require.Len(t, ok.calls(), 1, "the next probe is admitted")
	require.Equal(t, breaker.Closed, br.State())
}

// TestDoFnPanicsOnProbe: fn panicking (or calling runtime.Goexit) in the
// probe records the attempt once, gives the probe slot back, and then the
// panic goes on to Do's caller with its own value.
func TestDoFnPanicsOnProbe(t *testing.T) {
	t.Run("panic", func(t *testing.T) {
		h, br := probeHarness(t, nil)
		s := &scripted{steps: []step{{panic: "fn boom", report: Report{Usage: events.Usage{InputTokens: 1}}}}}
		p := callRecovering(func() { _, _ = Do(context.Background(), h.m, testCall, s.fn) })
		assert.Equal(t, "fn boom", p)
		evs := h.sink.Events()
		require.Len(t, evs, 1)
		requireCallEvents(t, evs, testCall)
		assert.Equal(t, events.KindOther, evs[0].Error.Kind)
		assert.Contains(t, evs[0].Error.Message, "fn boom")
		assert.Equal(t, uint64(1), h.m.Stats().Panics)
		requireProbeSlotFree(t, h, br)
	})
	t.Run("Goexit", func(t *testing.T) {
		h, br := probeHarness(t, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = Do(context.Background(), h.m, testCall, func(context.Context, Attempt) (int, Report, error) {
				runtime.Goexit()
				return 0, Report{}, nil
			})
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("Do did not return")
		}
		evs := h.sink.Events()
		require.Len(t, evs, 1)
		requireCallEvents(t, evs, testCall)
		assert.Contains(t, evs[0].Error.Message, "Goexit")
		requireProbeSlotFree(t, h, br)
	})
}
