package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/agentledger/ledger/internal/netlimit"
	"github.com/agentledger/ledger/internal/provider"
)

// Defaults of Limits.
const (
	DefaultMaxBodyBytesInFlight = 512 << 20
	DefaultMaxCallsPerClient    = 1024
)

// budgetRetryAfter is the retry-after of a call refused for the byte
// budget or its client's cap: bodies and calls in flight end in about
// that time, or the client tries again later.
const budgetRetryAfter = time.Second

// Limits are what one client can hold of the gateway (see package
// netlimit). The connections are capped by the server's listener
// (netlimit.Listener), not here.
type Limits struct {
	// MaxBodyBytesInFlight is the byte budget of the request bodies of
	// accounted calls the gateway holds at once, whatever their client: a
	// body is read against it as it arrives, and a call it cannot cover
	// is answered 503 with retry-after. Default
	// DefaultMaxBodyBytesInFlight.
	MaxBodyBytesInFlight int64
	// MaxCallsPerClient caps the requests in flight of one client
	// (ClientID); past it they are answered 429 with retry-after.
	// Default DefaultMaxCallsPerClient.
	MaxCallsPerClient int
	// ClientID names the client of a request without a client key (a
	// keyed client is named by its key). Nil: a digest of its credential,
	// the one its guards' account is named by, so that the calls of one
	// API key share its cap; "anonymous" for a request without one.
	ClientID func(*http.Request) string
	// Timeouts bound a request's body and each write of its answer;
	// zero fields get netlimit's defaults.
	Timeouts netlimit.Timeouts
	// MaxEstimates caps the tokenizer estimates that run at once: the
	// input of an OpenAI stream whose usage never came, estimated from
	// its request (about 33 ms of CPU for a 256 KiB body). An estimate
	// past the cap is skipped, never waited for (it runs while the
	// client waits for its stream's end): the attempt is recorded
	// without one (estimated_input_tokens 0) and the skip is counted and
	// logged as refusal reason ReasonEstimateSkipped. Default
	// runtime.GOMAXPROCS(0).
	MaxEstimates int
	// Refusals counts and logs (at WARN, rate-limited) what the limits
	// refuse; share the listener's. Nil: the gateway's own, logging to
	// Config.Logger.
	Refusals *netlimit.Refusals
}

// ReasonEstimateSkipped is the refusal reason of a tokenizer estimate
// skipped at Limits.MaxEstimates.
const ReasonEstimateSkipped = "estimate_skipped"

