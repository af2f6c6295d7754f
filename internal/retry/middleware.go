package retry

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// Call names one logical model call.
type Call struct {
	// SessionID is the caller's session; it must follow events.IDRule.
	SessionID string
	// RequestID is the call's stable ID, shared by all its attempts. Empty
	// means a new ULID; otherwise it must follow events.IDRule.
	RequestID string
	// Provider and Model name the upstream, as written into the events;
	// both are required (at most events.MaxProviderLength and
	// events.MaxModelLength bytes).
	Provider, Model string
	// Upstream is the key of the call's circuit breaker; empty means
	// Provider+"/"+Model.
	Upstream string
	// FirstAttempt is the attempt number of the call's first attempt; the
	// attempts of this Do are numbered from it. It is 0 for a new call;
	// a caller that continues a request whose earlier attempts were made
	// (and published) elsewhere passes the first number not yet used, so
	// that no two events of the request share an attempt number. The
	// policy's MaxRetries still counts from this Do's first attempt, so
	// FirstAttempt + MaxRetries must not exceed events.MaxAttempt.
	FirstAttempt int
}

// Attempt is what fn learns about the attempt it is asked to make.
type Attempt struct {
	Number    int    // 0 for the first attempt
	RequestID string // the call's request_id, the same for every attempt
	SessionID string
	EventID   string // the event_id of this attempt's event
}

// Report is what fn learned from the provider, on success and on error
// alike: a provider may bill a failed attempt, and the usage lands in that
// attempt's event.
type Report struct {
	Usage             events.Usage
	ProviderRequestID string // the provider's request-id; overrides the classifier's
}

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
	// group with the breaker package's defaults and Clock's time.
	Breakers *breaker.Group
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
	// Logger receives a record for every event the Sink refused. Nil
	// discards them (they are still counted in Stats.SinkErrors).
	Logger *slog.Logger
	// OnSinkError, when set, is called for every event the Sink refused,
	// on the caller's goroutine. It must be quick and must not retain ev.
	OnSinkError func(ev *events.Attempt, err error)
}

// Stats are the middleware's counters since New.
type Stats struct {
	Calls      uint64 // calls to Do that passed validation
	Attempts   uint64 // calls to fn
	Retries    uint64 // waits before another attempt
	Rejections uint64 // attempts not made: breaker open or caller's context done
	Events     uint64 // events the Sink accepted
	SinkErrors uint64 // events the Sink refused (a panic of the Sink included)
	Panics     uint64 // panics of fn, the Classifier or the Sink during a call
}

// Middleware runs calls under a retry policy, a circuit breaker per
// upstream and an event sink. Create it with New; it is safe for
// concurrent use and owns no goroutines.
type Middleware struct {
	policy      Policy
	classifier  Classifier
	sink        Sink
	breakers    breakerCache
	clock       Clock
	rand        func() float64
	newID       func() string // nil: ulids
	ulids       *ulidSource
	logger      *slog.Logger
	onSinkError func(*events.Attempt, error)

	calls, attempts, retries, rejections, published, sinkErrors, panics atomic.Uint64
}

// New returns a Middleware for opts. It returns an *OptionsError (wrapping
// ErrInvalidOptions, and the *PolicyError for a bad Policy) when opts are
// invalid.
func New(opts Options) (*Middleware, error) {
	if opts.Sink == nil {
		return nil, &OptionsError{Field: "Sink", Rule: "is nil; it is required"}
	}
	if opts.Policy.isZero() {
		opts.Policy = DefaultPolicy()
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, &OptionsError{Field: "Policy", Rule: "is invalid", Err: err}
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
	g := opts.Breakers
	if g == nil {
		var err error
		g, err = breaker.NewGroup(breaker.Config{Now: monotonicNow(m.clock)})
		if err != nil {
			return nil, &OptionsError{Field: "Breakers", Rule: "could not be created", Err: err}
		}
	}
	m.breakers = breakerCache{group: g, byKey: make(map[string]*breaker.Breaker)}
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
		Events:     m.published.Load(),
		SinkErrors: m.sinkErrors.Load(),
		Panics:     m.panics.Load(),
	}
}

// Do runs fn, the attempts of one logical call, under m's policy, and
// returns the result of the first successful attempt or a *CallError.
//
// fn receives the attempt's context (the caller's, bounded by
// Policy.AttemptTimeout when set) and its Attempt, and returns its result,
// what it learned from the provider (on error too) and its error. Every
// attempt yields exactly one event, published before Do goes on; see the
// package documentation for when Do stops.
//
// An invalid call (session or request ID, provider, model) is refused with
// an *events.FieldError before any attempt and without any event; a nil
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
	ctx := r.ctx
	if r.m.policy.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.m.policy.AttemptTimeout)
		defer cancel()
	}
	return fn(ctx, a)
}

// run is the state of one call to Do. Runs are pooled; ev and aerr are
// reused for every attempt (the Sink must not retain them).
type run struct {
	m      *Middleware
	ctx    context.Context // the caller's
	pubCtx context.Context // ctx without its cancellation, for the sink
	call   Call
	br     *breaker.Breaker
	permit breaker.Permit

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
}

