package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
)

// Call names one logical model call (api.Call). Its IDs must follow
// events.IDRule; an account's guard is guard.AccountKey(Upstream,
// Account).
type Call = api.Call

// Attempt is what fn learns about the attempt it is asked to make
// (api.Attempt).
type Attempt = api.Attempt

// Report is what fn learned from the provider, on success and on error
// alike (api.Report).
type Report = api.Report

// Options configures a Middleware. Only Sink is required.
type Options struct {
	// Policy is the retry policy; the zero Policy selects DefaultPolicy.
	// Any other value must pass Policy.Validate.
	Policy Policy
	// Classifier recognises provider errors (normally a Chain of the
	// provider classifiers). Nil leaves only ClassifyTransport.
	Classifier Classifier
	// Sink receives the attempt events. Required.
	Sink Sink
	// Breakers holds the circuit breakers, one per upstream. Nil selects a
	// group with the breaker package's defaults and Clock's time. Ignored
	// when Guards is set.
	Breakers *breaker.Group
	// Guards holds the guards of each upstream: breaker, rate limits and
	// retry budget, local or shared by a fleet (package guard). Nil
	// selects guards with only the breakers of Breakers. Its clock should
	// be GuardClock(Clock).
	Guards *guard.Set
	// RateLimits returns the reader of a provider's rate-limit headers,
	// by the provider's name (retry.Call.Provider), or nil when it sends
	// none; the guards learn the limits it reads. Nil selects the
	// registered providers' (RegisterRateLimits).
	RateLimits func(provider string) guard.RateLimitParser
	// Clock is the source of time; nil selects SystemClock.
	Clock Clock
	// Rand returns the random values of the jitter, uniform in [0, 1). It
	// must be safe for concurrent use (see LockedRand). Nil selects
	// math/rand/v2's Float64.
	Rand func() float64
	// NewID makes request and event IDs. It must be safe for concurrent
	// use and return canonical (upper-case) ULIDs, which the contract
	// requires of event_id; New calls it once to check. Nil selects ULIDs
	// stamped with Clock's time, monotonic within a millisecond.
	NewID func() string
	// Logger receives a record for every event the Sink refused, and a
	// warning (once) when an SDK retries on its own within an attempt.
	// Nil discards them (refused events are still counted in
	// Stats.SinkErrors).
	Logger *slog.Logger
	// OnSinkError, when set, is called for every event the Sink refused,
	// on the caller's goroutine. It must be quick and must not retain ev.
	OnSinkError func(ev *events.Attempt, err error)
	// TracerProvider and MeterProvider, when either is set, turn on the
	// OpenTelemetry GenAI instrumentation (telemetry.go,
	// docs/telemetry.md): a span per call and per attempt, and the
	// gen_ai.client.token.usage and gen_ai.client.operation.duration
	// histograms. The one not set is a no-op. Both nil: off, at the cost
	// of a nil check.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Labels are the default labels of every call: each attempt's event
	// carries them merged with Call.Labels, a key of the call's winning.
	// They must pass events.ValidateLabels.
	Labels api.Labels
}

// Stats are the middleware's counters since New (api.MiddlewareStats).
type Stats = api.MiddlewareStats

// Middleware runs calls under a retry policy, a circuit breaker per
// upstream and an event sink. Create it with New; it is safe for
// concurrent use and owns no goroutines.
type Middleware struct {
	policy      Policy
	classifier  Classifier
	sink        Sink
	guards      guardCache
	clock       Clock
	rand        func() float64
	newID       func() string // nil: ulids
	ulids       *ulidSource
	logger      *slog.Logger
	onSinkError func(*events.Attempt, error)
	rateLimits  func(provider string) guard.RateLimitParser
	tel         *telemetry // nil: off
	labels      api.Labels // the defaults, a copy of Options.Labels

	sdkRetryWarned atomic.Bool // an SDK's own retry was logged

	calls, attempts, retries, rejections, waits, published, sinkErrors, panics atomic.Uint64
}

