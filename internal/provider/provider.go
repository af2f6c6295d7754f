package provider

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/retry"
)

// Provider is everything the ledger knows of one provider's HTTP API. The
// gateway, the guards, the simulator, the fake provider, ledgertest and
// the bench ask a Provider; none of them names one. An implementation is
// immutable and safe for concurrent use.
type Provider interface {
	// Name is the provider's name as the events record it (events'
	// provider field): "anthropic", "openai", "mistral".
	Name() string
	// Upstream says where the API is and how its clients authenticate.
	Upstream() Upstream

	// Match returns the route of an accounted request: a POST to path
	// (relative to the provider's mount on the gateway, query excluded)
	// that is one of the endpoints the ledger accounts. ok is false for
	// every other path, which the gateway proxies unaccounted.
	Match(path string) (rt Route, ok bool)
	// Inspect reads what the gateway needs of an accounted request's
	// body, and returns the body to send upstream: a provider whose
	// stream reports usage only when asked (OpenAI's
	// stream_options.include_usage) adds the option. A body that is not
	// JSON is returned as it is: the provider will refuse it.
	Inspect(rt Route, body []byte) Request

	// BodyUsage reads the usage, the provider's ID of the response and
	// the service tier that served it from a whole (not streamed)
	// successful response. ok is false when the body carries no usage.
	BodyUsage(rt Route, header http.Header, body []byte) (a Answer, ok bool)
	// NewStream returns the accountant of one streamed response to req,
	// whose response had header.
	NewStream(rt Route, header http.Header, req Request) Stream

	// Classifier classifies the errors of the provider's SDK (the Go
	// middleware's callers use it).
	Classifier() retry.Classifier
	// ClassifyResponse classifies an error response of the raw HTTP API
	// by the same rules as Classifier, hints and request ID included.
	ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification
	// ClassifyStreamError classifies the data of an error event inside a
	// stream whose response had header.
	ClassifyStreamError(header http.Header, data []byte, now time.Time) retry.Classification
	// ErrorBody is an error response body in the provider's own format,
	// for the errors the gateway makes itself (circuit open, rate
	// limited, too large...), so that the provider's SDKs read them.
	ErrorBody(status int, msg string) []byte
	// RateLimits reads the rate-limit headers of a response; a provider
	// that sends none returns the zero Observed.
	RateLimits(header http.Header, now time.Time) guard.Observed
}

// Upstream is where a provider's API is and how its clients pass their
// credential.
type Upstream struct {
	// Origin is the API's default base URL: scheme, host, port and an
	// optional path prefix that the request's path is appended to
	// ("https://api.anthropic.com", "https://api.groq.com/openai").
	Origin string
	// CredentialHeaders are the canonical names of the headers that carry
	// the client's credential, in the order the provider's SDKs prefer;
	// the first one is where the gateway puts a credential it sets. They
	// are passed upstream and never logged or published.
	CredentialHeaders []string
	// BearerCredential: the first credential header holds "Bearer
	// <credential>" (OpenAI's Authorization) rather than the credential
	// alone.
	BearerCredential bool
	// CredentialQuery is a query parameter that may carry the credential
	// instead ("key" for Gemini); "" when none.
	CredentialQuery string
	// RequestIDHeader is the header of the provider's ID of a request
	// ("request-id", "x-request-id"); "" when the ID comes in the body.
	RequestIDHeader string
	// Passthrough reports whether a request the gateway does not account
	// is recognisably this provider's (by a header or path only its
	// clients send), so that it is proxied here; nil for none. The
	// providers at the root are asked in the registry's order; a request
	// none recognises is refused (404), never sent to a guess with the
	// client's credential.
	Passthrough func(r *http.Request) bool
	// AtRoot: the gateway serves the provider at its root (/v1/...) as
	// well as at its mount (/NAME/v1/...). Only the providers whose SDKs
	// clients point at the gateway's root are, and their accounted paths
	// must not collide: Anthropic, OpenAI and Gemini. Every other
	// provider is reached at its mount only.
	AtRoot bool
}

// Route is an accounted request, as its path says.
type Route struct {
	// Endpoint names the endpoint, for logs and metrics: "messages",
	// "chat", "responses", "embeddings", "generate".
	Endpoint string
	// Model is the model the path names ("" when the body names it).
	Model string
	// Stream is true when the path alone says the answer streams
	// (Gemini's :streamGenerateContent).
	Stream bool
}

// Request is what the gateway reads of an accounted request.
type Request struct {
	// Model is the requested model, as the body (or the path) names it;
	// "" when neither does.
	Model string
	// Stream is true when the answer will be a stream of events.
	Stream bool
	// Body is the body to send upstream.
	Body []byte
	// InjectedUsage is true when Inspect added the usage option to Body:
	// the usage event is then the gateway's, not the client's, and the
	// accountant drops it (Verdict.Drop).
	InjectedUsage bool
}

// Stream follows the usage of one streamed response, event by event. It
// is used by one goroutine.
type Stream interface {
	// Observe reads one server-sent event: its name ("" for a data-only
	// event) and its data.
	Observe(name string, data []byte) Verdict
	// Usage is the usage so far: after a complete stream, the response's;
	// after a broken one, what the events received say (see Features for
	// what a provider's broken stream cannot tell).
	Usage() events.Usage
	// Complete reports whether the stream reached its end event.
	Complete() bool
	// ProviderID is the provider's ID of the response, once known.
	ProviderID() string
	// ServiceTier is the service tier the stream says served it, once
	// known, in the contract's form (events.ServiceTier; a provider maps
	// its own name of the standard tier to "standard"); "" when it does
	// not say.
	ServiceTier() string
}

// Answer is what the gateway records of a whole successful response.
type Answer struct {
	// Usage is the response's usage in the contract's terms, subsets
	// (reasoning, the 1-hour cache write) included.
	Usage events.Usage
	// ProviderID is the provider's ID of the response ("" when none).
	ProviderID string
	// ServiceTier is the tier the provider says served the response, in
	// the contract's form as Stream.ServiceTier ("" when it does not say).
	ServiceTier string
}

// InputEstimator is a Stream that can estimate the input of a request
// whose stream never reported it (OpenAI's chat and Responses streams,
// cut before their usage). The gateway records the estimate apart from
// the usage (the attempt's estimated_input_tokens), never as its input.
type InputEstimator interface {
	// NeedsEstimate reports whether EstimatedInput would estimate (the
	// stream took the request and never reported its usage), so that
	// the caller may bound the estimates it runs at once.
	NeedsEstimate() bool
	// EstimatedInput is the request's input in tokens, estimated with a
	// tokenizer, when the stream took the request (an event other than
	// an error arrived) but never reported its usage; 0 otherwise. It is
	// called after the stream ended, once.
	EstimatedInput() int64
}

// Verdict is what a Stream says of one event.
type Verdict struct {
	// Drop: the event is not for the client (the usage chunk the
	// gateway asked for itself).
	Drop bool
	// Error: the event is an error; its data is classified by
	// ClassifyStreamError.
	Error bool
}

// JSON encodes v, made of maps, strings, numbers and nil, which always
// encode: a helper of ErrorBody's implementations.
func JSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
