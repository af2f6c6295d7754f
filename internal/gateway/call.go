package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// call is one accounted request, from the client's request to the
// client's response.
type call struct {
	g       *Gateway
	t       target // its provider and route
	w       http.ResponseWriter
	r       *http.Request
	secrets secrets
	client  client

	ids    callIDs
	labels api.Labels       // the call's, merged (callLabels)
	req    provider.Request // what the provider read of it; Body as sent upstream
	model  string           // req.Model, as the events record it
	header http.Header      // as sent upstream, without the ledger headers
	url    *url.URL

	requestID string            // the call's request ID, once the middleware gave it
	committed bool              // the client's response has begun
	resp      *upstreamResponse // the answer of the successful attempt, when not streamed
}

// serve runs the call: its IDs, its attempt numbers, the middleware's
// attempts, and the client's response.
func (c *call) serve() {
	g, r := c.g, c.r
	start := time.Now()
	b, err := g.readBody(r)
	if err != nil {
		c.bodyError(err)
		return
	}
	defer b.Release()
	body := b.Bytes
	if c.ids, err = identify(r, g.cfg.DefaultSession, c.client.key); err != nil {
		if errors.Is(err, errSessionForbidden) {
			g.logRefusal(r, "session_forbidden", err.Error())
			c.gatewayError(http.StatusForbidden, "session_forbidden", err.Error(), 0)
			return
		}
		c.gatewayError(http.StatusBadRequest, "bad_request", err.Error(), 0)
		return
	}
	if c.labels, err = callLabels(r, g.cfg.Labels, c.client.key); err != nil {
		g.logRefusal(r, "bad_labels", err.Error())
		c.gatewayError(http.StatusBadRequest, "bad_request", err.Error(), 0)
		return
	}
	c.requestID = c.ids.request
	c.req = c.t.u.p.Inspect(c.t.rt, body)
	c.model = modelName(c.req.Model)
	c.header = upstreamHeader(r.Header)
	c.url = upstreamURL(c.t.u.origin, &c.t, r.URL.RawQuery)

	var res Reservation
	if c.ids.request != "" {
		if res, err = g.attempts.Reserve(r.Context(), c.ids.request, c.ids.session, g.maxAttempts); err != nil {
			c.reserveFailed(err)
			return
		}
	}
	st := newCallState()
	ctx := g.telemetryContext(context.WithValue(r.Context(), callKey{}, st), r, c.t.rt.Endpoint)
	_, err = retry.Do(ctx, g.mw, retry.Call{
		SessionID: c.ids.session, RequestID: c.ids.request,
		Provider: c.t.u.name, Model: c.model,
		Upstream:     g.breakerKey(c.t.u.name, c.model),
		Account:      g.accountKey(c.client.account),
		FirstAttempt: res.First,
		Labels:       c.labels,
	}, c.attempt)
	if c.ids.request != "" {
		g.release(r.Context(), c.ids.request, res, st.last-res.First+1)
	}
	if st.requestID != "" {
		c.requestID = st.requestID
	}
	c.log(st, start, err)
	c.respond(err)
}

// reserveFailed answers a call whose attempt numbers could not be
// reserved.
func (c *call) reserveFailed(err error) {
	switch {
	case errors.Is(err, ErrAttemptsExhausted):
		c.gatewayError(http.StatusConflict, "attempts_exhausted", "request "+c.ids.request+": "+err.Error()+"; use a new request ID", 0)
		return
	case errors.Is(err, ErrRequestOwned):
		c.g.logRefusal(c.r, "request_owned", err.Error())
		c.gatewayError(http.StatusConflict, "request_owned", err.Error(), 0)
		return
	case errors.Is(err, ErrAttemptsUnknown):
		c.g.logRefusal(c.r, "attempts_unknown", err.Error())
		c.gatewayError(http.StatusConflict, "attempts_unknown", err.Error(), 0)
		return
	}
	c.g.log.LogAttrs(c.r.Context(), slog.LevelError, "gateway: cannot reserve attempt numbers; the call is refused so that no attempt is lost",
		slog.String("request_id", c.ids.request), slog.Any("error", err))
	c.gatewayError(http.StatusServiceUnavailable, "ledger_unavailable",
		"the gateway cannot number the attempts of request "+c.ids.request+" (its ledger store is unreachable); retry later", time.Second)
}

// log writes the call's record, at debug level.
func (c *call) log(st *callState, start time.Time, err error) {
	if !c.g.log.Enabled(c.r.Context(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("session_id", c.ids.session), slog.String("request_id", c.requestID),
		slog.String("provider", c.t.u.name), slog.String("model", c.model),
		slog.String("path", c.r.URL.Path), slog.Bool("stream", c.req.Stream),
		slog.Int("attempts", st.events), slog.String("outcome", string(st.final)),
		slog.Int64("billed_input_tokens", st.billed.InputTokens), slog.Int64("billed_output_tokens", st.billed.OutputTokens),
		slog.Duration("elapsed", time.Since(start)),
	}
	if len(c.labels) != 0 {
		attrs = append(attrs, slog.String("labels", api.FormatLabels(c.labels)))
	}
	if st.kind != "" {
		attrs = append(attrs, slog.String("error_kind", string(st.kind)))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", c.secrets.redact(err.Error())))
	}
	c.g.log.LogAttrs(c.r.Context(), slog.LevelDebug, "gateway: call", attrs...)
}

// byteSize writes n bytes for a person.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}