// New returns a Middleware for opts. It returns an *OptionsError (wrapping
// ErrInvalidOptions, and the *PolicyError for a bad Policy) when opts are
// invalid.
func New(opts Options) (*Middleware, error) {
	if opts.Sink == nil {
		return nil, &OptionsError{Field: "Sink", Rule: "is nil; it is required"}
	}
	if opts.Policy == (Policy{}) {
		opts.Policy = DefaultPolicy()
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, &OptionsError{Field: "Policy", Rule: "is invalid", Err: err}
	}
	if err := events.ValidateLabels(opts.Labels); err != nil {
		return nil, &OptionsError{Field: "Labels", Rule: "are invalid", Err: err}
	}
	m := &Middleware{
		policy:      opts.Policy,
		classifier:  opts.Classifier,
		sink:        opts.Sink,
		clock:       opts.Clock,
		rand:        opts.Rand,
		newID:       opts.NewID,
		logger:      opts.Logger,
		onSinkError: opts.OnSinkError,
		rateLimits:  opts.RateLimits,
		labels:      opts.Labels.Merge(nil),
	}
	if m.rateLimits == nil {
		m.rateLimits = registeredRateLimits
	}
	if m.clock == nil {
		m.clock = SystemClock
	}
	if m.rand == nil {
		m.rand = rand.Float64
	}
	if m.newID == nil {
		m.ulids = newULIDSource()
	} else if id := m.newID(); !canonicalULID(id) {
		return nil, &OptionsError{Field: "NewID", Rule: "returned " + strconv.Quote(Truncate(id)) +
			"; it must return canonical upper-case ULIDs (26 Crockford base32 characters)"}
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	gs := opts.Guards
	if gs == nil {
		g := opts.Breakers
		if g == nil {
			var err error
			g, err = breaker.NewGroup(breaker.Config{Now: monotonicNow(m.clock)})
			if err != nil {
				return nil, &OptionsError{Field: "Breakers", Rule: "could not be created", Err: err}
			}
		}
		gs = guard.FromBreakers(g, monotonicNow(m.clock))
	}
	m.guards = guardCache{set: gs, byKey: make(map[string]*guard.Guard)}
	tel, err := newTelemetry(opts.TracerProvider, opts.MeterProvider, m.clock)
	if err != nil {
		return nil, err
	}
	m.tel = tel
	return m, nil
}

// Policy returns the policy the middleware applies.
func (m *Middleware) Policy() Policy { return m.policy }

// Stats returns a snapshot of the counters.
func (m *Middleware) Stats() Stats {
	return Stats{
		Calls:      m.calls.Load(),
		Attempts:   m.attempts.Load(),
		Retries:    m.retries.Load(),
		Rejections: m.rejections.Load(),
		Waits:      m.waits.Load(),
		Events:     m.published.Load(),
		SinkErrors: m.sinkErrors.Load(),
		Panics:     m.panics.Load(),
	}
}

// Do runs fn, the attempts of one logical call, under m's policy, and
// returns the result of the first successful attempt or a *CallError.
//
// fn receives the attempt's context (the caller's, bounded by
// Policy.AttemptTimeout and, once fn reports a stream's Progress, by
// Policy.StreamIdleTimeout) and its Attempt, and returns its result,
// what it learned from the provider (on error too) and its error. Every
// attempt yields exactly one event, published before Do goes on; see the
// package documentation for when Do stops.
//
// An invalid call (session or request ID, provider, model, labels merged
// with the defaults) is refused with an *events.FieldError before any
// attempt and without any event (for labels it wraps the *api.LabelError
// that names the key and the rule); a nil
// ctx, m or fn with ErrInvalidCall.
//
// Panics. Whatever panics, the attempt still has exactly one event and its
// breaker permit is given back (reported as breaker.Ignore unless the
// attempt's outcome was known). Then:
//   - fn is the caller's code: its panic (or runtime.Goexit) goes on to
//     Do's caller unchanged, after the attempt is recorded as a final event
//     of kind other whose message carries the panic's value.
//   - A panic of the Classifier (or of fn's error's Error method, which it
//     calls) is recovered: the attempt is recorded as a final event of kind
//     other, not retryable, and Do returns a *CallError with Reason
//     StopPanicked whose Cause is a *PanicError (value and stack), so
//     errors.Is(err, ErrPanicked) holds; it is also logged.
//   - A panic of the Sink is recovered and treated as a refused event: the
//     call's result is unchanged (a success stays a success, so that the
//     caller does not pay for the call again), the *PanicError is counted
//     in Stats.SinkErrors, logged with its stack and passed to
//     Options.OnSinkError. The Sink was handed the event once and is not
//     handed it again.
//
// Every recovered panic is counted in Stats.Panics, fn's too.
func Do[T any](ctx context.Context, m *Middleware, call Call, fn func(ctx context.Context, a Attempt) (T, Report, error)) (T, error) {
	var zero T
	if ctx == nil || m == nil || fn == nil {
		return zero, ErrInvalidCall
	}
	r, err := m.begin(ctx, call)
	if err != nil {
		return zero, err
	}
	defer m.end(r)
	for n := 0; ; n++ {
		a, err := r.admit(n)
		if err != nil {
			return zero, err
		}
		v, rep, ferr := attempt(r, a, fn)
		wait, err := r.finish(a, rep, ferr)
		if ferr == nil {
			return v, nil
		}
		if err != nil {
			return zero, err
		}
		m.retries.Add(1)
		// If ctx ends during the wait, the next admit records it.
		_ = m.clock.Sleep(ctx, wait)
	}
}

// attempt calls fn once under the attempt's context. Should fn panic (or
// exit its goroutine), m.end records the attempt.
func attempt[T any](r *run, a Attempt, fn func(context.Context, Attempt) (T, Report, error)) (T, Report, error) {
	ctx, stop := r.m.newAttemptCtx(r.parent())
	defer stop()
	v, rep, err := fn(ctx, a)
	return v, rep, timedOut(ctx, err)
}

// run is the state of one call to Do. Runs are pooled; ev and aerr are
// reused for every attempt (the Sink must not retain them).
type run struct {
	m      *Middleware
	ctx    context.Context // the caller's
	pubCtx context.Context // ctx without its cancellation, for the sink
	call   Call
	g      *guard.Guard          // the upstream's: its breaker
	lg     *guard.Guard          // the account's (g without Call.Account): rate limits, holds, retry budget
	rl     guard.RateLimitParser // the provider's rate-limit headers; nil for none
	permit guard.Permit
	res    guard.Reservation // the capacity the attempt under way took

	probeWaited time.Duration // waited so far for the fleet's probe in flight

	tl       timeline  // the call's time; its start is attempt 0's
	eventID0 string    // attempt 0's event_id, when made with the request_id
	cur      Attempt   // the attempt under way
	started  time.Time // when it started
	attempts int       // calls to fn
	lastErr  error     // fn's last error

	// The attempt under way still holds its breaker permit (permitHeld)
	// and still owes its event (eventDue): both are settled exactly once,
	// by finish, or by end when the call unwinds from a panic.
	permitHeld, eventDue bool

	ev   events.Attempt
	aerr events.AttemptError

	tc callTelemetry // with telemetry on
}

var runPool = sync.Pool{New: func() any { return new(run) }}

// end ends the call of r and returns r to the pool; Do defers it. A call
// that ends with its attempt unsettled is unwinding from a panic or
// runtime.Goexit (every return settles it): the attempt is recorded and
// its permit given back, and then the panic goes on.
func (m *Middleware) end(r *run) {
	if !r.permitHeld && !r.eventDue {
		if m.tel != nil {
			r.endCall(m.tel, &r.ev)
		}
		m.release(r)
		return
	}
	v := recover() // nil for runtime.Goexit, which goes on by itself
	if v != nil {
		m.panics.Add(1)
	}
	r.abandon(v)
	if m.tel != nil {
		r.endCall(m.tel, &r.ev)
	}
	m.release(r)
	if v != nil {
		panic(v)
	}
}

// release returns r to the pool. Nothing may use r afterwards.
func (m *Middleware) release(r *run) {
	*r = run{}
	runPool.Put(r)
}

// begin validates the call and prepares its run.
func (m *Middleware) begin(ctx context.Context, call Call) (*run, error) {
	if err := events.ValidateID("session_id", call.SessionID); err != nil {
		return nil, err
	}
	if call.RequestID != "" {
		if err := events.ValidateID("request_id", call.RequestID); err != nil {
			return nil, err
		}
	}
	if err := checkText("provider", call.Provider, events.MaxProviderLength); err != nil {
		return nil, err
	}
	if err := checkText("model", call.Model, events.MaxModelLength); err != nil {
		return nil, err
	}
	if call.Account != "" {
		if err := checkText("account", call.Account, maxAccountLength); err != nil {
			return nil, err
		}
	}
	if err := m.checkFirstAttempt(call.FirstAttempt); err != nil {
		return nil, err
	}
	labels := m.labels // shared by the calls: never modified
	if len(call.Labels) != 0 {
		labels = m.labels.Merge(call.Labels)
		if err := events.ValidateLabels(labels); err != nil {
			return nil, err
		}
	}
	var tl timeline
	t0 := tl.begin(m.clock)
	var eventID0 string
	switch {
	case call.RequestID != "":
	case m.newID == nil:
		call.RequestID, eventID0 = m.ulids.makePair(t0)
	default:
		call.RequestID = m.newID()
		if err := events.ValidateID("request_id", call.RequestID); err != nil {
			return nil, err // Options.NewID breaks its contract
		}
	}
	r := runPool.Get().(*run)
	r.m, r.ctx, r.pubCtx, r.call = m, ctx, ctx, call
	r.g = m.guards.get(&call)
	r.lg = r.g
	r.rl = m.rateLimits(call.Provider)
	if call.Account != "" {
		r.lg = m.guards.set.Get(guard.AccountKey(r.g.Key(), call.Account))
	}
	r.tl, r.eventID0 = tl, eventID0
	if ctx.Done() != nil {
		r.pubCtx = context.WithoutCancel(ctx)
	}
	r.ev = events.Attempt{
		Schema:    events.SchemaV1,
		RequestID: call.RequestID,
		SessionID: call.SessionID,
		Provider:  call.Provider,
		Model:     call.Model,
		Labels:    labels,
	}
	if m.tel != nil {
		r.startCall(m.tel)
	}
	m.calls.Add(1)
	return r, nil
}

// maxAccountLength bounds Call.Account.
const maxAccountLength = 128

// checkText applies the contract's rule for provider and model.
func checkText(field, s string, max int) error {
	switch {
	case s == "" || len(s) > max:
		return fieldError(field, "is "+strconv.Itoa(len(s))+" bytes long; it must be 1 to "+strconv.Itoa(max))
	case !utf8.ValidString(s):
		return fieldError(field, "must be valid UTF-8")
	}
	return nil
}

// canonicalULID reports whether id is a ULID in the contract's form.
func canonicalULID(id string) bool {
	if len(id) != ulidLen {
		return false
	}
	if _, err := ulid.ParseStrict(id); err != nil {
		return false
	}
	return strings.ToUpper(id) == id
}

func (m *Middleware) makeID(t time.Time) string {
	if m.newID != nil {
		return m.newID()
	}
	return m.ulids.make(t)
}

// begins returns the time attempt n begins (attempt 0 begins with the call)
// and its event_id.
func (r *run) begins(n int) (time.Time, string) {
	if n == 0 {
		if r.eventID0 != "" {
			return r.tl.start, r.eventID0
		}
		return r.tl.start, r.m.makeID(r.tl.start)
	}
	t := r.tl.now()
	return t, r.m.makeID(t)
}

// admit gets attempt n under way: it checks the caller's context and the
// breaker, waits for rate-limit capacity (a wait is no attempt and has no
// event), and takes the breaker's permit. When one of them refuses, it
// records the final event and returns the call's error.
func (r *run) admit(n int) (Attempt, error) {
	m := r.m
	for {
		if r.ctx.Err() != nil {
			c, _ := ClassifyTransport(r.ctx, r.ctx.Err())
			return Attempt{}, r.reject(n, c, StopCanceled, context.Cause(r.ctx))
		}
		if err := r.g.Check(); err != nil {
			if r.waitProbe(err) {
				continue
			}
			return Attempt{}, r.rejectOpen(n, err)
		}
		res, wait, lerr := r.lg.Reserve()
		if wait > 0 {
			if err := r.waitFor(n, wait, lerr); err != nil {
				return Attempt{}, err
			}
			continue
		}
		p, err := r.g.Allow()
		if err != nil {
			r.lg.Settle(&res, guard.Outcome{}) // not made: the capacity goes back
			if r.waitProbe(err) {
				continue
			}
			return Attempt{}, r.rejectOpen(n, err)
		}
		r.permit, r.res, r.permitHeld = p, res, true
		break
	}
	if n == 0 {
		r.lg.First()
	}
	var eventID string
	r.started, eventID = r.begins(n)
	r.cur = Attempt{Number: r.call.FirstAttempt + n, RequestID: r.call.RequestID, SessionID: r.call.SessionID, EventID: eventID}
	if m.tel != nil {
		r.startAttempt(m.tel, r.cur.Number, eventID, r.started)
	}
	r.eventDue = true
	r.attempts++
	m.attempts.Add(1)
	return r.cur, nil
}

// done reports the attempt under way to the breaker and settles its
// reservation, once.
func (r *run) done(res breaker.Result, o guard.Outcome) {
	if r.permitHeld {
		r.permitHeld = false
		r.g.Done(r.permit, res)
		o.RateLimits = r.rl
		r.lg.Settle(&r.res, o)
	}
}

// breakerResult is what a failed attempt classified as c tells the
// breaker: a retryable failure counts against the upstream's health,
// except a rate limit, which says the caller exceeds its quota of a
// healthy upstream (the rate limiter's business: it holds the upstream
// until the hint); anything else says nothing about it.
func breakerResult(c *Classification) breaker.Result {
	if c.Retryable && c.Kind != events.KindRateLimit {
		return breaker.Failure
	}
	return breaker.Ignore
}

// ProbePoll is how often a call that waits for the fleet's probe looks
// for its verdict.
const ProbePoll = 10 * time.Millisecond

// waitProbe waits ProbePoll when err is the fleet's breaker refusing
// because its probe is in flight (guard.ProbeInFlight), and reports
// whether it did: such a call waits for the probe's verdict (a wait, no
// attempt, no event), at most Policy.HintCap in all and not past the
// caller's deadline, rather than fail on a breaker that is about to
// close. A wait the caller's context ends reports true: the caller
// checks the context next.
func (r *run) waitProbe(err error) bool {
	if !r.g.ProbeInFlight(err) {
		return false
	}
	m := r.m
	if r.probeWaited+ProbePoll > m.policy.HintCap {
		return false
	}
	if deadline, ok := r.ctx.Deadline(); ok && !r.tl.now().Add(ProbePoll).Before(deadline) {
		return false
	}
	r.probeWaited += ProbePoll
	_ = m.clock.Sleep(r.ctx, ProbePoll)
	return true
}

// rejectOpen records attempt n, which the breaker rejected with err.
func (r *run) rejectOpen(n int, err error) error {
	c := Classification{Kind: events.KindCircuitOpen, Message: Truncate(err.Error())}
	return r.reject(n, c, StopCircuitOpen, err)
}

// waitFor waits before attempt n until the rate limit lerr has capacity,
// wait from now, or, when the wait would pass the caller's deadline or
// Policy.HintCap, records attempt n as the call's final event (kind
// rate_limit, status 0, a message naming the limit) and returns the
// call's error. A wait the caller's context ends returns nil: the caller
// checks the context next.
func (r *run) waitFor(n int, wait time.Duration, lerr *guard.LimitError) error {
	m := r.m
	var why string
	switch deadline, ok := r.ctx.Deadline(); {
	case wait > m.policy.HintCap:
		why = "over the longest wait (" + m.policy.HintCap.String() + ")"
	case ok && !r.tl.now().Add(wait).Before(deadline):
		why = "past the caller's deadline"
	}
	if why != "" {
		var cause error = guard.ErrRateLimited
		msg := "rate limited"
		if lerr != nil {
			cause, msg = lerr, lerr.Error()
		}
		c := Classification{Kind: events.KindRateLimit, Message: Truncate(msg + ": capacity in " + wait.String() + ", " + why)}
		return r.reject(n, c, StopRateLimit, cause)
	}
	m.waits.Add(1)
	_ = m.clock.Sleep(r.ctx, wait)
	return nil
}

// reject records attempt n, which was not made, as the call's final event
// and returns the call's error.
func (r *run) reject(n int, c Classification, reason StopReason, cause error) error {
	r.m.rejections.Add(1)
	r.tc.stop = reason
	now, eventID := r.begins(n)
	r.record(r.call.FirstAttempt+n, eventID, now, now, Report{}, &c, true)
	return &CallError{
		RequestID:      r.call.RequestID,
		Attempts:       r.attempts,
		Reason:         reason,
		Classification: c,
		Err:            r.lastErr,
		Cause:          cause,
	}
}

// finish records the attempt a, which returned rep and err, and reports it
// to the breaker. For a failure it decides whether the call goes on: it
// returns the wait before the next attempt, or the call's error when err
// ends the call.
func (r *run) finish(a Attempt, rep Report, err error) (time.Duration, error) {
	m := r.m
	now := r.tl.now()
	if err == nil {
		r.done(breaker.Success, guard.Outcome{Made: true, Success: true, Usage: rep.Usage, Header: rep.Header})
		r.record(a.Number, a.EventID, r.started, now, rep, nil, true)
		return 0, nil
	}
	r.lastErr = err
	c, perr := m.classifySafely(r.ctx, err, now)
	o := guard.Outcome{Made: true, Usage: rep.Usage, Header: c.Header, Hint: c.Hint, HasHint: c.HasHint,
		RateLimited: c.Kind == events.KindRateLimit && c.Status == http.StatusTooManyRequests}
	if o.Header == nil {
		o.Header = rep.Header
	}
	r.done(breakerResult(&c), o)
	wait, reason, cause := r.next(a.Number-r.call.FirstAttempt, &c, now)
	if perr != nil {
		wait, reason, cause = 0, StopPanicked, perr
	}
	r.tc.stop, r.tc.wait = reason, wait
	r.record(a.Number, a.EventID, r.started, now, rep, &c, reason != "")
	if reason == "" {
		return wait, nil
	}
	return 0, &CallError{
		RequestID:      r.call.RequestID,
		Attempts:       r.attempts,
		Reason:         reason,
		Classification: c,
		Err:            err,
		Cause:          cause,
	}
}

// abandon settles the attempt under way, which a panic with value v (nil:
// runtime.Goexit) interrupted: its permit is given back and, unless its
// event was already handed over, it is recorded as the call's final event.
func (r *run) abandon(v any) {
	r.done(breaker.Ignore, guard.Outcome{Made: true})
	if !r.eventDue {
		return
	}
	msg := "attempt abandoned: the goroutine exited (runtime.Goexit)"
	if v != nil {
		msg = "attempt abandoned: panicked: " + fmt.Sprint(v)
	}
	c := Classification{Kind: events.KindOther, Message: Truncate(msg)}
	r.record(r.cur.Number, r.cur.EventID, r.started, r.tl.now(), Report{}, &c, true)
}

// next decides what follows a failed attempt classified as c at now, the
// n-th of this Do (0 for its first, whatever Call.FirstAttempt is): the
// wait before the next attempt, or the reason the call stops ("" when it
// goes on) and, when the retry budget stops it, the budget's error, whose
// text is added to c's message.
func (r *run) next(n int, c *Classification, now time.Time) (time.Duration, StopReason, error) {
	m := r.m
	switch {
	case c.Kind == events.KindCanceled:
		return 0, StopCanceled, nil
	case !c.Retryable:
		return 0, StopNonRetryable, nil
	case n >= m.policy.MaxRetries:
		return 0, StopExhausted, nil
	}
	var wait time.Duration
	if c.HasHint {
		if c.Hint > m.policy.HintCap {
			return 0, StopHintOverCap, nil
		}
		wait = c.Hint
	} else {
		rnd := 0.5
		if m.policy.Jitter > 0 {
			rnd = m.rand()
		}
		wait = Delay(m.policy, n, rnd)
	}
	if deadline, ok := r.ctx.Deadline(); ok && !now.Add(wait).Before(deadline) {
		return 0, StopDeadline, nil
	}
	// A retry after a 429 is not the budget's: with rate limits on, it
	// waits for the upstream's hold and capacity, which keep the fleet
	// under the limit; the budget bounds the retries of failures, which
	// add to an unhealthy upstream's load.
	if c.Kind == events.KindRateLimit && r.lg.PacesRateLimits() {
		return wait, "", nil
	}
	if err := r.lg.Retry(); err != nil {
		c.Message = Truncate(c.Message + "; not retried: " + err.Error())
		return 0, StopBudget, err
	}
	return wait, "", nil
}

// classifySafely is classify with its panics contained: a panic (of the
// Classifier, or of err's Error method) makes the attempt KindOther, not
// retryable, and is returned as a *PanicError and logged.
func (m *Middleware) classifySafely(ctx context.Context, err error, now time.Time) (c Classification, perr *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			m.panics.Add(1)
			perr = newPanicError("classifier", v)
			c = Classification{Kind: events.KindOther, Message: Truncate(perr.Error())}
			m.logger.LogAttrs(ctx, slog.LevelError, "retry: classifier panicked; the call ends",
				slog.Any("panic", v), slog.String("stack", string(perr.Stack)))
		}
	}()
	return m.classify(ctx, err, now), nil
}

