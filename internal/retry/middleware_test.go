package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/testkit"
)

func TestNewOptions(t *testing.T) {
	sink := NewMemorySink()
	tests := []struct {
		name   string
		opts   Options
		field  string // "" for valid
		policy string // the PolicyError's field, if any
	}{
		{"only a sink", Options{Sink: sink}, "", ""},
		{"no sink", Options{}, "Sink", ""},
		{"partial policy", Options{Sink: sink, Policy: Policy{MaxRetries: 1}}, "Policy", "BaseDelay"},
		{"negative retries", Options{Sink: sink, Policy: func() Policy { p := DefaultPolicy(); p.MaxRetries = -1; return p }()}, "Policy", "MaxRetries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.opts)
			if tt.field == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.Nil(t, m)
			require.ErrorIs(t, err, ErrInvalidOptions)
			var oe *OptionsError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, tt.field, oe.Field)
			assert.Contains(t, err.Error(), tt.field)
			if tt.policy != "" {
				require.ErrorIs(t, err, ErrInvalidPolicy)
				var pe *PolicyError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.policy, pe.Field)
				assert.Contains(t, err.Error(), tt.policy)
			}
		})
	}
}

func TestNewZeroPolicyIsDefault(t *testing.T) {
	m, err := New(Options{Sink: NewMemorySink()})
	require.NoError(t, err)
	assert.Equal(t, DefaultPolicy(), m.Policy())
}

func TestDoSuccessFirstTry(t *testing.T) {
	h := newHarness(t, nil)
	start := h.clock.Now()
	usage := events.Usage{InputTokens: 120, OutputTokens: 30, CacheReadInputTokens: 100}
	s := &scripted{clock: h.clock, steps: []step{{
		advance: 250 * time.Millisecond,
		report:  Report{Usage: usage, ProviderRequestID: "req_0001"},
		check: func(ctx context.Context, a Attempt) {
			dl, hasDeadline := ctx.Deadline()
			assert.True(t, hasDeadline, "the default attempt timeout")
			assert.WithinDuration(t, time.Now().Add(DefaultAttemptTimeout), dl, time.Minute)
		},
	}}}

	got, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	assert.Equal(t, "ok-0", got)

	evs := h.sink.Events()
	require.Len(t, evs, 1)
	requireCallEvents(t, evs, testCall)
	ev := evs[0]
	assert.Equal(t, events.OutcomeSuccess, ev.Outcome)
	assert.True(t, ev.Final)
	assert.Equal(t, 0, ev.Attempt)
	assert.Nil(t, ev.Error)
	assert.Equal(t, usage, ev.Usage)
	assert.Equal(t, "req_0001", ev.ProviderRequestID)
	assert.Equal(t, start, ev.StartedAt)
	assert.Equal(t, start.Add(250*time.Millisecond), ev.FinishedAt)

	calls := s.calls()
	require.Len(t, calls, 1)
	assert.Equal(t, Attempt{Number: 0, RequestID: ev.RequestID, SessionID: "sess-1", EventID: ev.EventID}, calls[0])
	assert.Empty(t, h.clock.Sleeps())
	assert.Equal(t, Stats{Calls: 1, Attempts: 1, Events: 1}, h.m.Stats())
}

func TestDoRetryThenSuccess(t *testing.T) {
	h := newHarness(t, nil)
	s := &scripted{clock: h.clock, steps: []step{
		{err: statusErr(503, 0), advance: time.Second, report: Report{ProviderRequestID: "req_a"}},
		{advance: 2 * time.Second, report: Report{Usage: events.Usage{InputTokens: 10, OutputTokens: 2}}},
	}}
	got, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	assert.Equal(t, "ok-1", got)

	evs := h.sink.Events()
	require.Len(t, evs, 2)
	requireCallEvents(t, evs, testCall)
	assert.Equal(t, events.OutcomeError, evs[0].Outcome)
	assert.False(t, evs[0].Final)
	assert.Equal(t, &events.AttemptError{Kind: events.KindOverloaded, Status: 503, Retryable: true, Message: "sdk: status 503"}, evs[0].Error)
	assert.Equal(t, "req_a", evs[0].ProviderRequestID)
	assert.Equal(t, events.OutcomeSuccess, evs[1].Outcome)
	assert.True(t, evs[1].Final)
	assert.Empty(t, evs[1].ProviderRequestID, "an attempt's fields do not leak into the next")
	assert.Equal(t, evs[0].RequestID, evs[1].RequestID)
	assert.NotEqual(t, evs[0].EventID, evs[1].EventID)

	// rand 0.75 with jitter 0.2: 1 s * (1 + 0.2*0.5).
	want := Delay(DefaultPolicy(), 0, 0.75)
	require.Equal(t, 1100*time.Millisecond, want)
	assert.Equal(t, []time.Duration{want}, h.clock.Sleeps())
	assert.Equal(t, evs[0].FinishedAt.Add(want), evs[1].StartedAt)

	calls := s.calls()
	require.Len(t, calls, 2)
	for i, a := range calls {
		assert.Equal(t, i, a.Number)
		assert.Equal(t, evs[i].EventID, a.EventID)
		assert.Equal(t, evs[0].RequestID, a.RequestID)
	}
	assert.Equal(t, Stats{Calls: 1, Attempts: 2, Retries: 1, Events: 2}, h.m.Stats())
}