var runPool = sync.Pool{New: func() any { return new(run) }}

// end ends the call of r and returns r to the pool; Do defers it. A call
// that ends with its attempt unsettled is unwinding from a panic or
// runtime.Goexit (every return settles it): the attempt is recorded and
// its permit given back, and then the panic goes on.
func (m *Middleware) end(r *run) {
	if !r.permitHeld && !r.eventDue {
		m.release(r)
		return
	}
	v := recover() // nil for runtime.Goexit, which goes on by itself
	if v != nil {
		m.panics.Add(1)
	}
	r.abandon(v)
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
	if err := m.checkFirstAttempt(call.FirstAttempt); err != nil {
		return nil, err
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
	r.br = m.breakers.get(&call)
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
	}
	m.calls.Add(1)
	return r, nil
}

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
// breaker and, when either refuses, records the final event and returns the
// call's error.
func (r *run) admit(n int) (Attempt, error) {
	m := r.m
	if r.ctx.Err() != nil {
		c, _ := ClassifyTransport(r.ctx, r.ctx.Err())
		return Attempt{}, r.reject(n, c, StopCanceled, context.Cause(r.ctx))
	}
	p, err := r.br.Allow()
	if err != nil {
		c := Classification{Kind: events.KindCircuitOpen, Message: Truncate(err.Error())}
		return Attempt{}, r.reject(n, c, StopCircuitOpen, err)
	}
	r.permit, r.permitHeld = p, true
	var eventID string
	r.started, eventID = r.begins(n)
	r.cur = Attempt{Number: r.call.FirstAttempt + n, RequestID: r.call.RequestID, SessionID: r.call.SessionID, EventID: eventID}
	r.eventDue = true
	r.attempts++
	m.attempts.Add(1)
	return r.cur, nil
}

// done reports the attempt under way to the breaker, once.
func (r *run) done(res breaker.Result) {
	if r.permitHeld {
		r.permitHeld = false
		r.br.Done(r.permit, res)
	}
}

// reject records attempt n, which was not made, as the call's final event
// and returns the call's error.
func (r *run) reject(n int, c Classification, reason StopReason, cause error) error {
	r.m.rejections.Add(1)
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
		r.done(breaker.Success)
		r.record(a.Number, a.EventID, r.started, now, rep, nil, true)
		return 0, nil
	}
	r.lastErr = err
	c, perr := m.classifySafely(r.ctx, err, now)
	if c.Retryable {
		r.done(breaker.Failure)
	} else {
		r.done(breaker.Ignore)
	}
	wait, reason := m.next(r.ctx, a.Number-r.call.FirstAttempt, c, now)
	var cause error
	if perr != nil {
		wait, reason, cause = 0, StopPanicked, perr
	}
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
	r.done(breaker.Ignore)
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
// goes on).
func (m *Middleware) next(ctx context.Context, n int, c Classification, now time.Time) (time.Duration, StopReason) {
	switch {
	case c.Kind == events.KindCanceled:
		return 0, StopCanceled
	case !c.Retryable:
		return 0, StopNonRetryable
	case n >= m.policy.MaxRetries:
		return 0, StopExhausted
	}
	var wait time.Duration
	if c.HasHint {
		if c.Hint > m.policy.HintCap {
			return 0, StopHintOverCap
		}
		wait = c.Hint
	} else {
		r := 0.5
		if m.policy.Jitter > 0 {
			r = m.rand()
		}
		wait = Delay(m.policy, n, r)
	}
	if deadline, ok := ctx.Deadline(); ok && !now.Add(wait).Before(deadline) {
		return 0, StopDeadline
	}
	return wait, ""
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
// ended at now. The caller's context being done wins over everything;
// then m's classifier, then ClassifyTransport; anything else is KindOther
// and not retryable.
func (m *Middleware) classify(ctx context.Context, err error, now time.Time) Classification {
	if ctx.Err() != nil {
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

// breakerCache finds the breaker of a call's upstream without building the
// key Provider+"/"+Model on every call.
type breakerCache struct {
	group *breaker.Group

	mu    sync.RWMutex
	byKey map[string]*breaker.Breaker // by the default key
}

// get returns the breaker of call, whose Provider and Model are valid.
func (c *breakerCache) get(call *Call) *breaker.Breaker {
	if call.Upstream != "" {
		return c.group.Get(call.Upstream)
	}
	var buf [events.MaxProviderLength + 1 + events.MaxModelLength]byte
	k := append(append(append(buf[:0], call.Provider...), '/'), call.Model...)
	c.mu.RLock()
	b := c.byKey[string(k)] // no allocation: the compiler converts in place
	c.mu.RUnlock()
	if b != nil {
		return b
	}
	key := string(k)
	b = c.group.Get(key)
	c.mu.Lock()
	c.byKey[key] = b
	c.mu.Unlock()
	return b
}
