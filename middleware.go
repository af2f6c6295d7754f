package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// Defaults of DefaultPolicy and of the circuit breakers.
const (
	DefaultMaxRetries = api.DefaultMaxRetries // 2
	DefaultBaseDelay  = api.DefaultBaseDelay  // 1 s
	DefaultMaxDelay   = api.DefaultMaxDelay   // 30 s
	DefaultJitter     = api.DefaultJitter     // 0.2
	DefaultHintCap    = api.DefaultHintCap    // 60 s
	// DefaultAttemptTimeout bounds an attempt until its answer (a
	// stream's first progress), DefaultStreamIdleTimeout a stream's
	// silence after that: the gateway's defaults.
	DefaultAttemptTimeout    = api.DefaultAttemptTimeout    // 10 min
	DefaultStreamIdleTimeout = api.DefaultStreamIdleTimeout // 5 min
	DefaultFailureThreshold  = 5
	DefaultCooldown          = 30 * time.Second
)

var (
	// ErrInvalidCall is wrapped by the error Do returns, before any attempt
	// and without any event, for a call it cannot make: a session or
	// request ID, provider, model or labels that break the contract's
	// rules (the message names the field and the rule; for labels the error
	// also matches *LabelError), or a nil context, middleware or function.
	ErrInvalidCall = errors.New("ledger: invalid call")
	// ErrCircuitOpen is matched (errors.Is) by the error of a call that an
	// upstream's open circuit breaker rejected.
	ErrCircuitOpen = errors.New("ledger: circuit open")
	// ErrPanicked is matched by the error of a call whose Classifier
	// panicked (the attempt is recorded; the call ends).
	ErrPanicked = errors.New("ledger: classifier panicked")
)

// Policy says how often and how patiently a call is retried. Start from
// DefaultPolicy and change what you need; NewMiddleware refuses
// meaningless values (Policy.Validate; the zero Policy selects
// DefaultPolicy). Its fields:
//
//   - MaxRetries: how many attempts may follow the first one (0 to 1000).
//   - BaseDelay: the wait before the first retry, before jitter; it
//     doubles for each retry. It must be positive.
//   - MaxDelay caps every computed wait. It must be at least BaseDelay.
//   - Jitter spreads each wait by a factor uniform in [1-Jitter,
//     1+Jitter]; from 0 (none) to 1.
//   - HintCap: the longest server hint (Retry-After) honoured; a longer
//     one ends the call at once instead of waiting. It must be positive.
//   - AttemptTimeout bounds each attempt until its answer: the whole
//     attempt of a call that does not stream, the wait for the first
//     Progress of a stream (its first-byte timeout). 0 means none. Its
//     expiry is retried; the caller's own deadline is not.
//   - StreamIdleTimeout bounds a stream's silence after its first
//     Progress: each report gives it this much more. 0 means none, and
//     then the attempt timeout bounds the whole stream. Its expiry is
//     retried like the attempt timeout's.
type Policy = api.Policy

// DefaultPolicy returns 2 retries (3 attempts), a 1 s base delay doubling
// per retry with ±20 % jitter, capped at 30 s, server hints honoured up to
// 60 s, an attempt timeout (a stream's first-byte timeout) of 10 min and
// a stream idle timeout of 5 min, as the gateway's.
func DefaultPolicy() Policy { return api.DefaultPolicy() }

// Call names one logical model call:
//
//   - SessionID: the caller's session, 1 to 128 bytes of ASCII letters,
//     digits, '-' and '_' (docs/contract.md).
//   - RequestID: the call's stable ID, shared by all its attempts; the
//     same rule as SessionID. Empty means a new ULID.
//   - Provider and Model name the upstream, as written into the events;
//     both are required.
//   - Upstream: the key of the call's circuit breaker (and, with
//     WithFleetLimits, of its rate limits and retry budget); empty means
//     Provider+"/"+Model.
//   - Account, when set, names the provider account the call is made
//     with (a digest of its API key, say): its rate limits, the holds
//     after its 429s and its retry budget are then kept apart from other
//     accounts' of the same upstream, while the circuit breaker stays the
//     upstream's, shared by all. At most 128 bytes; from a bounded set.
//   - FirstAttempt: the attempt number of the call's first attempt, 0 for
//     a new call. A caller that continues a request whose earlier
//     attempts were published elsewhere passes the first number not yet
//     used, so that no two events of the request share one (the contract
//     counts a second event for an attempt number as a duplicate, and a
//     billed attempt would be lost). The policy's MaxRetries counts from
//     this call's first attempt; FirstAttempt + MaxRetries must not
//     exceed 1000.
type Call = api.Call

