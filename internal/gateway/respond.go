package gateway

import (
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/retry"
)

// respond answers the client once the middleware is done: the successful
// answer, or after the last attempt the provider's own status and body,
// or the gateway's own error when there is none to relay.
func (c *call) respond(err error) {
	if err == nil {
		if c.resp != nil {
			c.writeUpstream(c.resp)
		}
		return
	}
	var ae *attemptError
	var ce *retry.CallError
	errors.As(err, &ae)
	errors.As(err, &ce)
	switch {
	case c.committed:
		if ae == nil || !ae.relayed {
			// The stream was cut upstream (or the client left): cut the
			// client's too, rather than end it as if it were whole.
			panic(http.ErrAbortHandler)
		}
	case c.r.Context().Err() != nil:
		// The client went away: no one to answer.
	case ce != nil && ce.Reason == retry.StopCircuitOpen:
		c.circuitOpen(ce)
	case ce != nil && ce.Reason == retry.StopRateLimit:
		c.rateLimited(ce)
	case ae != nil && ae.relay != nil:
		c.writeUpstream(ae.relay)
	case ae != nil && errors.Is(ae.cause, errResponseTooLarge):
		c.gatewayError(http.StatusBadGateway, "too_large", ae.Error(), 0)
	case ae != nil && (errors.Is(ae.cause, errAttemptTimeout) || errors.Is(ae.cause, errIdleTimeout)):
		c.gatewayError(http.StatusGatewayTimeout, "upstream_timeout", ae.Error(), 0)
	case ae != nil:
		c.gatewayError(http.StatusBadGateway, "upstream_unreachable", ae.Error(), 0)
	default:
		c.g.log.LogAttrs(c.r.Context(), slog.LevelError, "gateway: the call failed before any attempt",
			slog.String("request_id", c.requestID), slog.String("error", c.secrets.redact(err.Error())))
		c.gatewayError(http.StatusBadRequest, "bad_request", c.secrets.redact(err.Error()), 0)
	}
}

// writeUpstream relays an upstream answer.
func (c *call) writeUpstream(u *upstreamResponse) {
	h := c.w.Header()
	clientHeader(h, u.header)
	h.Set(HeaderRequestID, c.requestID)
	if u.cost != "" {
		h.Set(HeaderCost, u.cost)
	}
	h.Set("Content-Length", strconv.Itoa(len(u.body)))
	c.w.WriteHeader(u.status)
	_, _ = c.w.Write(u.body)
}

// circuitOpen answers a call the breaker refused: 503 with the time the
// breaker will next admit a probe, so that the SDKs' retry logic (when
// the client has any) waits for it.
func (c *call) circuitOpen(ce *retry.CallError) {
	wait := time.Second
	var oe *breaker.OpenError
	if errors.As(ce, &oe) && !oe.Until.IsZero() {
		wait = max(oe.Until.Sub(c.g.cfg.Now()), time.Millisecond)
	}
	c.gatewayError(http.StatusServiceUnavailable, "circuit_open",
		"the gateway's circuit breaker for "+c.t.u.name+" "+c.model+" is open after repeated failures; retry after "+wait.Round(time.Millisecond).String(), wait)
}

// rateLimited answers a call that the upstream's rate limits refused
// before any attempt (the wait for capacity, or the fleet's hold after a
// 429, would pass the call's deadline or the hint cap): 429 with
// retry-after, as the provider itself would answer.
func (c *call) rateLimited(ce *retry.CallError) {
	wait := time.Second
	msg := "the gateway's rate limit for " + c.t.u.name + " " + c.model + " has no capacity in time"
	var le *guard.LimitError
	if errors.As(ce, &le) {
		msg += ": " + le.Error()
		if le.Hold && le.Until.After(c.g.cfg.Now()) {
			wait = le.Until.Sub(c.g.cfg.Now())
		}
	}
	c.gatewayError(http.StatusTooManyRequests, "rate_limited", msg, wait)
}

// gatewayError answers with an error the gateway made itself, in the
// provider's own error format, marked with HeaderGatewayError. A
// positive retryAfter is sent as retry-after (whole seconds, rounded up)
// and retry-after-ms.
func (c *call) gatewayError(status int, reason, msg string, retryAfter time.Duration) {
	writeGatewayError(c.w, c.t.u, c.requestID, status, reason, msg, retryAfter)
}

// writeGatewayError answers with an error the gateway made itself, in
// u's error format (see call.gatewayError).
func writeGatewayError(w http.ResponseWriter, u *upstream, requestID string, status int, reason, msg string, retryAfter time.Duration) {
	h := w.Header()
	if requestID != "" {
		h.Set(HeaderRequestID, requestID)
	}
	h.Set(HeaderGatewayError, reason)
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
		h.Set("Retry-After-Ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	body := u.p.ErrorBody(status, msg)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
