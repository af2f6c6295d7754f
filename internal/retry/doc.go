// Package retry owns the retry middleware that every model call of an agent
// goes through: it runs the call's attempts under a retry Policy, asks the
// circuit breaker of the call's upstream before each one, classifies each
// failure (provider classifiers first, then transport errors), honours the
// server's Retry-After hints, and hands exactly one attempt event (wire
// contract v1, events.Attempt) per attempt to a Sink.
//
// # Calls and attempts
//
// Do runs one logical call. Every attempt shares the call's request_id (the
// caller's, or a fresh ULID) and session_id and gets its own event_id;
// attempts are numbered from 0. The IDs are validated before anything else:
// an invalid one is returned as an *events.FieldError and no attempt is
// made and no event is published. So are the call's labels: Options.Labels
// (the defaults) merged with Call.Labels, a key of the call's winning; every
// event of the call carries the merged set.
//
// Before each attempt Do checks the caller's context and the upstream's
// breaker. A done context or a rejection by the breaker ends the call with
// a final event for that attempt number (outcome error, kind canceled or
// circuit_open, zero usage) without calling fn. After a failed attempt Do
// decides at once whether there will be another one: it stops when the
// failure is not retryable, the retries are used up, the server's hint is
// longer than Policy.HintCap, or the wait would pass the caller's deadline.
// The event of the attempt that ends the call has Final set, so a call ends
// with exactly one final event.
//
// # Classification
//
// The Middleware's Classifier (normally a Chain of provider classifiers)
// sees each error first; ClassifyTransport handles what it does not know;
// anything left is KindOther and not retried. The caller's context being
// done always wins: the attempt is KindCanceled and never retried, whereas
// the expiry of an attempt's own timeout (Policy.AttemptTimeout) is a
// retryable KindTimeout. Retryable failures count against the breaker;
// failures that say nothing about the upstream's health (rate limit,
// client, auth, quota, canceled, other) are reported to it as
// breaker.Ignore: a 429 says the caller exceeds its quota of a healthy
// upstream, which the rate limits of the guards handle (package guard).
// A call that names its account (Call.Account) has those rate limits,
// holds and retry budget per account, and the upstream's breaker shared
// with every other account.
//
// # Attempt timeouts and an SDK's own retries
//
// Each attempt runs under its own context (deadline.go): the caller's,
// bounded by Policy.AttemptTimeout until its answer or, for a stream,
// until its first Progress, and after that by Policy.StreamIdleTimeout
// between two reports of Progress: the gateway's mechanism, with its
// defaults (10 and 5 minutes). StreamProgress and ProgressTransport let
// the provider adapters report each read of a streamed body. The same
// context carries an HTTP client trace that notices an SDK retrying on
// its own within one attempt (X-Stainless-Retry-Count above 0, or a
// second request written), which the middleware logs once at WARN.
//
// # Events
//
// Events go to a Sink (the emit package's publisher in production,
// MemorySink in tests). Do hands each event over synchronously, before it
// goes on, with a context that does not carry the caller's cancellation, so
// the final event of a canceled call is recorded too; a Sink may block only
// for backpressure. A refused event never changes the call's result: it is
// counted in Stats.SinkErrors, logged and passed to Options.OnSinkError.
//
// # Telemetry
//
// With Options.TracerProvider or MeterProvider set, the middleware is
// instrumented with OpenTelemetry after the GenAI semantic conventions
// of semantic-conventions v1.41.0 (telemetry.go, docs/telemetry.md): a
// client span per call named "{gen_ai.operation.name}
// {gen_ai.request.model}" with a child per attempt (an attempt the
// breaker or a rate limit did not admit too, as it has an event), the
// gen_ai.client.token.usage histogram of every attempt's tokens (what was
// billed) and gen_ai.client.operation.duration of the call, error.type
// on failure. Spans take their times from Clock. The operation is
// WithOperation's, else "chat". The attempt's span is in the context fn
// receives, so an instrumented HTTP client nests under it. Without
// providers none of it runs.
//
// # Time, randomness and identifiers
//
// The clock (Clock), the random source of the jitter and the ID generator
// are injected through Options, so tests run deterministically with a fake
// clock and never sleep. Delay, the backoff formula, is a pure function of
// the policy, the retry number and a random value.
//
// A call reads the wall clock once, when it begins, and measures everything
// after on the monotonic clock: every event time of the call is the start
// plus the monotonic time elapsed. A wall clock stepped back (or forward)
// during a call therefore never gives an event whose finished_at is before
// its started_at, which the contract forbids and the aggregator would
// reject, losing the attempt's usage. The breakers the middleware creates
// measure their cooldown on the monotonic clock too.
//
// # Panics
//
// Whatever panics during a call (fn, the Classifier, the Sink), the attempt
// still gets exactly one event and its breaker permit is given back. A
// panic of fn goes on to the caller afterwards; one of the Classifier ends
// the call with a *CallError wrapping ErrPanicked; one of the Sink counts
// as a refused event. Do's documentation has the details.
//
// The package starts no goroutines; everything happens on the caller's
// goroutine, and a Middleware is safe for concurrent use.
package retry
