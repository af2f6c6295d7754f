package api

import (
	"net/http"
	"time"
)

// Classification is what the middleware knows about one failed attempt:
// the contract's error kind, whether another attempt may succeed, and the
// server's hint of when to try again.
type Classification struct {
	Kind      ErrorKind
	Status    int  // HTTP status, 0 when none
	Retryable bool // another attempt may succeed
	// Hint is the server's Retry-After, valid when HasHint.
	Hint    time.Duration
	HasHint bool
	// Message is a short description for the event; the middleware cuts
	// it to 1 KiB of valid UTF-8.
	Message string
	// ProviderRequestID is the provider's request-id header, when known.
	ProviderRequestID string
	// Header is the error response's header, when known (nil otherwise):
	// with fleet limits its rate-limit headers teach the fleet the
	// upstream's limits. ClassifyHTTP sets it. It is read during the call
	// only.
	Header http.Header
}

// Classifier recognises the errors of one provider SDK. It returns ok
// false for an error it does not know, so that classifiers can be
// chained; the middleware classifies what none knows as a transport error
// (timeouts, refused or reset connections, the caller's cancellation) or,
// failing that, as KindOther, not retried. now is the middleware's clock,
// for HTTP-date hints. Implementations must be safe for concurrent use and
// must not block.
type Classifier interface {
	Classify(err error, now time.Time) (c Classification, ok bool)
}

// ClassifierFunc adapts a function to Classifier.
type ClassifierFunc func(err error, now time.Time) (Classification, bool)

// Classify calls f.
func (f ClassifierFunc) Classify(err error, now time.Time) (Classification, bool) { return f(err, now) }