func TestDoRetriesExhausted(t *testing.T) {
	h := newHarness(t, nil)
	s := &scripted{steps: []step{{err: statusErr(500, 0)}, {err: statusErr(502, 1)}, {err: statusErr(529, 2)}}}
	_, err := Do(context.Background(), h.m, testCall, s.fn)
	require.Error(t, err)

	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopExhausted, ce.Reason)
	assert.Equal(t, 3, ce.Attempts)
	assert.Equal(t, 529, ce.Classification.Status)
	assert.Nil(t, ce.Cause)
	var se *sdkError
	require.ErrorAs(t, err, &se, "the SDK error is reachable")
	assert.Equal(t, 2, se.N, "it is the last one")
	assert.NotErrorIs(t, err, ErrCircuitOpen)
	assert.Contains(t, err.Error(), "retries_exhausted")
	assert.Contains(t, err.Error(), ce.RequestID)

	evs := h.sink.Events()
	require.Len(t, evs, 3)
	requireCallEvents(t, evs, testCall)
	for i, ev := range evs {
		assert.Equal(t, events.OutcomeError, ev.Outcome)
		assert.True(t, ev.Error.Retryable)
		assert.Equal(t, i == 2, ev.Final)
	}
	assert.Equal(t, ce.RequestID, evs[0].RequestID)
	p := DefaultPolicy()
	assert.Equal(t, []time.Duration{Delay(p, 0, 0.75), Delay(p, 1, 0.75)}, h.clock.Sleeps())
	assert.Equal(t, []time.Duration{1100 * time.Millisecond, 2200 * time.Millisecond}, h.clock.Sleeps())
}

func TestDoNonRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kind events.ErrorKind
	}{
		{"bad request", statusErr(400, 0), events.KindClient},
		{"auth", statusErr(401, 0), events.KindAuth},
		{"quota", statusErr(402, 0), events.KindQuota},
		{"server says no", statusErr(500, 0, "x-should-retry", "false"), events.KindServer},
		{"unclassified", errors.New("mystery"), events.KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			s := &scripted{steps: []step{{err: tt.err}}}
			_, err := Do(context.Background(), h.m, testCall, s.fn)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, StopNonRetryable, ce.Reason)
			assert.Equal(t, 1, ce.Attempts)
			require.ErrorIs(t, err, tt.err)

			evs := h.sink.Events()
			require.Len(t, evs, 1)
			requireCallEvents(t, evs, testCall)
			assert.Equal(t, tt.kind, evs[0].Error.Kind)
			assert.False(t, evs[0].Error.Retryable)
			assert.True(t, evs[0].Final)
			assert.Len(t, s.calls(), 1)
			assert.Empty(t, h.clock.Sleeps())
		})
	}
}

func TestDoServerHints(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		events int
		sleeps []time.Duration
		reason StopReason // "" for success
	}{
		{"retry-after-ms honoured exactly", statusErr(429, 0, "retry-after-ms", "2500"), 2, []time.Duration{2500 * time.Millisecond}, ""},
		{"retry-after seconds honoured", statusErr(503, 0, "retry-after", "7"), 2, []time.Duration{7 * time.Second}, ""},
		{"ms wins over seconds", statusErr(429, 0, "retry-after-ms", "40", "retry-after", "7"), 2, []time.Duration{40 * time.Millisecond}, ""},
		{"hint at the cap is honoured", statusErr(429, 0, "retry-after", "60"), 2, []time.Duration{time.Minute}, ""},
		{"hint longer than the backoff cap is honoured", statusErr(429, 0, "retry-after", "45"), 2, []time.Duration{45 * time.Second}, ""},
		{"zero hint retries at once", statusErr(429, 0, "retry-after", "0"), 2, []time.Duration{0}, ""},
		{"hint over the cap ends at once", statusErr(429, 0, "retry-after", "61"), 1, nil, StopHintOverCap},
		{"hint of a non-retryable error is ignored", statusErr(400, 0, "retry-after", "1"), 1, nil, StopNonRetryable},
		{"x-should-retry true retries a 400 with its hint", statusErr(400, 0, "x-should-retry", "true", "retry-after", "3"), 2, []time.Duration{3 * time.Second}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			s := &scripted{steps: []step{{err: tt.err}, {}}}
			_, err := Do(context.Background(), h.m, testCall, s.fn)
			evs := h.sink.Events()
			require.Len(t, evs, tt.events)
			requireCallEvents(t, evs, testCall)
			assert.Equal(t, tt.sleeps, h.clock.Sleeps())
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.reason, ce.Reason)
			assert.True(t, evs[0].Final)
		})
	}
}

func TestDoHintOverCapKeepsRetryable(t *testing.T) {
	h := newHarness(t, nil)
	s := &scripted{steps: []step{{err: statusErr(429, 0, "retry-after", "3600")}}}
	_, err := Do(context.Background(), h.m, testCall, s.fn)
	require.Error(t, err)
	evs := h.sink.Events()
	require.Len(t, evs, 1)
	assert.True(t, evs[0].Final)
	assert.True(t, evs[0].Error.Retryable, "the failure was retryable; the policy declined to wait")
	assert.Equal(t, events.KindRateLimit, evs[0].Error.Kind)
	assert.Empty(t, h.clock.Sleeps())
}