func (l *Limits) defaults(log *slog.Logger) error {
	if l.MaxBodyBytesInFlight == 0 {
		l.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if l.MaxCallsPerClient == 0 {
		l.MaxCallsPerClient = DefaultMaxCallsPerClient
	}
	if l.MaxEstimates == 0 {
		l.MaxEstimates = runtime.GOMAXPROCS(0)
	}
	t := &l.Timeouts
	if t.BodyTimeout == 0 {
		t.BodyTimeout = netlimit.DefaultBodyTimeout
	}
	if t.MinBodyRate == 0 {
		t.MinBodyRate = netlimit.DefaultMinBodyRate
	}
	if t.WriteTimeout == 0 {
		t.WriteTimeout = netlimit.DefaultWriteTimeout
	}
	switch {
	case l.MaxBodyBytesInFlight < 0:
		return fmt.Errorf("Limits.MaxBodyBytesInFlight is %d; it must be positive", l.MaxBodyBytesInFlight)
	case l.MaxCallsPerClient < 0:
		return fmt.Errorf("Limits.MaxCallsPerClient is %d; it must be positive", l.MaxCallsPerClient)
	case l.MaxEstimates < 0:
		return fmt.Errorf("Limits.MaxEstimates is %d; it must be positive", l.MaxEstimates)
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("Limits.Timeouts: %w", err)
	}
	if l.Refusals == nil {
		l.Refusals = netlimit.NewRefusals(log, 0, nil)
	}
	return nil
}

// clientOf names the client of r whose calls in flight are capped: its
// key, else Limits.ClientID, else the account of its credential
// ("anonymous" for none).
func (g *Gateway) clientOf(cl client, r *http.Request) string {
	switch {
	case cl.key != nil:
		return "key-" + cl.key.Name
	case g.cfg.Limits.ClientID != nil:
		return g.cfg.Limits.ClientID(r)
	case cl.account != "":
		return cl.account
	}
	return "anonymous"
}

// Stats are the gateway's counters, read when scraped.
type Stats struct {
	// Requests are the requests served, Accounted those of them that
	// were model calls.
	Requests, Accounted uint64
	// BodyBytesInFlight are the bytes of request bodies held now, of
	// MaxBodyBytesInFlight.
	BodyBytesInFlight, MaxBodyBytesInFlight int64
	// Refusals are the limits' refusals by reason (netlimit's reasons).
	Refusals map[string]uint64
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() Stats {
	return Stats{
		Requests: g.requests.Load(), Accounted: g.accounted.Load(),
		BodyBytesInFlight: g.budget.InFlight(), MaxBodyBytesInFlight: g.budget.Max(),
		Refusals: g.refusals.Counts(),
	}
}

// Refusals are the counters and log of the gateway's refusals.
func (g *Gateway) Refusals() *netlimit.Refusals { return g.refusals }

// limit serves r under the limits: the timeouts, and the cap of r's
// client's calls in flight. u is the upstream r goes to, whose error
// format a refusal takes; clientID names r's client (clientOf).
func (g *Gateway) limit(w http.ResponseWriter, r *http.Request, u *upstream, clientID string, serve http.HandlerFunc) {
	g.requests.Add(1)
	w, r, done := g.cfg.Limits.Timeouts.Wrap(w, r)
	defer done()
	release, ok := g.perClient.Acquire(clientID)
	if !ok {
		g.refuse(w, r, u, netlimit.ReasonClientCalls, http.StatusTooManyRequests,
			fmt.Sprintf("this client has %d requests in flight, the gateway's limit per client", g.perClient.Max()), budgetRetryAfter)
		return
	}
	defer release()
	serve(w, r)
}

// refuse answers a request a limit refused, counting and logging it, and
// closes the connection (its body may be unread).
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, u *upstream, reason string, status int, msg string, retryAfter time.Duration) {
	g.refusals.Refuse(r.Context(), reason, "gateway: request refused: "+msg,
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
	w.Header().Set("Connection", "close")
	header := reason
	if reason == netlimit.ReasonBodyTooLarge {
		header = "too_large" // as it was before the reasons were counted
	}
	writeGatewayError(w, u, "", status, header, msg, retryAfter)
}

// bodyError answers a call whose body could not be read, unless the
// client went away.
func (c *call) bodyError(err error) {
	g := c.g
	var tl *netlimit.TooLargeError
	switch {
	case errors.As(err, &tl):
		g.refuse(c.w, c.r, c.t.u, netlimit.ReasonBodyTooLarge, http.StatusRequestEntityTooLarge,
			"the request body is larger than the gateway's limit of "+byteSize(g.cfg.MaxRequestBytes), 0)
	case errors.Is(err, netlimit.ErrBudget):
		g.refuse(c.w, c.r, c.t.u, netlimit.ReasonBodyBudget, http.StatusServiceUnavailable,
			"the gateway holds its limit of "+byteSize(g.budget.Max())+" of request bodies in flight; try again shortly", budgetRetryAfter)
	case errors.Is(err, netlimit.ErrBodyTimeout):
		g.refuse(c.w, c.r, c.t.u, netlimit.ReasonBodyTimeout, http.StatusRequestTimeout, err.Error(), 0)
	}
	// otherwise the client went away mid-request
}

// readBody reads the client's request body against the byte budget, at
// most limit bytes. The caller releases it.
func (g *Gateway) readBody(r *http.Request) (*netlimit.Body, error) {
	if r.ContentLength > g.cfg.MaxRequestBytes {
		// Declared too large: refused before a byte is read.
		return nil, &netlimit.TooLargeError{Limit: g.cfg.MaxRequestBytes}
	}
	return netlimit.ReadBody(r.Body, g.budget, g.cfg.MaxRequestBytes)
}

// passthroughError answers a request proxied through whose proxying
// failed.
func (g *Gateway) passthroughError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := r.Context().Value(targetKey{}).(*target)
	if t == nil {
		resolved, _ := g.mounts.resolve(r)
		t = &resolved
	}
	if t.u != nil && (errors.Is(err, netlimit.ErrBodyTimeout) || netlimit.TimedOut(r)) {
		g.refuse(w, r, t.u, netlimit.ReasonBodyTimeout, http.StatusRequestTimeout, netlimit.ErrBodyTimeout.Error(), 0)
		return
	}
	if r.Context().Err() == nil {
		g.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: proxying failed",
			slog.String("path", r.URL.Path), slog.String("error", g.mounts.secretsOf(r).redact(err.Error())))
	}
	w.Header().Set(HeaderGatewayError, "upstream_unreachable")
	w.WriteHeader(http.StatusBadGateway)
}

// estimate returns the input e estimates, when it needs one and a slot of
// Limits.MaxEstimates is free; a skipped estimate is 0, counted and
// logged (ReasonEstimateSkipped).
func (c *call) estimate(e provider.InputEstimator) int64 {
	if !e.NeedsEstimate() {
		return 0
	}
	select {
	case c.g.estimates <- struct{}{}:
		defer func() { <-c.g.estimates }()
		return e.EstimatedInput()
	default:
		c.g.refusals.Refuse(c.r.Context(), ReasonEstimateSkipped,
			"gateway: the input of a stream without usage was not estimated: Limits.MaxEstimates estimates are running; the attempt is recorded without an estimate",
			slog.String("provider", c.t.u.name), slog.String("model", c.model), slog.Int("max_estimates", c.g.cfg.Limits.MaxEstimates))
		return 0
	}
}