// classify gives the classification of err, the error of an attempt that
// ended at now. The caller's context being done wins over everything but
// a Settled error; then m's classifier, then ClassifyTransport; anything
// else is KindOther and not retryable.
func (m *Middleware) classify(ctx context.Context, err error, now time.Time) Classification {
	if ctx.Err() != nil && !settled(err) {
		c, _ := ClassifyTransport(ctx, err)
		return c
	}
	var (
		c  Classification
		ok bool
	)
	if m.classifier != nil {
		c, ok = m.classifier.Classify(err, now)
	}
	if !ok {
		c, ok = ClassifyTransport(ctx, err)
	}
	if !ok {
		c = Classification{Kind: events.KindOther}
	}
	switch c.Kind {
	case events.KindCanceled, events.KindCircuitOpen:
		c.Retryable = false
	default:
		if !c.Kind.Valid() {
			c.Kind = events.KindOther
		}
	}
	if c.Status != 0 && (c.Status < 100 || c.Status > 599) {
		c.Status = 0 // the contract knows no other
	}
	if c.HasHint && c.Hint < 0 {
		c.Hint, c.HasHint = 0, false
	}
	if c.Message == "" {
		c.Message = err.Error()
	}
	c.Message = Truncate(c.Message)
	return c
}

// record fills the call's event for attempt n and hands it to the sink. c
// is nil for a success.
func (r *run) record(n int, eventID string, started, finished time.Time, rep Report, c *Classification, final bool) {
	r.eventDue = false // handed over once, even if the sink panics
	ev := &r.ev
	ev.EventID = eventID
	ev.Attempt = n
	ev.Final = final
	ev.Usage = rep.Usage
	ev.StartedAt = started
	ev.FinishedAt = finished
	ev.ProviderRequestID = rep.ProviderRequestID
	ev.ServiceTier = events.ServiceTier(rep.ServiceTier)
	ev.EstimatedInputTokens = min(max(rep.EstimatedInputTokens, 0), events.MaxTokens)
	if c == nil {
		ev.Outcome = events.OutcomeSuccess
		ev.Error = nil
	} else {
		ev.Outcome = events.OutcomeError
		if ev.ProviderRequestID == "" {
			ev.ProviderRequestID = c.ProviderRequestID
		}
		r.aerr = events.AttemptError{Kind: c.Kind, Status: c.Status, Retryable: c.Retryable, Message: c.Message}
		ev.Error = &r.aerr
	}
	ev.ProviderRequestID = truncateTo(ev.ProviderRequestID, events.MaxProviderReqID)
	if r.m.tel != nil {
		r.endAttempt(r.m.tel, ev, c, final)
	}
	r.m.publish(r.pubCtx, ev)
}