func TestDoDeadlineTooNear(t *testing.T) {
	policy := Policy{MaxRetries: 5, BaseDelay: time.Minute, MaxDelay: time.Hour, HintCap: time.Hour}
	tests := []struct {
		name     string
		steps    []step
		deadline time.Duration // from the fake clock's start
		events   int
		sleeps   []time.Duration
	}{
		{"backoff fits once, then would pass the deadline", []step{{err: statusErr(500, 0)}}, 150 * time.Second, 2, []time.Duration{time.Minute}},
		{"first backoff would pass the deadline", []step{{err: statusErr(500, 0)}}, 59 * time.Second, 1, nil},
		{"backoff ending exactly at the deadline is too late", []step{{err: statusErr(500, 0)}}, time.Minute, 1, nil},
		{"the attempt's own time counts", []step{{err: statusErr(500, 0), advance: 30 * time.Second}}, 80 * time.Second, 1, nil},
		{"hint would pass the deadline", []step{{err: statusErr(429, 0, "retry-after", "30")}}, 20 * time.Second, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Policy = policy })
			s := &scripted{clock: h.clock, steps: tt.steps}
			ctx, cancel := context.WithDeadline(context.Background(), h.clock.Now().Add(tt.deadline))
			defer cancel()
			_, err := Do(ctx, h.m, testCall, s.fn)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, StopDeadline, ce.Reason)
			assert.NoError(t, ctx.Err(), "Do gave up before the deadline, it did not run into it")
			evs := h.sink.Events()
			require.Len(t, evs, tt.events)
			requireCallEvents(t, evs, testCall)
			assert.True(t, evs[len(evs)-1].Error.Retryable)
			assert.Equal(t, tt.sleeps, h.clock.Sleeps())
		})
	}
}

