package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/pricing"
	"github.com/agentledger/ledger/internal/retry"
)

// errResponseTooLarge ends an attempt whose answer is over the gateway's
// limit; it is not retried (the answer would be as large again).
var errResponseTooLarge = errors.New("the upstream's response is larger than the gateway's limit")

// attempt is the middleware's fn: one request to the upstream. It
// returns what the upstream billed (on failure too) and an *attemptError.
func (c *call) attempt(ctx context.Context, a retry.Attempt) (struct{}, retry.Report, error) {
	c.requestID = a.RequestID
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dl := newDeadline(c.g.cfg.AttemptTimeout, cancel)
	defer dl.stop()

	resp, err := c.g.transport.RoundTrip(c.newRequest(actx, a))
	if err != nil {
		return struct{}{}, retry.Report{}, c.failure(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return struct{}{}, retry.Report{}, c.errorResponse(actx, resp)
	}
	if isEventStream(resp.Header) {
		rep, err := c.stream(actx, dl, resp, a)
		return struct{}{}, rep, err
	}
	rep, err := c.buffer(actx, resp)
	return struct{}{}, rep, err
}

// newRequest is the upstream request of attempt a.
func (c *call) newRequest(ctx context.Context, a retry.Attempt) *http.Request {
	h := attemptHeader(c.header, c.g.cfg.ForwardLedgerHeaders, a.SessionID, a.RequestID, a.Number)
	body, getBody := newBody(c.req.Body, h)
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           c.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		GetBody:       getBody,
		ContentLength: int64(len(c.req.Body)),
		Host:          c.url.Host,
	}
	return req.WithContext(ctx)
}

// failure is the attemptError of a transport failure err; the attempt's
// own timeouts are named as such.
func (c *call) failure(actx context.Context, err error) *attemptError {
	if cause := context.Cause(actx); cause == errAttemptTimeout || cause == errIdleTimeout {
		if !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
	}
	// The URL without its query, where Gemini's key may be.
	where := c.url.Scheme + "://" + c.url.Host + c.url.EscapedPath()
	return &attemptError{p: c.t.u.p, cause: fmt.Errorf("POST %s: %w", where, err), committed: c.committed, secrets: c.secrets}
}

// errorResponse reads an upstream error response (at most maxErrorBody of
// its body) to classify it and, after the last attempt, relay it.
func (c *call) errorResponse(actx context.Context, resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return c.failure(actx, err)
	}
	ur := &upstreamResponse{status: resp.StatusCode, header: resp.Header, body: body}
	return &attemptError{p: c.t.u.p, resp: ur, relay: ur, secrets: c.secrets}
}

// buffer reads a whole answer that is not streamed; the client gets it
// after the middleware recorded the attempt.
func (c *call) buffer(actx context.Context, resp *http.Response) (retry.Report, error) {
	limit := c.g.cfg.MaxResponseBytes
	n := int64(4 << 10)
	if resp.ContentLength > 0 && resp.ContentLength <= limit {
		n = resp.ContentLength + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, n))
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return retry.Report{}, c.failure(actx, err)
	}
	if int64(buf.Len()) > limit {
		return retry.Report{}, &attemptError{p: c.t.u.p, cause: fmt.Errorf("%w (%s)", errResponseTooLarge, byteSize(limit)), secrets: c.secrets}
	}
	body := buf.Bytes()
	ans, ok := c.t.u.p.BodyUsage(c.t.rt, resp.Header, body)
	if !ok {
		c.warnNoUsage()
	}
	c.resp = &upstreamResponse{status: resp.StatusCode, header: resp.Header, body: body, cost: c.cost(sanitize(ans.Usage), ans.ServiceTier)}
	return retry.Report{Usage: sanitize(ans.Usage), ProviderRequestID: ans.ProviderID, ServiceTier: ans.ServiceTier, Header: resp.Header}, nil
}

// cost prices the attempt's usage (Config.Prices) for HeaderCost, at the
// gateway's clock: its own provider, model and service tier, as the
// ledger does.
func (c *call) cost(u events.Usage, tier string) string {
	if c.g.cfg.Prices == nil {
		return ""
	}
	cost, ok := c.g.cfg.Prices.Price(pricing.Attempt{Provider: c.t.u.name, Model: c.model, ServiceTier: tier, At: c.g.cfg.Now(), Usage: u})
	if !ok {
		return "unpriced"
	}
	return cost.Total.String()
}

// warnNoUsage logs, once per API, a successful answer without usage: its
// attempts are recorded with zero usage.
func (c *call) warnNoUsage() {
	if first, _ := c.g.noUsage.first(c.r.URL.Path); first {
		c.g.log.LogAttrs(c.r.Context(), slog.LevelWarn, "gateway: a successful answer reported no usage; its attempt is recorded with zero tokens (logged once per path)",
			slog.String("path", c.r.URL.Path), slog.String("provider", c.t.u.name))
	}
}

// deadline ends an attempt that waits too long: first for its answer
// (the attempt timeout), then, once a stream is under way, for each next
// event (the idle timeout).
type deadline struct {
	t    *time.Timer
	idle atomic.Bool
}

func newDeadline(d time.Duration, cancel context.CancelCauseFunc) *deadline {
	dl := &deadline{}
	dl.t = time.AfterFunc(d, func() {
		if dl.idle.Load() {
			cancel(errIdleTimeout)
		} else {
			cancel(errAttemptTimeout)
		}
	})
	return dl
}

// extend gives the attempt idle more from now, as the idle timeout.
func (d *deadline) extend(idle time.Duration) {
	d.idle.Store(true)
	d.t.Reset(idle)
}

func (d *deadline) stop() { d.t.Stop() }

// isEventStream reports whether a response is a server-sent event stream.
func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// sanitize makes a usage the upstream reported fit the contract: every
// count from 0 to events.MaxTokens, the cache counts within the input,
// the 1-hour cache write within the cache write, the reasoning within the
// output.
func sanitize(u events.Usage) events.Usage {
	clamp := func(n int64) int64 { return min(max(n, 0), events.MaxTokens) }
	u.InputTokens, u.OutputTokens = clamp(u.InputTokens), clamp(u.OutputTokens)
	u.CacheReadInputTokens = min(clamp(u.CacheReadInputTokens), u.InputTokens)
	u.CacheCreationInputTokens = min(clamp(u.CacheCreationInputTokens), u.InputTokens-u.CacheReadInputTokens)
	u.CacheCreation1hInputTokens = min(clamp(u.CacheCreation1hInputTokens), u.CacheCreationInputTokens)
	u.ReasoningTokens = min(clamp(u.ReasoningTokens), u.OutputTokens)
	return u
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
