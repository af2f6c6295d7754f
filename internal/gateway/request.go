package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentledger/ledger/internal/events"
)

// Headers of the ledger. A client may send the session and request ones;
// the gateway sends all three upstream only with
// Config.ForwardLedgerHeaders, and answers with HeaderRequestID.
const (
	HeaderSessionID = "X-Ledger-Session-Id"
	HeaderRequestID = "X-Ledger-Request-Id"
	HeaderAttempt   = "X-Ledger-Attempt"
	// HeaderLabels carries the call's labels: comma-separated key=value
	// pairs, values percent-encoded where they must be (api.ParseLabels):
	// "team=search, user=u-42". They win over the client key's labels,
	// which win over the gateway's (Config.Labels). It never goes
	// upstream.
	HeaderLabels = "X-Ledger-Labels"
	// HeaderCost is the answered attempt's cost in US dollars (exact
	// decimal, "0.003375") when Config.Prices prices it, "unpriced"
	// when its model has no price. A stream announces it as a trailer
	// (Trailer: X-Ledger-Cost) and sends it after its last event: the
	// cost of the usage the stream reported (an estimated input is never
	// priced). A stream cut upstream is cut for the client too, so its
	// trailer never arrives (the ledger has its cost).
	HeaderCost = "X-Ledger-Cost"
	// HeaderIdempotencyKey names the request when HeaderRequestID is
	// absent.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderGatewayError marks an answer the gateway made itself rather
	// than relayed, with the reason: circuit_open, upstream_unreachable,
	// upstream_timeout, bad_request, too_large, attempts_exhausted,
	// request_owned, attempts_unknown, ledger_unavailable,
	// unauthenticated, session_forbidden, no_route (404: no provider
	// takes the request), and the limits' body_budget
	// (503), body_timeout (408) and client_calls (429).
	HeaderGatewayError = "X-Ledger-Gateway-Error"
)

// unknownModel is the model of the events of a request that names none
// (the provider will refuse it).
const unknownModel = "unknown"

// modelName makes a model name fit the contract: valid UTF-8, 1 to
// events.MaxModelLength bytes.
func modelName(m string) string {
	m = strings.ToValidUTF8(strings.TrimSpace(m), "\uFFFD")
	if m == "" {
		return unknownModel
	}
	if len(m) > events.MaxModelLength {
		cut := events.MaxModelLength
		for cut > 0 && !utf8.RuneStart(m[cut]) {
			cut--
		}
		m = m[:cut]
	}
	return m
}

// hopHeaders are the hop-by-hop headers, which a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// upstreamHeader returns the client's headers as they go upstream: without
// the hop-by-hop headers, those the transport sets (Host, Content-Length,
// Accept-Encoding: the transport asks for gzip and decodes it, so that the
// gateway can read the usage) and the ledger's own.
func upstreamHeader(in http.Header) http.Header {
	h := in.Clone()
	removeHopHeaders(h)
	for _, k := range []string{"Host", "Content-Length", "Accept-Encoding", HeaderSessionID, HeaderRequestID, HeaderAttempt, HeaderLabels} {
		h.Del(k)
	}
	return h
}

// removeHopHeaders removes the hop-by-hop headers, and those the
// Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

func textproto(s string) string { return http.CanonicalHeaderKey(strings.TrimSpace(s)) }

// clientHeader copies the upstream response's headers to the client's
// response: without the hop-by-hop headers and Content-Length, which the
// gateway sets itself.
func clientHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = append([]string(nil), v...)
	}
	removeHopHeaders(dst)
	dst.Del("Content-Length")
}

// upstreamURL is the URL of a request to t at origin: origin's path
// prefix followed by the path relative to the provider's mount, and the
// query as the client sent it.
func upstreamURL(origin *url.URL, t *target, rawQuery string) *url.URL {
	u := *origin
	u.Path = origin.Path + t.path
	u.RawPath = ""
	if t.rawPath != "" || origin.RawPath != "" {
		rp := t.rawPath
		if rp == "" {
			rp = (&url.URL{Path: t.path}).EscapedPath()
		}
		u.RawPath = origin.EscapedPath() + rp
	}
	u.RawQuery = rawQuery
	return &u
}

// attemptHeader is the header of one attempt: h, plus the ledger headers
// when they are forwarded.
func attemptHeader(h http.Header, forward bool, sessionID, requestID string, attempt int) http.Header {
	if !forward {
		return h
	}
	h = h.Clone()
	h.Set(HeaderSessionID, sessionID)
	h.Set(HeaderRequestID, requestID)
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	return h
}

// newBody returns a reader of body for a request, and the request's
// GetBody. With GetBody, net/http's transport resends a request that it
// could not write at all on a reused connection (the server never saw
// it: no attempt, nothing billed). It also resends one it did write when
// the request carries an idempotency key, though, and the provider may
// have billed that: a hidden attempt, the retries P30 is about. So such
// a request gets no GetBody, and the middleware sees every failure.
func newBody(body []byte, h http.Header) (io.ReadCloser, func() (io.ReadCloser, error)) {
	get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	rc, _ := get()
	if h.Get("Idempotency-Key") != "" || h.Get("X-Idempotency-Key") != "" {
		return rc, nil
	}
	return rc, get
}