func TestDoCallerCancelDuringWait(t *testing.T) {
	h := newHarness(t, nil)
	held := h.clock.HoldSleeps()
	s := &scripted{steps: []step{{err: statusErr(503, 0), report: Report{Usage: events.Usage{InputTokens: 5}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type result struct {
		v   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := Do(ctx, h.m, testCall, s.fn)
		done <- result{v, err}
	}()
	select {
	case d := <-held:
		assert.Equal(t, 1100*time.Millisecond, d)
	case <-time.After(10 * time.Second):
		t.Fatal("Do never waited")
	}
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return after the cancel")
	}

	require.ErrorIs(t, res.err, context.Canceled)
	var ce *CallError
	require.ErrorAs(t, res.err, &ce)
	assert.Equal(t, StopCanceled, ce.Reason)
	assert.Equal(t, 1, ce.Attempts)
	var se *sdkError
	require.ErrorAs(t, res.err, &se, "the last SDK error is still reachable")

	assert.Len(t, s.calls(), 1, "no attempt after the cancel")
	evs := h.sink.Events()
	require.Len(t, evs, 2)
	requireCallEvents(t, evs, testCall)
	assert.False(t, evs[0].Final)
	assert.Equal(t, events.Usage{InputTokens: 5}, evs[0].Usage)
	assert.Equal(t, events.KindCanceled, evs[1].Error.Kind)
	assert.False(t, evs[1].Error.Retryable)
	assert.True(t, evs[1].Final)
	assert.Zero(t, evs[1].Usage)
	assert.Equal(t, uint64(1), h.m.Stats().Rejections)
}

func TestDoCallerCancelDuringAttempt(t *testing.T) {
	tests := []struct {
		name string
		ret  func(ctx context.Context) error
	}{
		{"fn returns the context error", func(ctx context.Context) error { return ctx.Err() }},
		{"fn returns a retryable SDK error: cancel still wins", func(context.Context) error { return statusErr(503, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			_, err := Do(ctx, h.m, testCall, func(ctx context.Context, a Attempt) (int, Report, error) {
				calls++
				cancel()
				return 0, Report{Usage: events.Usage{InputTokens: 9}}, tt.ret(ctx)
			})
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, StopCanceled, ce.Reason)
			assert.Equal(t, 1, calls)
			evs := h.sink.Events()
			require.Len(t, evs, 1)
			requireCallEvents(t, evs, testCall)
			assert.Equal(t, events.KindCanceled, evs[0].Error.Kind)
			assert.False(t, evs[0].Error.Retryable)
			assert.Equal(t, events.Usage{InputTokens: 9}, evs[0].Usage, "a canceled attempt may still be billed")
			assert.Empty(t, h.clock.Sleeps())
		})
	}
}

// settledErr is an upstream's error that was decided before the caller
// left (Settled).
type settledErr struct{ error }

func (e settledErr) Settled() bool { return true }
func (e settledErr) Unwrap() error { return e.error }
func (e settledErr) Error() string { return e.error.Error() }

// A Settled error keeps its own classification when the caller's context
// is done by the time it is classified: the upstream failed first (a
// proxy's client that left after the error event reached it).
func TestDoSettledErrorOutlivesTheCallersCancel(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	_, err := Do(ctx, h.m, testCall, func(ctx context.Context, a Attempt) (int, Report, error) {
		calls++
		cancel()
		return 0, Report{}, settledErr{statusErr(503, 0)}
	})
	require.Error(t, err)
	assert.Equal(t, 1, calls, "the caller is gone: no retry")
	evs := h.sink.Events()
	require.NotEmpty(t, evs)
	require.NotNil(t, evs[0].Error)
	assert.NotEqual(t, events.KindCanceled, evs[0].Error.Kind, "the attempt is the upstream's 503, not the caller's cancel")
	assert.Equal(t, 503, evs[0].Error.Status)
}

func TestDoContextDoneBeforeStart(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := Do(ctx, h.m, testCall, func(context.Context, Attempt) (int, Report, error) {
		called = true
		return 1, Report{}, nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
	evs := h.sink.Events()
	require.Len(t, evs, 1)
	requireCallEvents(t, evs, testCall)
	assert.Equal(t, events.KindCanceled, evs[0].Error.Kind)
}

func TestDoAttemptTimeoutIsRetried(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Policy.AttemptTimeout = 5 * time.Millisecond })
	s := &scripted{steps: []step{
		{check: func(ctx context.Context, a Attempt) {
			dl, ok := ctx.Deadline()
			require.True(t, ok, "the attempt has its own deadline")
			assert.LessOrEqual(t, time.Until(dl), 5*time.Millisecond)
			<-ctx.Done() // the attempt runs into its timeout
		}, err: context.DeadlineExceeded},
		{check: func(ctx context.Context, a Attempt) {
			_, ok := ctx.Deadline()
			assert.True(t, ok, "every attempt gets a fresh deadline")
			assert.NoError(t, ctx.Err())
		}},
	}}
	got, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	assert.Equal(t, "ok-1", got)
	evs := h.sink.Events()
	require.Len(t, evs, 2)
	requireCallEvents(t, evs, testCall)
	assert.Equal(t, events.KindTimeout, evs[0].Error.Kind)
	assert.True(t, evs[0].Error.Retryable)
	assert.Len(t, h.clock.Sleeps(), 1)
}

func TestDoCallerDeadlineIsNotRetried(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Policy.AttemptTimeout = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	calls := 0
	_, err := Do(ctx, h.m, testCall, func(ctx context.Context, a Attempt) (int, Report, error) {
		calls++
		<-ctx.Done()
		return 0, Report{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopCanceled, ce.Reason)
	assert.Equal(t, 1, calls)
	evs := h.sink.Events()
	require.Len(t, evs, 1)
	assert.Equal(t, events.KindCanceled, evs[0].Error.Kind)
	assert.True(t, evs[0].Final)
}

func TestDoCircuitOpensAcrossCalls(t *testing.T) {
	var transitions []string
	var mu sync.Mutex
	h := newHarness(t, func(o *Options) {
		o.Policy.MaxRetries = 0
		// A group on the same fake clock that records its transitions.
		o.Breakers = mustGroup(t, breaker.Config{Now: o.Clock.Now, OnStateChange: func(key string, from, to breaker.State) {
			mu.Lock()
			defer mu.Unlock()
			transitions = append(transitions, key+":"+from.String()+"->"+to.String())
		}})
	})

	fails := &scripted{steps: []step{{err: statusErr(503, 0)}}}
	for i := range breaker.DefaultFailureThreshold {
		_, err := Do(context.Background(), h.m, testCall, fails.fn)
		var ce *CallError
		require.ErrorAs(t, err, &ce, "call %d", i)
		require.Equal(t, StopExhausted, ce.Reason, "call %d", i)
	}
	require.Len(t, fails.calls(), 5)
	h.sink.Reset()

	next := &scripted{steps: []step{{}}}
	_, err := Do(context.Background(), h.m, testCall, next.fn)
	require.ErrorIs(t, err, ErrCircuitOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "anthropic/claude-test", oe.Key)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, StopCircuitOpen, ce.Reason)
	assert.Equal(t, 0, ce.Attempts)
	assert.Empty(t, next.calls(), "fn is not called while the circuit is open")

	evs := h.sink.Events()
	require.Len(t, evs, 1)
	requireCallEvents(t, evs, testCall)
	ev := evs[0]
	assert.Equal(t, events.OutcomeError, ev.Outcome)
	assert.Equal(t, events.KindCircuitOpen, ev.Error.Kind)
	assert.False(t, ev.Error.Retryable)
	assert.Zero(t, ev.Error.Status)
	assert.True(t, ev.Final)
	assert.Zero(t, ev.Usage)
	assert.Equal(t, ev.StartedAt, ev.FinishedAt)
	assert.Contains(t, ev.Error.Message, "circuit open")

	// Another upstream is unaffected.
	other := testCall
	other.Upstream = "anthropic/other-pool"
	_, err = Do(context.Background(), h.m, other, next.fn)
	require.NoError(t, err)

	// After the cooldown a probe goes through and its success closes it.
	h.clock.Advance(breaker.DefaultCooldown)
	_, err = Do(context.Background(), h.m, testCall, next.fn)
	require.NoError(t, err)
	_, err = Do(context.Background(), h.m, testCall, next.fn)
	require.NoError(t, err)
	assert.Len(t, next.calls(), 3)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"anthropic/claude-test:closed->open",
		"anthropic/claude-test:open->half_open",
		"anthropic/claude-test:half_open->closed",
	}, transitions)
}

func TestDoCircuitOpensMidCall(t *testing.T) {
	h := newHarness(t, nil) // 3 attempts per call
	fails := &scripted{steps: []step{{err: statusErr(500, 0)}}}
	_, err := Do(context.Background(), h.m, testCall, fails.fn) // failures 1-3
	require.Error(t, err)
	h.sink.Reset()

	_, err = Do(context.Background(), h.m, testCall, fails.fn) // 4, 5, then rejected
	require.ErrorIs(t, err, ErrCircuitOpen)
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.Attempts)
	var se *sdkError
	assert.ErrorAs(t, err, &se, "the last SDK error is kept alongside the rejection")
	assert.Len(t, fails.calls(), 5)

	evs := h.sink.Events()
	require.Len(t, evs, 3)
	requireCallEvents(t, evs, testCall)
	assert.Equal(t, events.KindServer, evs[1].Error.Kind)
	assert.False(t, evs[1].Final)
	assert.Equal(t, events.KindCircuitOpen, evs[2].Error.Kind)
	assert.Equal(t, 2, evs[2].Attempt)
}

func TestDoNonRetryableFailuresDoNotOpenTheCircuit(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Policy.MaxRetries = 0 })
	// Nor do 429s, retryable as they are: the upstream is healthy, the
	// caller over its quota (the guards' rate limits hold it).
	errs := []error{statusErr(400, 0), statusErr(401, 0), statusErr(402, 0), statusErr(404, 0), errors.New("other"),
		statusErr(429, 0, "retry-after", "0")}
	for range 3 {
		for _, e := range errs {
			_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: e}}}).fn)
			require.NotErrorIs(t, err, ErrCircuitOpen)
		}
	}
	// Canceled calls neither.
	for range 6 {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := Do(ctx, h.m, testCall, func(context.Context, Attempt) (int, Report, error) {
			cancel()
			return 0, Report{}, context.Canceled
		})
		require.ErrorIs(t, err, context.Canceled)
	}
	assert.Equal(t, breaker.Closed, h.m.guards.set.Get("anthropic/claude-test").Breaker().State())
	// A success resets the count of retryable failures.
	for range 4 {
		_, _ = Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
	}
	_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{}}}).fn)
	require.NoError(t, err)
	for range 4 {
		_, _ = Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
	}
	assert.Equal(t, breaker.Closed, h.m.guards.set.Get("anthropic/claude-test").Breaker().State())
}

