package retry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The timeouts of an attempt, as the causes of its context's end. Each
// matches context.DeadlineExceeded, so that the attempt is classified as a
// retryable KindTimeout.
var (
	// ErrAttemptTimeout ends an attempt that had no answer within
	// Policy.AttemptTimeout: the whole answer of a call that does not
	// stream, the first progress (Progress) of one that does.
	ErrAttemptTimeout error = &TimeoutError{What: "the upstream did not answer within the attempt timeout"}
	// ErrStreamIdleTimeout ends an attempt whose stream was silent for
	// longer than Policy.StreamIdleTimeout after it began.
	ErrStreamIdleTimeout error = &TimeoutError{What: "the upstream's stream was silent for longer than the stream idle timeout"}
)

// TimeoutError is the error of an attempt ended by one of its own
// timeouts (ErrAttemptTimeout, ErrStreamIdleTimeout). It matches
// context.DeadlineExceeded and unwraps to Err, what fn returned (so
// errors.As on an SDK's error type still works).
type TimeoutError struct {
	What string
	Err  error // fn's error, nil for the sentinels
}

func (e *TimeoutError) Error() string {
	if e.Err == nil {
		return e.What
	}
	return e.What + " (" + e.Err.Error() + ")"
}

// Is matches context.DeadlineExceeded and the sentinel e was made from.
func (e *TimeoutError) Is(target error) bool {
	t, ok := target.(*TimeoutError)
	return target == context.DeadlineExceeded || ok && t.Err == nil && t.What == e.What
}

// Unwrap returns Err.
func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports true, as a net.Error's.
func (e *TimeoutError) Timeout() bool { return true }

// attemptCtx is the context of one attempt: the caller's, bounded by the
// policy's timeouts, and traced for an SDK's own retries. One allocation
// holds all of it.
//
// Its deadline ends an attempt that waits too long: first for its answer
// (the attempt timeout), then, once the attempt reported the progress of
// a stream, for each next progress (the idle timeout). It is the
// mechanism of the gateway's attempts, in the middleware: the provider
// adapters report each read of a streamed body, and any caller can with
// Progress.
type attemptCtx struct {
	context.Context // the caller's, with the trace; cancelable when timed
	cancel          context.CancelCauseFunc
	t               *time.Timer
	idle            time.Duration

	mu     sync.Mutex
	at     time.Time // when the timer fires
	inIdle bool

	m        *Middleware
	requests atomic.Int32
	trace    httptrace.ClientTrace
}

type deadlineKey struct{}

// newAttemptCtx returns the context of an attempt of m under parent, and
// the function that ends it.
func (m *Middleware) newAttemptCtx(parent context.Context) (*attemptCtx, func()) {
	a := &attemptCtx{Context: parent, m: m, idle: m.policy.StreamIdleTimeout}
	if !m.sdkRetryWarned.Load() {
		a.trace.WroteHeaderField = a.wroteHeaderField
		a.trace.WroteRequest = a.wroteRequest
		a.Context = httptrace.WithClientTrace(a.Context, &a.trace)
	}
	if m.policy.AttemptTimeout <= 0 {
		return a, func() {}
	}
	a.Context, a.cancel = context.WithCancelCause(a.Context)
	a.at = time.Now().Add(m.policy.AttemptTimeout)
	a.t = time.AfterFunc(m.policy.AttemptTimeout, a.fire)
	return a, a.stop
}

func (a *attemptCtx) fire() {
	a.mu.Lock()
	idle := a.inIdle
	a.mu.Unlock()
	if idle {
		a.cancel(ErrStreamIdleTimeout)
	} else {
		a.cancel(ErrAttemptTimeout)
	}
}

func (a *attemptCtx) stop() {
	a.t.Stop()
	a.cancel(nil)
}

// Deadline is the earlier of the caller's deadline and the attempt's
// present one.
func (a *attemptCtx) Deadline() (time.Time, bool) {
	d, ok := a.Context.Deadline()
	if a.t == nil {
		return d, ok
	}
	a.mu.Lock()
	at := a.at
	a.mu.Unlock()
	if at.IsZero() || ok && d.Before(at) {
		return d, ok
	}
	return at, true
}

