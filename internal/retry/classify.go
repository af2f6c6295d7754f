package retry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
)

// Classification is what the middleware knows about one failed attempt:
// the public API's type (api.Classification), which provider classifiers
// and package ledger's users return alike. ClassifyHTTP sets its Header,
// whose rate-limit headers teach the guards the upstream's limits.
type Classification = api.Classification

// Classifier recognises the errors of one provider SDK (or transport):
// api.Classifier. It returns ok false for an error it does not know, so
// that classifiers can be chained.
type Classifier = api.Classifier

// ClassifierFunc adapts a function to Classifier (api.ClassifierFunc).
type ClassifierFunc = api.ClassifierFunc

// Chain tries each classifier in order and returns the first answer.
type Chain []Classifier

// Classify implements Classifier.
func (c Chain) Classify(err error, now time.Time) (Classification, bool) {
	for _, cl := range c {
		if cl == nil {
			continue
		}
		if res, ok := cl.Classify(err, now); ok {
			return res, true
		}
	}
	return Classification{}, false
}

// StatusKind maps an HTTP status to the contract's error kind and the
// default retry rule: retry 408, 409, 429, 500, 502, 503, 504 and 529;
// never any other status.
func StatusKind(status int) (kind events.ErrorKind, retryable bool) {
	switch status {
	case http.StatusTooManyRequests:
		return events.KindRateLimit, true
	case 529:
		return events.KindOverloaded, true
	case http.StatusServiceUnavailable:
		return events.KindOverloaded, true
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return events.KindTimeout, true
	case http.StatusConflict:
		return events.KindServer, true
	case http.StatusInternalServerError, http.StatusBadGateway:
		return events.KindServer, true
	case http.StatusUnauthorized, http.StatusForbidden:
		return events.KindAuth, false
	case http.StatusPaymentRequired:
		return events.KindQuota, false
	}
	switch {
	case status >= 400 && status < 500:
		return events.KindClient, false
	case status >= 500 && status < 600:
		return events.KindServer, false
	}
	return events.KindOther, false
}

// ClassifyHTTP applies the rules every provider shares to an HTTP error
// response: the status rule of StatusKind, then the server's override
// header x-should-retry (true or false), then the Retry-After hint.
// header may be nil.
func ClassifyHTTP(status int, header http.Header, now time.Time) Classification {
	kind, retryable := StatusKind(status)
	c := Classification{Kind: kind, Status: status, Retryable: retryable, Header: header}
	if header != nil {
		// Canonical keys: Get does not allocate for them.
		switch v := strings.TrimSpace(header.Get("X-Should-Retry")); {
		case strings.EqualFold(v, "true"):
			c.Retryable = true
		case strings.EqualFold(v, "false"):
			c.Retryable = false
		}
		c.Hint, c.HasHint = ParseRetryAfter(header, now)
	}
	return c
}

// ClassifyTransport recognises errors that are not provider responses: the
// caller's cancellation, attempt timeouts and network failures. It is the
// last link of every chain. callerCtx is the caller's context (not the
// attempt's): when it is done, the error is the caller's own and is never
// retried.
func ClassifyTransport(callerCtx context.Context, err error) (Classification, bool) {
	if callerCtx != nil && callerCtx.Err() != nil {
		return Classification{Kind: events.KindCanceled, Message: Truncate(context.Cause(callerCtx).Error())}, true
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// The caller's context is live, so this was the attempt's own
		// timeout (a *TimeoutError also wraps the context.Canceled its
		// end gave fn).
		return Classification{Kind: events.KindTimeout, Retryable: true, Message: Truncate(err.Error())}, true
	case errors.Is(err, context.Canceled):
		return Classification{Kind: events.KindCanceled, Message: Truncate(err.Error())}, true
	}
	if ne, ok := findNetError(err); ok {
		if ne.Timeout() {
			return Classification{Kind: events.KindTimeout, Retryable: true, Message: Truncate(err.Error())}, true
		}
		return Classification{Kind: events.KindConnection, Retryable: true, Message: Truncate(err.Error())}, true
	}
	if isConnectionReset(err) {
		return Classification{Kind: events.KindConnection, Retryable: true, Message: Truncate(err.Error())}, true
	}
	return Classification{}, false
}

// findNetError finds the first net.Error in err's chain, looking through
// *url.Error: net/http wraps every client error in one, and it claims to be
// a net.Error even when what it wraps (a certificate error, an unsupported
// scheme) is no network failure and would fail again.
func findNetError(err error) (net.Error, bool) {
	for err != nil {
		if _, isURL := err.(*url.Error); !isURL {
			if ne, ok := err.(net.Error); ok {
				return ne, true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if ne, ok := findNetError(e); ok {
					return ne, true
				}
			}
			return nil, false
		default:
			return nil, false
		}
	}
	return nil, false
}

// isConnectionReset recognises a connection that broke mid-exchange, which
// the standard library reports without a net.Error.
func isConnectionReset(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// Truncate makes s fit an event's error message: valid UTF-8 (invalid
// bytes become U+FFFD, which JSON encoding would otherwise do after the
// length check, growing the message) and at most events.MaxMessageBytes
// bytes, cut without splitting a character.
func Truncate(s string) string { return truncateTo(s, events.MaxMessageBytes) }

// truncateTo is Truncate for a limit of max bytes.
func truncateTo(s string, max int) string {
	if len(s) <= max && utf8.ValidString(s) {
		return s
	}
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