func TestDoInvalidCall(t *testing.T) {
	long := strings.Repeat("x", 129)
	withLabels := func(l api.Labels) Call { return Call{SessionID: "s", Provider: "p", Model: "m", Labels: l} }
	tests := []struct {
		name     string
		call     Call
		field    string
		defaults api.Labels // the middleware's
		rule     string     // for labels: the *api.LabelError's rule
	}{
		{name: "missing session", call: Call{Provider: "p", Model: "m"}, field: "session_id"},
		{name: "session with a space", call: Call{SessionID: "a b", Provider: "p", Model: "m"}, field: "session_id"},
		{name: "session with a dot", call: Call{SessionID: "a.b", Provider: "p", Model: "m"}, field: "session_id"},
		{name: "session too long", call: Call{SessionID: long, Provider: "p", Model: "m"}, field: "session_id"},
		{name: "request with a wildcard", call: Call{SessionID: "s", RequestID: "r*", Provider: "p", Model: "m"}, field: "request_id"},
		{name: "request too long", call: Call{SessionID: "s", RequestID: long, Provider: "p", Model: "m"}, field: "request_id"},
		{name: "request with a slash", call: Call{SessionID: "s", RequestID: "a/b", Provider: "p", Model: "m"}, field: "request_id"},
		{name: "missing provider", call: Call{SessionID: "s", Model: "m"}, field: "provider"},
		{name: "provider too long", call: Call{SessionID: "s", Provider: strings.Repeat("p", 65), Model: "m"}, field: "provider"},
		{name: "missing model", call: Call{SessionID: "s", Provider: "p"}, field: "model"},
		{name: "model too long", call: Call{SessionID: "s", Provider: "p", Model: strings.Repeat("m", 257)}, field: "model"},
		{name: "model not UTF-8", call: Call{SessionID: "s", Provider: "p", Model: "m\xff"}, field: "model"},
		{name: "provider not UTF-8", call: Call{SessionID: "s", Provider: "\xc3", Model: "m"}, field: "provider"},
		{name: "label key upper case", call: withLabels(api.Labels{"Team": "x"}), field: `labels["Team"]`, rule: "key must be a lower-case letter"},
		{name: "label key too long", call: withLabels(api.Labels{strings.Repeat("k", 33): "x"}), field: `labels["` + strings.Repeat("k", 33) + `"]`, rule: "key must be 1 to 32 bytes, got 33"},
		{name: "label value empty", call: withLabels(api.Labels{"team": ""}), field: `labels["team"]`, rule: "value must be 1 to 128 bytes, got 0"},
		{name: "label value too long", call: withLabels(api.Labels{"team": strings.Repeat("v", 129)}), field: `labels["team"]`, rule: "value must be 1 to 128 bytes, got 129"},
		{name: "label value with a newline", call: withLabels(api.Labels{"team": "a\nb"}), field: `labels["team"]`, rule: "value must not hold control characters"},
		{name: "label value not UTF-8", call: withLabels(api.Labels{"team": "\xff"}), field: `labels["team"]`, rule: "value must be valid UTF-8"},
		{name: "labels too many with the defaults", call: withLabels(labels(7, "c")), defaults: labels(10, "d"), field: "labels", rule: "must hold at most 16 pairs, got 17"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Labels = tt.defaults })
			called := false
			_, err := Do(context.Background(), h.m, tt.call, func(context.Context, Attempt) (int, Report, error) {
				called = true
				return 0, Report{}, nil
			})
			require.ErrorIs(t, err, events.ErrInvalidField)
			var fe *events.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
			assert.Contains(t, err.Error(), tt.field)
			if tt.field == "session_id" || tt.field == "request_id" {
				assert.Contains(t, fe.Rule, events.IDRule)
			}
			if tt.rule != "" {
				var le *api.LabelError
				require.ErrorAs(t, err, &le, "the labels' error names the key and the rule")
				assert.Contains(t, le.Rule, tt.rule)
				assert.Contains(t, err.Error(), tt.rule)
			}
			assert.False(t, called, "no model call")
			assert.Zero(t, h.sink.Len(), "no event")
			assert.Equal(t, Stats{}, h.m.Stats())
		})
	}
}

