package ledger

import (
	"net/http"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
)

// ErrorKind classifies why an attempt failed (wire contract v1).
type ErrorKind string

// The error kinds of the contract.
const (
	KindRateLimit   ErrorKind = "rate_limit"
	KindOverloaded  ErrorKind = "overloaded"
	KindTimeout     ErrorKind = "timeout"
	KindConnection  ErrorKind = "connection"
	KindServer      ErrorKind = "server"
	KindClient      ErrorKind = "client"
	KindAuth        ErrorKind = "auth"
	KindQuota       ErrorKind = "quota"
	KindCanceled    ErrorKind = "canceled"
	KindCircuitOpen ErrorKind = "circuit_open"
	KindOther       ErrorKind = "other"
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
	// Message is a short description for the event, at most 1 KiB.
	Message string
	// ProviderRequestID is the provider's request-id header, when known.
	ProviderRequestID string
}

// Classifier recognises the errors of one provider SDK. It returns ok
// false for an error it does not know, so that classifiers can be chained
// (WithClassifiers); the middleware classifies what none knows as a
// transport error (timeouts, refused or reset connections, the caller's
// cancellation) or, failing that, as KindOther, not retried. now is the
// middleware's clock, for HTTP-date hints. Implementations must be safe
// for concurrent use and must not block.
type Classifier interface {
	Classify(err error, now time.Time) (c Classification, ok bool)
}

// ClassifierFunc adapts a function to Classifier.
type ClassifierFunc func(err error, now time.Time) (Classification, bool)

// Classify calls f.
func (f ClassifierFunc) Classify(err error, now time.Time) (Classification, bool) { return f(err, now) }

// ClassifyHTTP applies the rules every provider shares to an HTTP error
// response, for classifiers of other APIs: retry 408, 409, 429, 500, 502,
// 503, 504 and 529, never another status; then the server's x-should-retry
// header; then its Retry-After hint (retry-after-ms, or retry-after in
// seconds or as an HTTP date relative to now). header may be nil.
func ClassifyHTTP(status int, header http.Header, now time.Time) Classification {
	return fromRetry(retry.ClassifyHTTP(status, header, now))
}

func fromRetry(c retry.Classification) Classification {
	return Classification{
		Kind: ErrorKind(c.Kind), Status: c.Status, Retryable: c.Retryable, Hint: c.Hint, HasHint: c.HasHint,
		Message: c.Message, ProviderRequestID: c.ProviderRequestID,
	}
}

func (c Classification) toRetry() retry.Classification {
	return retry.Classification{
		Kind: events.ErrorKind(c.Kind), Status: c.Status, Retryable: c.Retryable, Hint: c.Hint, HasHint: c.HasHint,
		Message: retry.Truncate(c.Message), ProviderRequestID: c.ProviderRequestID,
	}
}

// classifierChain adapts public classifiers to the middleware's chain.
type classifierChain []Classifier

func (cs classifierChain) Classify(err error, now time.Time) (retry.Classification, bool) {
	for _, c := range cs {
		if got, ok := c.Classify(err, now); ok {
			return got.toRetry(), true
		}
	}
	return retry.Classification{}, false
}