func (a *attemptCtx) Value(key any) any {
	if key == (deadlineKey{}) {
		return a
	}
	return a.Context.Value(key)
}

// Progress tells the middleware that the attempt whose context is ctx (or
// a context made from it) received more of its stream: from now on the
// attempt waits at most Policy.StreamIdleTimeout for the next progress,
// instead of the attempt timeout. Call it for each event (or read) of a
// stream; a stream never reported is bounded by the attempt timeout as a
// whole. With a policy without StreamIdleTimeout it does nothing: the
// attempt timeout bounds the whole stream. It does nothing for a context
// of no attempt either, and is safe for concurrent use.
func Progress(ctx context.Context) {
	a, _ := ctx.Value(deadlineKey{}).(*attemptCtx)
	if a == nil || a.t == nil || a.idle <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inIdle = true
	a.t.Reset(a.idle)
	a.at = time.Now().Add(a.idle)
}

// timedOut gives err, fn's error, the cause of actx's end when that was
// one of the attempt's own timeouts, so that it is classified as one.
func timedOut(actx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var te *TimeoutError
	if c := context.Cause(actx); errors.As(c, &te) && te.Err == nil && !errors.Is(err, c) {
		return &TimeoutError{What: te.What, Err: err}
	}
	return err
}

// headerRetryCount is the request header in which the Stainless SDKs
// (Anthropic's, OpenAI's) number their own retries: "0" on the first
// request, more on each retry.
const headerRetryCount = "X-Stainless-Retry-Count"

// wroteHeaderField and wroteRequest are the attempt's HTTP client trace:
// they notice an SDK retrying on its own within one attempt, from a
// request whose X-Stainless-Retry-Count is not "0", or a second request
// written. The first time, the middleware logs it at WARN: every hidden
// retry is a billed attempt the ledger never sees.
func (a *attemptCtx) wroteHeaderField(key string, value []string) {
	if len(value) > 0 && value[0] != "0" && strings.EqualFold(key, headerRetryCount) {
		a.m.warnSDKRetry(a, "the request's "+headerRetryCount+" is "+value[0])
	}
}

func (a *attemptCtx) wroteRequest(httptrace.WroteRequestInfo) {
	if a.requests.Add(1) == 2 {
		a.m.warnSDKRetry(a, "a second request was sent within one attempt")
	}
}

// warnSDKRetry logs, once per middleware, that an SDK retries on its own.
func (m *Middleware) warnSDKRetry(ctx context.Context, why string) {
	if m.sdkRetryWarned.Swap(true) {
		return
	}
	m.logger.LogAttrs(ctx, slog.LevelWarn, "retry: an SDK retries on its own under the middleware: each hidden retry is a billed attempt the ledger never sees; "+
		"build the client with the provider adapter's ClientOptions (Anthropic, OpenAI) or ClientConfig and GenerateContentConfig (Gemini) (logged once)",
		slog.String("evidence", why))
}

// StreamProgress makes resp, the answer to a request made with ctx, report
// Progress(ctx) on each read of its body that returns data, when it is a
// server-sent event stream; any other answer is left as it is (it is
// bounded by the attempt timeout as a whole). The provider adapters
// install it in their SDK clients. resp may be nil.
func StreamProgress(ctx context.Context, resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	if a, _ := ctx.Value(deadlineKey{}).(*attemptCtx); a == nil || a.t == nil || a.idle <= 0 {
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		return
	}
	resp.Body = &progressBody{ReadCloser: resp.Body, ctx: ctx}
}

// progressBody reports Progress for each read of a stream that returns
// data.
type progressBody struct {
	io.ReadCloser
	ctx context.Context
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		Progress(b.ctx)
	}
	return n, err
}

// ProgressTransport returns rt (nil: http.DefaultTransport) with the
// streams it answers reporting their progress (StreamProgress), for an
// SDK that takes an *http.Client.
func ProgressTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	if _, ok := rt.(progressTransport); ok {
		return rt
	}
	return progressTransport{rt}
}

type progressTransport struct{ next http.RoundTripper }

func (t progressTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	StreamProgress(req.Context(), resp)
	return resp, err
}