func TestDoNilArguments(t *testing.T) {
	h := newHarness(t, nil)
	fn := func(context.Context, Attempt) (int, Report, error) { return 0, Report{}, nil }
	var nilCtx context.Context
	_, err := Do(nilCtx, h.m, testCall, fn)
	assert.ErrorIs(t, err, ErrInvalidCall)
	_, err = Do(context.Background(), nil, testCall, fn)
	assert.ErrorIs(t, err, ErrInvalidCall)
	_, err = Do[int](context.Background(), h.m, testCall, nil)
	assert.ErrorIs(t, err, ErrInvalidCall)
	assert.Zero(t, h.sink.Len())
}

func TestDoUsageOnErrorAttempt(t *testing.T) {
	h := newHarness(t, nil)
	u0 := events.Usage{InputTokens: 1000, OutputTokens: 17, CacheCreationInputTokens: 200}
	u1 := events.Usage{InputTokens: 1000, OutputTokens: 400}
	s := &scripted{steps: []step{
		{err: statusErr(500, 0), report: Report{Usage: u0, ProviderRequestID: "req_x"}},
		{report: Report{Usage: u1, ProviderRequestID: "req_y"}},
	}}
	_, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	evs := h.sink.Events()
	require.Len(t, evs, 2)
	assert.Equal(t, u0, evs[0].Usage)
	assert.Equal(t, "req_x", evs[0].ProviderRequestID)
	assert.Equal(t, u1, evs[1].Usage)
	assert.Equal(t, "req_y", evs[1].ProviderRequestID)
}

func TestDoRequestIDs(t *testing.T) {
	t.Run("generated request_id is a ULID shared by all attempts", func(t *testing.T) {
		h := newHarness(t, nil)
		s := &scripted{steps: []step{{err: statusErr(503, 0)}, {err: statusErr(503, 1)}, {}}}
		_, err := Do(context.Background(), h.m, testCall, s.fn)
		require.NoError(t, err)
		evs := h.sink.Events()
		require.Len(t, evs, 3)
		requireCallEvents(t, evs, testCall)
		id, err := ulid.ParseStrict(evs[0].RequestID)
		require.NoError(t, err)
		assert.NoError(t, events.ValidateID("request_id", evs[0].RequestID))
		start := evs[0].StartedAt
		assert.Equal(t, ulid.Timestamp(start), id.Time(), "stamped with the injected clock")
		for i, a := range s.calls() {
			assert.Equal(t, evs[0].RequestID, a.RequestID)
			eid := ulid.MustParseStrict(evs[i].EventID)
			assert.Equal(t, ulid.Timestamp(evs[i].StartedAt), eid.Time())
			if i > 0 {
				assert.Positive(t, eid.Compare(ulid.MustParseStrict(evs[i-1].EventID)), "event IDs sort in attempt order")
			}
		}
	})
	t.Run("caller's request_id is kept", func(t *testing.T) {
		h := newHarness(t, nil)
		call := testCall
		call.RequestID = "req_caller-42"
		s := &scripted{steps: []step{{err: statusErr(503, 0)}, {}}}
		_, err := Do(context.Background(), h.m, call, s.fn)
		require.NoError(t, err)
		for _, ev := range h.sink.Events() {
			assert.Equal(t, "req_caller-42", ev.RequestID)
		}
		for _, a := range s.calls() {
			assert.Equal(t, "req_caller-42", a.RequestID)
		}
	})
	t.Run("two calls get different request_ids", func(t *testing.T) {
		h := newHarness(t, nil)
		s := &scripted{steps: []step{{}}}
		for range 2 {
			_, err := Do(context.Background(), h.m, testCall, s.fn)
			require.NoError(t, err)
		}
		evs := h.sink.Events()
		require.Len(t, evs, 2)
		assert.NotEqual(t, evs[0].RequestID, evs[1].RequestID)
	})
	t.Run("injected NewID is used", func(t *testing.T) {
		var n atomic.Uint64
		seq := func(i uint64) string { return ulid.MustNew(i, nil).String() }
		h := newHarness(t, func(o *Options) {
			o.NewID = func() string { return seq(n.Add(1)) }
		})
		require.Equal(t, uint64(1), n.Load(), "New checks NewID once")
		s := &scripted{steps: []step{{err: statusErr(503, 0)}, {}}}
		_, err := Do(context.Background(), h.m, testCall, s.fn)
		require.NoError(t, err)
		evs := h.sink.Events()
		require.Len(t, evs, 2)
		requireCallEvents(t, evs, testCall)
		assert.Equal(t, []string{seq(2), seq(2)}, []string{evs[0].RequestID, evs[1].RequestID})
		assert.Equal(t, []string{seq(3), seq(4)}, []string{evs[0].EventID, evs[1].EventID})
	})
	t.Run("a NewID that does not make ULIDs is refused", func(t *testing.T) {
		for _, id := range []string{"not valid", "req-1", strings.ToLower(ulid.Make().String()), ""} {
			_, err := New(Options{Sink: NewMemorySink(), NewID: func() string { return id }})
			var oe *OptionsError
			require.ErrorAs(t, err, &oe, "id %q", id)
			assert.Equal(t, "NewID", oe.Field)
		}
	})
	t.Run("an invalid generated request_id is refused", func(t *testing.T) {
		first := true
		h := newHarness(t, func(o *Options) {
			o.NewID = func() string {
				if first { // passes New's check, then breaks the contract
					first = false
					return ulid.Make().String()
				}
				return "not valid"
			}
		})
		_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{}}}).fn)
		var fe *events.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "request_id", fe.Field)
		assert.Zero(t, h.sink.Len())
	})
}

