package ledger

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/retry"
)

// ErrorKind classifies why an attempt failed (wire contract v1). Its
// method Valid reports whether a kind is one of the contract's.
type ErrorKind = api.ErrorKind

// The error kinds of the contract, with their values in the events.
const (
	KindRateLimit   = api.KindRateLimit   // "rate_limit"
	KindOverloaded  = api.KindOverloaded  // "overloaded"
	KindTimeout     = api.KindTimeout     // "timeout"
	KindConnection  = api.KindConnection  // "connection"
	KindServer      = api.KindServer      // "server"
	KindClient      = api.KindClient      // "client"
	KindAuth        = api.KindAuth        // "auth"
	KindQuota       = api.KindQuota       // "quota"
	KindCanceled    = api.KindCanceled    // "canceled"
	KindCircuitOpen = api.KindCircuitOpen // "circuit_open"
	KindOther       = api.KindOther       // "other"
)

// Classification is what the middleware knows about one failed attempt:
// the contract's error Kind, the HTTP Status (0 when none), whether the
// failure is Retryable, the server's Retry-After Hint (valid when
// HasHint), a short Message for the event (cut to 1 KiB), the
// ProviderRequestID when known, and the error response's Header, whose
// rate-limit headers teach the fleet's limits (WithFleetLimits).
type Classification = api.Classification

// Classifier recognises the errors of one provider SDK: its method
// Classify(err error, now time.Time) (c Classification, ok bool) returns
// ok false for an error it does not know, so that classifiers can be
// chained (WithClassifiers); the middleware classifies what none knows as
// a transport error (timeouts, refused or reset connections, the
// caller's cancellation) or, failing that, as KindOther, not retried. now
// is the middleware's clock, for HTTP-date hints. Implementations must be
// safe for concurrent use and must not block.
type Classifier = api.Classifier

// ClassifierFunc adapts a function to Classifier.
type ClassifierFunc = api.ClassifierFunc

// ClassifyHTTP applies the rules every provider shares to an HTTP error
// response, for classifiers of other APIs: retry 408, 409, 429, 500, 502,
// 503, 504 and 529, never another status; then the server's x-should-retry
// header; then its Retry-After hint (retry-after-ms, or retry-after in
// seconds or as an HTTP date relative to now). header may be nil.
func ClassifyHTTP(status int, header http.Header, now time.Time) Classification {
	return retry.ClassifyHTTP(status, header, now)
}

// ErrNoClassifier is matched by the error of a call to a provider that no
// classifier is for: a configuration error, refused before any attempt
// and without any event, rather than failures silently never retried.
// The middleware classifies the errors of the Anthropic, OpenAI and Gemini
// SDKs as soon as the program imports their adapter (provider/anthropic,
// provider/openai, provider/gemini, which every client needs for its
// ClientOptions); give another provider's with WithClassifiers and
// ClassifierFor.
var ErrNoClassifier = errors.New("ledger: no classifier for the call's provider")

// ClassifierFor names the provider c classifies the errors of (the
// Provider of its calls), for WithClassifiers: the middleware then
// accepts calls to that provider. The provider packages' Classifiers are
// named so.
func ClassifierFor(provider string, c Classifier) Classifier {
	return providerClassifier{provider: provider, c: c}
}

// providerClassifier is a Classifier named for its provider.
type providerClassifier struct {
	provider string
	c        Classifier
}

func (p providerClassifier) Classify(err error, now time.Time) (Classification, bool) {
	return p.c.Classify(err, now)
}

// classifierChain is the classifiers given with WithClassifiers.
type classifierChain []Classifier

// withBuiltins returns the middleware's classifier, cs then those of the
// provider packages the program imports, the providers a classifier is for, and whether one is for every
// provider (one given without a provider's name).
func (cs classifierChain) withBuiltins() (chain retry.Chain, providers map[string]bool, any bool) {
	builtins := retry.RegisteredClassifiers()
	providers = make(map[string]bool, len(builtins)+len(cs))
	for _, c := range cs {
		if pc, ok := c.(providerClassifier); ok {
			providers[pc.provider] = true
		} else {
			any = true
		}
		chain = append(chain, c)
	}
	for _, b := range builtins {
		providers[b.Provider] = true
		chain = append(chain, b.Classifier)
	}
	return chain, providers, any
}

// checkClassified returns an error wrapping ErrNoClassifier when no
// classifier of m is for provider.
func (m *Middleware) checkClassified(provider string) error {
	if m.anyProvider || m.classified[provider] {
		return nil
	}
	known := make([]string, 0, len(m.classified))
	for p := range m.classified {
		known = append(known, p)
	}
	slices.Sort(known)
	return fmt.Errorf("%w: provider %q (classifiers are for %s): import its adapter, github.com/agentledger/ledger/provider/%s, "+
		"or give its classifier with WithClassifiers(ClassifierFor(%q, c))",
		ErrNoClassifier, provider, strings.Join(known, ", "), provider, provider)
}