// publish hands ev to the sink; a refusal (a panic included) is counted,
// logged and passed to OnSinkError, and never changes the call's result.
func (m *Middleware) publish(ctx context.Context, ev *events.Attempt) {
	err := m.publishSafely(ctx, ev)
	if err == nil {
		m.published.Add(1)
		return
	}
	m.sinkErrors.Add(1)
	attrs := []slog.Attr{
		slog.String("request_id", ev.RequestID),
		slog.String("session_id", ev.SessionID),
		slog.String("event_id", ev.EventID),
		slog.Int("attempt", ev.Attempt),
		slog.Bool("final", ev.Final),
		slog.Any("error", err),
	}
	if pe, ok := err.(*PanicError); ok {
		attrs = append(attrs, slog.String("stack", string(pe.Stack)))
	}
	m.logger.LogAttrs(ctx, slog.LevelError, "retry: attempt event lost: the sink refused it", attrs...)
	if m.onSinkError != nil {
		m.onSinkError(ev, err)
	}
}

// publishSafely calls the sink, turning its panic into a *PanicError.
func (m *Middleware) publishSafely(ctx context.Context, ev *events.Attempt) (err error) {
	defer func() {
		if v := recover(); v != nil {
			m.panics.Add(1)
			err = newPanicError("sink", v)
		}
	}()
	return m.sink.Publish(ctx, ev)
}