func TestDoClassification(t *testing.T) {
	longMsg := strings.Repeat("é", 800) // 1600 bytes
	tests := []struct {
		name       string
		classifier Classifier
		err        error
		kind       events.ErrorKind
		retryable  bool
		message    string
	}{
		{"provider classifier first", Chain{sdkClassifier}, statusErr(429, 0), events.KindRateLimit, true, "sdk: status 429"},
		{"transport fallback", Chain{sdkClassifier}, syscallReset(), events.KindConnection, true, "connection reset"},
		{"no classifier: transport only", nil, syscallReset(), events.KindConnection, true, ""},
		{"nothing knows it: other, not retried", Chain{sdkClassifier}, errors.New("weird"), events.KindOther, false, "weird"},
		{"empty message becomes the error text", ClassifierFunc(func(error, time.Time) (Classification, bool) {
			return Classification{Kind: events.KindServer, Status: 500, Retryable: true}, true
		}), errors.New("upstream said 500"), events.KindServer, true, "upstream said 500"},
		{"invalid kind becomes other", ClassifierFunc(func(error, time.Time) (Classification, bool) {
			return Classification{Kind: "bogus", Message: "m"}, true
		}), errors.New("x"), events.KindOther, false, "m"},
		{"a classifier's canceled is never retried", ClassifierFunc(func(error, time.Time) (Classification, bool) {
			return Classification{Kind: events.KindCanceled, Retryable: true, Message: "m"}, true
		}), errors.New("x"), events.KindCanceled, false, "m"},
		{"status out of the contract's range is dropped", ClassifierFunc(func(error, time.Time) (Classification, bool) {
			return Classification{Kind: events.KindServer, Status: 999, Message: "m"}, true
		}), errors.New("x"), events.KindServer, false, "m"},
		{"long message is truncated", ClassifierFunc(func(error, time.Time) (Classification, bool) {
			return Classification{Kind: events.KindClient, Message: longMsg}, true
		}), errors.New("x"), events.KindClient, false, longMsg[:1024]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				o.Classifier = tt.classifier
				o.Policy.MaxRetries = 0
			})
			_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: tt.err}}}).fn)
			require.ErrorIs(t, err, tt.err)
			evs := h.sink.Events()
			require.Len(t, evs, 1)
			requireCallEvents(t, evs, testCall)
			assert.Equal(t, tt.kind, evs[0].Error.Kind)
			assert.Equal(t, tt.retryable, evs[0].Error.Retryable)
			assert.Contains(t, evs[0].Error.Message, tt.message)
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.kind, ce.Classification.Kind)
		})
	}
}

func syscallReset() error { return fmt.Errorf("read tcp: %w", syscall.ECONNRESET) }

func TestDoProviderRequestIDFromClassifier(t *testing.T) {
	cl := ClassifierFunc(func(err error, now time.Time) (Classification, bool) {
		return Classification{Kind: events.KindServer, Status: 500, Retryable: false, ProviderRequestID: "req_from_header"}, true
	})
	tests := []struct {
		name   string
		report Report
		want   string
	}{
		{"classifier's when fn knows none", Report{}, "req_from_header"},
		{"fn's wins", Report{ProviderRequestID: "req_fn"}, "req_fn"},
		{"too long is cut", Report{ProviderRequestID: strings.Repeat("r", 300)}, strings.Repeat("r", 256)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Classifier = cl })
			_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: errors.New("x"), report: tt.report}}}).fn)
			require.Error(t, err)
			evs := h.sink.Events()
			require.Len(t, evs, 1)
			assert.Equal(t, tt.want, evs[0].ProviderRequestID)
		})
	}
}

func TestDoJitterUsesRand(t *testing.T) {
	t.Run("drawn once per computed wait", func(t *testing.T) {
		var draws atomic.Int64
		h := newHarness(t, func(o *Options) {
			o.Rand = func() float64 { draws.Add(1); return 0 }
		})
		_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}}}).fn)
		require.Error(t, err)
		assert.Equal(t, int64(2), draws.Load())
		assert.Equal(t, []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond}, h.clock.Sleeps())
	})
	t.Run("not drawn without jitter or with a hint", func(t *testing.T) {
		h := newHarness(t, func(o *Options) {
			o.Policy.Jitter = 0
			o.Rand = func() float64 { t.Error("rand drawn"); return 0 }
		})
		_, err := Do(context.Background(), h.m, testCall, (&scripted{steps: []step{{err: statusErr(500, 0)}, {err: statusErr(429, 1, "retry-after", "1")}}}).fn)
		require.Error(t, err)
		assert.Equal(t, []time.Duration{time.Second, time.Second}, h.clock.Sleeps())
	})
}

// failingSink refuses every event and records the context it was given.
type failingSink struct {
	mu      sync.Mutex
	ctxErrs []error
}

func (s *failingSink) Publish(ctx context.Context, ev *events.Attempt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	return ErrSinkClosed
}

