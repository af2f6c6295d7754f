package fakekit

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"regexp"
	"strings"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
)

// Faker is implemented by a provider.Provider that the fake provider can
// speak: Fake returns its dialect. The fake provider, the simulator,
// ledgertest and the bench find dialects by asking each provider of a
// registry for this interface.
type Faker interface {
	Fake() *Dialect
}

// Dialect is one provider's API as the fake provider speaks it. It is
// immutable once given to the fake provider.
type Dialect struct {
	// Provider is the provider's name, as the truth records it.
	Provider string
	// Prefix is the path the fake provider serves the API under, so that
	// every provider has its own ("/anthropic", "/mistral"): "/" and a
	// path segment or more, no trailing "/". The API's own paths
	// (Endpoint.Path) follow it.
	Prefix string
	// BasePath is what the base URL given to the provider's SDK adds to
	// the prefix: "/" (Anthropic, Gemini), "/v1/" (OpenAI). BaseURL joins
	// them.
	BasePath string
	// Endpoints are the endpoints the fake provider serves, at their
	// paths in the API.
	Endpoints []Endpoint
	// Limits maps the tier to the dimensions of the provider's
	// organization; nil selects SplitLimits.
	Limits func(Tier) []Dimension
	// LimitHeaders sets the rate-limit headers of an attempt the tier
	// admitted or refused, in the provider's style; nil sends none.
	LimitHeaders func(h http.Header, limits []LimitState)
	// CacheWrites: the API bills prompt cache writes, so some calls of
	// the plan write the cache.
	CacheWrites bool
	// CacheWrites1h: the API splits a cache write by lifetime (5 minutes,
	// 1 hour), so part of some calls' writes is the 1-hour one (Subsets).
	CacheWrites1h bool
	// Reasoning: the API reports the reasoning (thinking) part of the
	// output, so some calls' successful answers have one (Subsets).
	Reasoning bool
	// ServiceTiers are the service tiers, in the contract's form, that
	// the API's successful answers name, one per call (ServiceTierFor);
	// empty when its answers name none.
	ServiceTiers []string
	// Sim is the SDK client the simulator drives against the dialect;
	// nil when there is none.
	Sim *Sim
}

// Endpoint is one accounted endpoint of a dialect.
type Endpoint struct {
	// Path is the endpoint's path in the API, as http.ServeMux reads
	// it: "/v1/messages", or "/v1beta/models/" for the subtree. The fake
	// provider serves POST requests to it under the dialect's prefix,
	// and, when it is the provider's own origin (fakeprovider.Listen),
	// at the root too.
	Path string
	// Handle answers one request. The request's path is the API's (the
	// prefix stripped).
	Handle func(s Server, w http.ResponseWriter, r *http.Request)
}

// BaseURL is the base URL of the dialect's SDK for a fake provider whose
// root is root ("http://127.0.0.1:port").
func (d *Dialect) BaseURL(root string) string {
	return root + d.Prefix + d.BasePath
}

// Subsets returns u, the usage of a successful attempt of call
// requestID, with the subsets the dialect's answers report: for half the
// calls a reasoning part of the output (20 to 79 %), and for half the
// calls that write the cache a 1-hour part of the write (1 to 100 %). They
// are a function of the request ID alone, so the same seed gives the same
// truth, and they never exceed their wholes whatever shaped u before.
func (d *Dialect) Subsets(requestID string, u events.Usage) events.Usage {
	h := callHash("subsets", requestID)
	if d.Reasoning && h&1 == 0 {
		u.ReasoningTokens = u.OutputTokens * int64(20+(h>>8)%60) / 100
	}
	if d.CacheWrites1h && u.CacheCreationInputTokens > 0 && (h>>1)&1 == 0 {
		u.CacheCreation1hInputTokens = u.CacheCreationInputTokens * int64(1+(h>>16)%100) / 100
	}
	return u
}

// ServiceTierFor is the service tier of call requestID among tiers (in
// the contract's form), "" when tiers is empty: a function of the request
// ID alone, which the dialect's answers name and the truth expects.
func ServiceTierFor(requestID string, tiers []string) string {
	if len(tiers) == 0 {
		return ""
	}
	return tiers[callHash("tier", requestID)%uint64(len(tiers))]
}