// Attempt is what the call's function learns about the attempt it is
// asked to make: its Number (0 for the first), the call's RequestID (the
// same for every attempt) and SessionID, and the EventID of this
// attempt's event.
type Attempt = api.Attempt

// Report is what an attempt learned from the provider, on success and on
// error alike: its Usage, the provider's request-id (ProviderRequestID,
// which overrides the classifier's) and, optionally, the response's
// Header, whose rate-limit headers teach the fleet the upstream's limits
// (WithFleetLimits). A provider may bill a failed attempt (a stream that
// reported its input usage and then failed), and the usage lands in that
// attempt's event as billed.
type Report = api.Report

// StopReason says why a call ended without success.
type StopReason = api.StopReason

// The reasons a call ends without success.
const (
	StopNonRetryable = api.StopNonRetryable // "non_retryable"
	StopExhausted    = api.StopExhausted    // "retries_exhausted"
	StopHintOverCap  = api.StopHintOverCap  // "hint_over_cap"
	StopDeadline     = api.StopDeadline     // "deadline"
	StopCanceled     = api.StopCanceled     // "canceled"
	StopCircuitOpen  = api.StopCircuitOpen  // "circuit_open"
	StopPanicked     = api.StopPanicked     // "panicked"
	// StopRateLimit: the wait for rate-limit capacity would pass the
	// call's deadline (WithFleetLimits).
	StopRateLimit = api.StopRateLimit // "rate_limit"
	// StopBudget: the attempt failed and the upstream's retry budget was
	// spent (WithFleetLimits).
	StopBudget = api.StopBudget // "retry_budget"
)

// CallError is the error Do returns for a call that ended without
// success. It unwraps to Err, the last error the call's function returned
// (so errors.As on the SDK's error type works), and to Cause, what ended
// the call when it was not Err (the breaker's rejection, so that
// errors.Is(err, ErrCircuitOpen) holds; the caller's context error; a
// classifier's panic).
type CallError struct {
	RequestID string
	// Attempts is how many times the function was called.
	Attempts int
	// Reason says why the call ended.
	Reason StopReason
	// Classification is that of the attempt that ended the call.
	Classification Classification
	// Err is the last error the function returned; nil when it never
	// failed.
	Err error
	// Cause is what ended the call when it is not Err; otherwise nil.
	Cause error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("ledger: call %s ended (%s) after %d attempt(s): %v", e.RequestID, e.Reason, e.Attempts, errors.Join(e.Cause, e.Err))
}

// Is makes errors.Is(err, ErrCircuitOpen) true for a call an open
// circuit rejected, and errors.Is(err, ErrPanicked) for one whose
// classifier panicked.
func (e *CallError) Is(target error) bool {
	return target == ErrCircuitOpen && e.Reason == StopCircuitOpen || target == ErrPanicked && e.Reason == StopPanicked
}

// Unwrap returns Cause and Err, those that are set.
func (e *CallError) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Cause, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// MiddlewareStats are a middleware's counters since NewMiddleware: Calls
// (calls to Do that passed validation), Attempts (calls of the call's
// function), Retries (waits before another attempt), Rejections
// (attempts not made: breaker open, a rate limit past the deadline, the
// caller's context done), Waits (waits for rate-limit capacity before an
// attempt: not attempts, no events), Events and SinkErrors (events the
// publisher accepted and refused) and Panics (during a call).
type MiddlewareStats = api.MiddlewareStats

// Middleware runs calls under a retry policy, a circuit breaker per
// upstream, and a publisher of their attempt events. Create it with
// NewMiddleware; it is safe for concurrent use and starts no goroutines.
type Middleware struct {
	mw          *retry.Middleware
	classified  map[string]bool // the providers a classifier is for
	anyProvider bool            // a classifier is for every provider
	closeFleet  func()
	closeOnce   sync.Once
}

// MiddlewareOption configures NewMiddleware.
type MiddlewareOption func(*middlewareOptions) error

type middlewareOptions struct {
	policy      Policy
	classifiers classifierChain
	breaker     breaker.Config
	onChange    func(upstream, from, to string)
	log         *slog.Logger
	fleet       *fleetOption
	labels      Labels

	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
}