func TestDoSinkErrorNeverReplacesTheResult(t *testing.T) {
	sink := &failingSink{}
	var logs testkit.Logs
	var hooked []string
	h := newHarness(t, func(o *Options) {
		o.Sink = sink
		o.Logger = logs.TextLogger(slog.LevelInfo)
		o.OnSinkError = func(ev *events.Attempt, err error) {
			assert.ErrorIs(t, err, ErrSinkClosed)
			hooked = append(hooked, ev.EventID)
		}
	})
	s := &scripted{steps: []step{{err: statusErr(503, 0)}, {}}}
	got, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	assert.Equal(t, "ok-1", got)
	st := h.m.Stats()
	assert.Equal(t, uint64(2), st.SinkErrors)
	assert.Equal(t, uint64(0), st.Events)
	assert.Len(t, hooked, 2)
	assert.Equal(t, 2, strings.Count(logs.String(), "attempt event lost"))
	assert.Contains(t, logs.String(), "request_id=")
	assert.Contains(t, logs.String(), hooked[1])
}

func TestDoSinkGetsUncanceledContext(t *testing.T) {
	sink := &failingSink{}
	h := newHarness(t, func(o *Options) { o.Sink = sink })
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Do(ctx, h.m, testCall, func(ctx context.Context, a Attempt) (int, Report, error) {
		cancel()
		return 0, Report{}, ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Len(t, sink.ctxErrs, 1)
	assert.NoError(t, sink.ctxErrs[0], "the final event of a canceled call is still handed over")
}

func TestDoFnPanics(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Policy.MaxRetries = 0 })
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = Do(context.Background(), h.m, testCall, func(context.Context, Attempt) (int, Report, error) {
			panic("boom")
		})
	})
	evs := h.sink.Events()
	require.Len(t, evs, 1)
	requireCallEvents(t, evs, testCall)
	assert.Equal(t, events.KindOther, evs[0].Error.Kind)
	assert.Contains(t, evs[0].Error.Message, "panicked")
}

// TestDoConcurrent runs many calls at once against one middleware: under
// -race, and every call ends with exactly one final event.
func TestDoConcurrent(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Rand = LockedRand(1, 2)
		o.Breakers = mustGroup(t, breaker.Config{FailureThreshold: 1 << 20})
	})
	const goroutines, perG = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				fails := (g + i) % 4 // 0..3 failures; 3 exhausts the policy
				var n atomic.Int64
				_, _ = Do(context.Background(), h.m, testCall, func(ctx context.Context, a Attempt) (int, Report, error) {
					if int(n.Add(1)) <= fails {
						return 0, Report{Usage: events.Usage{InputTokens: 1}}, statusErr(503, a.Number)
					}
					return a.Number, Report{Usage: events.Usage{InputTokens: 1}}, nil
				})
			}
		})
	}
	wg.Wait()
	byReq := map[string][]events.Attempt{}
	for _, ev := range h.sink.Events() {
		byReq[ev.RequestID] = append(byReq[ev.RequestID], ev)
	}
	require.Len(t, byReq, goroutines*perG)
	total := 0
	for _, evs := range byReq {
		requireCallEvents(t, evs, testCall)
		total += len(evs)
	}
	st := h.m.Stats()
	assert.Equal(t, uint64(goroutines*perG), st.Calls)
	assert.Equal(t, uint64(total), st.Events)
	assert.Equal(t, uint64(total), st.Attempts)
}

func mustGroup(t *testing.T, cfg breaker.Config) *breaker.Group {
	t.Helper()
	g, err := breaker.NewGroup(cfg)
	require.NoError(t, err)
	return g
}

// The service tier and the estimated input of a Report reach the
// attempt's event: the tier in the contract's form (lower case; one that
// breaks the rule is dropped, never the event), the estimate apart from
// the usage, within the contract's bounds.
func TestReportTierAndEstimateReachTheEvent(t *testing.T) {
	for _, tc := range []struct {
		name             string
		report           Report
		wantTier         string
		wantEstimated    int64
		wantUsageReasons int64
	}{
		{"tier and reasoning", Report{ServiceTier: "priority", Usage: events.Usage{InputTokens: 10, OutputTokens: 9, ReasoningTokens: 7}}, "priority", 0, 7},
		{"tier in capitals", Report{ServiceTier: "Flex"}, "flex", 0, 0},
		{"a tier that breaks the rule is dropped", Report{ServiceTier: strings.Repeat("x", events.MaxServiceTierLength+1)}, "", 0, 0},
		{"an estimate stays apart", Report{EstimatedInputTokens: 4096}, "", 4096, 0},
		{"a negative estimate is none", Report{EstimatedInputTokens: -3}, "", 0, 0},
		{"an estimate beyond the contract is cut", Report{EstimatedInputTokens: events.MaxTokens + 1}, "", events.MaxTokens, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			s := &scripted{clock: h.clock, steps: []step{{report: tc.report}}}
			_, err := Do(context.Background(), h.m, testCall, s.fn)
			require.NoError(t, err)
			evs := h.sink.Events()
			require.Len(t, evs, 1)
			ev := evs[0]
			assert.Equal(t, tc.wantTier, ev.ServiceTier)
			assert.Equal(t, tc.wantEstimated, ev.EstimatedInputTokens)
			assert.Equal(t, tc.wantUsageReasons, ev.Usage.ReasoningTokens)
			assert.Zero(t, ev.Usage.InputTokens-tc.report.Usage.InputTokens, "the estimate is never added to the usage")
			require.NoError(t, ev.Validate())
		})
	}
}