// callHash is the FNV-1a hash of a purpose and a request ID.
func callHash(purpose, requestID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write([]byte(requestID))
	return h.Sum64()
}

// Dimensions are the organization's limits under tier t.
func (d *Dialect) Dimensions(t Tier) []Dimension {
	if d.Limits == nil {
		return SplitLimits(t)
	}
	return d.Limits(t)
}

var prefixRule = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`)

// Validate checks the dialect; the error names the field and the rule.
func (d *Dialect) Validate() error {
	fail := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s: %s", ErrInvalidDialect, d.Provider, field, fmt.Sprintf(format, args...))
	}
	if err := provider.ValidateName("Provider", d.Provider); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidDialect, err)
	}
	switch {
	case !prefixRule.MatchString(d.Prefix):
		return fail("Prefix", "%q must be one or more path segments, each starting with '/', without a trailing '/'", d.Prefix)
	case !strings.HasPrefix(d.BasePath, "/") || !strings.HasSuffix(d.BasePath, "/"):
		return fail("BasePath", "%q must start and end with '/'", d.BasePath)
	case len(d.Endpoints) == 0:
		return fail("Endpoints", "must not be empty")
	}
	for i, e := range d.Endpoints {
		if !strings.HasPrefix(e.Path, "/") || e.Handle == nil {
			return fail(fmt.Sprintf("Endpoints[%d]", i), "path %q must start with '/' and Handle must be set", e.Path)
		}
	}
	if s := d.Sim; s != nil && (s.Model == "" || s.NewCaller == nil) {
		return fail("Sim", "Model and NewCaller must be set")
	}
	return nil
}

// Server is the fake provider as an endpoint's handler sees it. It is
// safe for concurrent use.
type Server interface {
	// Identify reads the call of a request from its ledger headers; a
	// scripted server identifies a request without them too.
	Identify(r *http.Request) (Call, error)
	// Unidentified books a request Identify refused: it is in no tally.
	Unidentified()
	// Invalid books an attempt of call c that the dialect refused
	// (FaultInvalid, nothing billed); model is what the request named,
	// as far as it was read.
	Invalid(c Call, model string)
	// Serve decides the attempt, books it in the truth and answers it
	// through a.Reply. It returns when the answer is written, the client
	// gave up or the server closed.
	Serve(w http.ResponseWriter, r *http.Request, c Call, a Attempt)
}

// Attempt is what the fake provider needs of a request the dialect
// accepted.
type Attempt struct {
	// Model is the requested model, as the truth records it.
	Model string
	// Stream: the answer is a stream of events.
	Stream bool
	// MaxOutput caps the output tokens (0: no cap).
	MaxOutput int64
	// Reply writes the answer in the provider's format.
	Reply Reply
}

// Reply is the provider-specific part of answering one attempt. It may
// also implement Shaper, Observer and Breaker.
type Reply interface {
	// Fail answers a fault other than a stall: FaultRateLimit (and a
	// tier's refusal, RetryAfter set), FaultOverload, FaultServerError,
	// FaultBadRequest and FaultOutage (503).
	Fail(w http.ResponseWriter, c Call, d Decision)
	// Succeed answers the attempt with the call's usage.
	Succeed(w http.ResponseWriter, c Call, u events.Usage) error
	// StartStall begins a streamed answer that reports the billed usage u,
	// before the server stalls.
	StartStall(w http.ResponseWriter, c Call, u events.Usage) error
	// StreamError ends a streamed answer begun by StartStall with an error
	// event of a server error.
	StreamError(w http.ResponseWriter) error
}

// Shaper is a Reply whose API bills other than the plan's usage (an
// embedding has no output).
type Shaper interface {
	Shape(u events.Usage) events.Usage
}

// Observer is a Reply that says how much of what a failed stream billed
// its events report, or let a client count; without it all is
// observable.
type Observer interface {
	Observed(f Fault, billed events.Usage) events.Usage
}

// Breaker is a Reply that can stream tokens and break off; without it a
// broken stream is a cut connection before any answer.
type Breaker interface {
	// BreakStream begins a streamed answer that bills billed, with
	// billed.OutputTokens content events; the server then cuts it.
	BreakStream(w http.ResponseWriter, c Call, billed events.Usage) error
}