// WithPolicy sets the retry policy (default DefaultPolicy).
func WithPolicy(p Policy) MiddlewareOption {
	return func(o *middlewareOptions) error {
		if p != (Policy{}) {
			if err := p.Validate(); err != nil {
				if pe := (*api.PolicyError)(nil); errors.As(err, &pe) {
					return invalid("WithPolicy", "%s %s", pe.Field, pe.Rule)
				}
				return invalid("WithPolicy", "%v", err)
			}
		}
		o.policy = p
		return nil
	}
}

// WithClassifiers adds classifiers of provider errors, tried in order
// before the built-in ones. The middleware classifies the errors of the
// Anthropic, OpenAI and Gemini SDKs without this option, once the program
// imports their adapter packages; it is for other providers (ClassifierFor names the provider a classifier is for). A
// call to a provider that no classifier is for fails (ErrNoClassifier);
// a classifier given without a provider's name is taken to be for every
// provider. None may be nil.
func WithClassifiers(cs ...Classifier) MiddlewareOption {
	return func(o *middlewareOptions) error {
		for i, c := range cs {
			if c == nil {
				return invalid("WithClassifiers", "classifier %d is nil", i)
			}
			if pc, ok := c.(providerClassifier); ok && pc.c == nil {
				return invalid("WithClassifiers", "classifier %d (%s) is nil", i, pc.provider)
			}
		}
		o.classifiers = append(o.classifiers, cs...)
		return nil
	}
}

// BreakerConfig configures the circuit breaker of every upstream.
type BreakerConfig struct {
	// FailureThreshold is the number of consecutive retryable failures
	// that opens an upstream's circuit (default DefaultFailureThreshold).
	FailureThreshold int
	// Cooldown is how long a circuit stays open before one probe call is
	// admitted (default DefaultCooldown).
	Cooldown time.Duration
	// OnStateChange, when set, is told every change of an upstream's
	// circuit ("closed", "open", "half_open"). It runs on a caller's
	// goroutine and must be quick. With WithFleetLimits it is told the
	// changes of the fleet's breaker, whichever process made them (on the
	// goroutine that watches the fleet's state), and this process's own
	// only while it decides alone.
	OnStateChange func(upstream, from, to string)
}

// WithBreaker configures the circuit breakers (defaults: open after 5
// consecutive retryable failures, one probe after 30 s). Neither field may
// be negative.
func WithBreaker(c BreakerConfig) MiddlewareOption {
	return func(o *middlewareOptions) error {
		cfg := breaker.Config{FailureThreshold: c.FailureThreshold, Cooldown: c.Cooldown}
		if fn := c.OnStateChange; fn != nil {
			cfg.OnStateChange = func(key string, from, to breaker.State) { fn(key, from.String(), to.String()) }
		}
		if _, err := breaker.NewGroup(cfg); err != nil {
			return invalid("WithBreaker", "%v", err)
		}
		o.breaker, o.onChange = cfg, c.OnStateChange
		return nil
	}
}

// WithMiddlewareLogger sets the logger told about every event the
// publisher refused (they are also counted in MiddlewareStats.SinkErrors)
// and, once, about an SDK that retries on its own under the middleware
// (default slog.Default()).
func WithMiddlewareLogger(l *slog.Logger) MiddlewareOption {
	return func(o *middlewareOptions) error {
		if l == nil {
			return invalid("WithMiddlewareLogger", "logger must not be nil")
		}
		o.log = l
		return nil
	}
}

// WithLabels sets the default labels of every call: each attempt's event
// carries them merged with the Call's own labels (Call.Labels), a key set
// on the Call winning. They must follow the contract's rules (see
// Labels); the error wraps the *LabelError that names the key and the
// rule. The map is copied.
func WithLabels(l Labels) MiddlewareOption {
	return func(o *middlewareOptions) error {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("%w: WithLabels: %w", ErrInvalidOption, err)
		}
		o.labels = l.Merge(nil)
		return nil
	}
}