// guardCache finds the guard of a call's upstream without building the
// key Provider+"/"+Model on every call.
type guardCache struct {
	set *guard.Set

	mu    sync.RWMutex
	byKey map[string]*guard.Guard // by the default key
}

// get returns the guard of call, whose Provider and Model are valid.
func (c *guardCache) get(call *Call) *guard.Guard {
	if call.Upstream != "" {
		return c.set.Get(call.Upstream)
	}
	var buf [events.MaxProviderLength + 1 + events.MaxModelLength]byte
	k := append(append(append(buf[:0], call.Provider...), '/'), call.Model...)
	c.mu.RLock()
	g := c.byKey[string(k)] // no allocation: the compiler converts in place
	c.mu.RUnlock()
	if g != nil {
		return g
	}
	key := string(k)
	g = c.set.Get(key)
	c.mu.Lock()
	c.byKey[key] = g
	c.mu.Unlock()
	return g
}

// Guards returns the middleware's guards.
func (m *Middleware) Guards() *guard.Set { return m.guards.set }

// Settled is implemented by an attempt's error that the upstream decided
// before the caller left: a proxy that relayed the upstream's error event
// to its client, which then closed at once, as the SDKs do. Such an error
// is classified as it is, not as the caller's cancellation, so that the
// ledger and the breaker see the upstream's failure.
type Settled interface {
	Settled() bool
}

// settled reports whether err, or an error it wraps, is Settled.
func settled(err error) bool {
	var s Settled
	return errors.As(err, &s) && s.Settled()
}