// NewMiddleware returns a middleware that publishes the event of every
// attempt with pub.
func NewMiddleware(pub *Publisher, opts ...MiddlewareOption) (*Middleware, error) {
	if pub == nil {
		return nil, invalid("NewMiddleware", "publisher must not be nil")
	}
	var o middlewareOptions
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("NewMiddleware", "nil option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.policy == (Policy{}) {
		o.policy = DefaultPolicy()
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	ro := retry.Options{Policy: o.policy, Sink: pub.p, Logger: o.log, Labels: o.labels}
	ro.TracerProvider, ro.MeterProvider = retry.LibraryProviders(o.tracerProvider, o.meterProvider)
	m := &Middleware{closeFleet: func() {}}
	ro.Classifier, m.classified, m.anyProvider = o.classifiers.withBuiltins()
	if o.fleet != nil {
		b := o.breaker
		b.OnStateChange = nil // the fleet's guards tell o.onChange
		gs, closeFleet, err := o.fleet.guards(b, o.policy.AttemptTimeout, o.onChange)
		if err != nil {
			return nil, err
		}
		ro.Guards, m.closeFleet = gs, closeFleet
	} else {
		group, err := breaker.NewGroup(o.breaker)
		if err != nil {
			return nil, invalid("WithBreaker", "%v", err)
		}
		ro.Breakers = group
	}
	mw, err := retry.New(ro)
	if err != nil {
		m.closeFleet()
		return nil, invalid("NewMiddleware", "%v", err)
	}
	m.mw = mw
	return m, nil
}

// Close releases what the middleware holds: with WithFleetLimits, its
// part in the fleet's shared state. It first writes what this process
// owes the fleet (a probe's result, failure counts, first attempts; a
// probe still under way is given up, so that another process probes at
// once), then stops the watcher and the heartbeat. Calls made after Close
// decide with this process's state alone. It is safe to call more than
// once; without WithFleetLimits it does nothing.
func (m *Middleware) Close() { m.closeOnce.Do(m.closeFleet) }

// BreakerState is the state of the circuit breaker of upstream (a Call's
// Upstream, by default provider/model): "closed", "open" or "half_open"
// (a probe in flight). With WithFleetLimits it is the fleet's breaker,
// whichever process opened it (this process's own while it decides
// alone).
func (m *Middleware) BreakerState(upstream string) string {
	return m.mw.Guards().Get(upstream).BreakerState().String()
}

// Stats returns a snapshot of the middleware's counters.
func (m *Middleware) Stats() MiddlewareStats { return m.mw.Stats() }

// Do runs fn, the attempts of one logical call, under m's policy and
// returns the result of the first successful attempt, or a *CallError.
//
// fn receives the attempt's context (ctx, bounded by
// Policy.AttemptTimeout and, once fn reports a stream's Progress, by
// Policy.StreamIdleTimeout) and its Attempt, and returns its result,
// what it learned from the provider (its usage, on error too) and its
// error. Every attempt yields exactly one event, handed to the publisher
// before Do goes on; the caller's cancellation is never retried. A call
// to a provider that no classifier is for is refused with ErrNoClassifier,
// before any attempt and without any event. A panic of
// fn is recorded as the call's final attempt and then goes on to the
// caller.
func Do[T any](ctx context.Context, m *Middleware, call Call, fn func(ctx context.Context, a Attempt) (T, Report, error)) (T, error) {
	if m == nil || fn == nil {
		var zero T
		return zero, fmt.Errorf("%w: the middleware and the function are required", ErrInvalidCall)
	}
	if err := m.checkClassified(call.Provider); err != nil {
		var zero T
		return zero, err
	}
	v, err := retry.Do(ctx, m.mw, call, fn)
	return v, publicCallError(err)
}

// publicCallError turns the middleware's errors into this package's.
func publicCallError(err error) error {
	var ce *retry.CallError
	var fe *events.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return &CallError{
			RequestID: ce.RequestID, Attempts: ce.Attempts, Reason: ce.Reason,
			Classification: ce.Classification, Err: ce.Err, Cause: ce.Cause,
		}
	case errors.As(err, &fe) && fe.Err != nil:
		return fmt.Errorf("%w: %w", ErrInvalidCall, fe.Err) // labels: the *LabelError
	case errors.As(err, &fe):
		return fmt.Errorf("%w: %s: %s", ErrInvalidCall, fe.Field, fe.Rule)
	case errors.Is(err, retry.ErrInvalidCall):
		return fmt.Errorf("%w: %v", ErrInvalidCall, err)
	}
	return err
}

// Progress tells the middleware that the attempt whose context is ctx (the
// one Do gave fn, or one made from it) received more of its stream: from
// now on it waits at most Policy.StreamIdleTimeout for the next progress
// instead of the attempt timeout. Call it for each event of a stream read
// without a provider adapter's client options (which report it
// themselves); a stream never reported is bounded by the attempt timeout
// as a whole. It does nothing for a context of no attempt.
func Progress(ctx context.Context) { retry.Progress(ctx) }
