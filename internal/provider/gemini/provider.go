package gemini

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// Provider is the Gemini API (generateContent) as the gateway and the
// guards see it. It is registered as "gemini" when the package is
// initialised.
type Provider struct{}

func init() { provider.Register(Provider{}) }

// Origin is the API's public endpoint.
const Origin = "https://generativelanguage.googleapis.com"

// The accounted endpoint: generateContent, and streamGenerateContent
// (Route.Stream).
const EndpointGenerate = "generate"

// versions are the API versions whose generateContent is accounted.
var versions = []string{"/v1beta/models/", "/v1/models/", "/v1alpha/models/"}

// Name is "gemini".
func (Provider) Name() string { return Name }

// Upstream: the API key in x-goog-api-key or the key query parameter;
// the response ID comes in the body. At the gateway's root.
func (Provider) Upstream() provider.Upstream {
	return provider.Upstream{
		Origin:            Origin,
		CredentialHeaders: []string{"X-Goog-Api-Key"},
		CredentialQuery:   "key",
		Passthrough:       passthrough,
		AtRoot:            true,
	}
}

// passthrough recognises what only Gemini's clients send: the v1beta,
// v1alpha, upload and download paths, x-goog-api-key, the key parameter.
func passthrough(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, "/v1beta/") || strings.HasPrefix(p, "/v1alpha/") || strings.HasPrefix(p, "/upload/") ||
		strings.HasPrefix(p, "/download/") || r.Header.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key")
}

// Match accounts POST /{v1beta,v1,v1alpha}/models/{model}:generateContent
// and :streamGenerateContent; the model is the path's.
func (Provider) Match(path string) (provider.Route, bool) {
	for _, prefix := range versions {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			continue
		}
		model, method, ok := strings.Cut(rest, ":")
		if !ok || model == "" || strings.Contains(model, "/") {
			return provider.Route{}, false
		}
		switch method {
		case "generateContent":
			return provider.Route{Endpoint: EndpointGenerate, Model: model}, true
		case "streamGenerateContent":
			return provider.Route{Endpoint: EndpointGenerate, Model: model, Stream: true}, true
		}
		return provider.Route{}, false
	}
	return provider.Route{}, false
}

// Inspect takes the model and the stream flag from the route: the body
// names neither.
func (Provider) Inspect(rt provider.Route, body []byte) provider.Request {
	return provider.Request{Model: rt.Model, Stream: rt.Stream, Body: body}
}

// BodyUsage reads a response's usageMetadata (its serviceTier included)
// and responseId.
func (Provider) BodyUsage(_ provider.Route, _ http.Header, body []byte) (provider.Answer, bool) {
	return ResponseUsage(body)
}

// NewStream follows a streamGenerateContent stream: every chunk carries
// the running usage; the stream ends after a chunk with a finish reason.
func (Provider) NewStream(provider.Route, http.Header, provider.Request) provider.Stream {
	return &stream{}
}

type stream struct {
	u        StreamUsage
	id       string
	finished bool
}

var (
	errorWord    = []byte(`"error"`)
	finishReason = []byte(`"finishReason"`)
)

func (s *stream) Observe(_ string, data []byte) provider.Verdict {
	if len(data) == 0 {
		return provider.Verdict{}
	}
	if bytes.Contains(data, errorWord) {
		if _, ok := StreamError(data); ok {
			return provider.Verdict{Error: true}
		}
	}
	if id, err := s.u.ObserveRaw(data); err == nil && id != "" {
		s.id = id
	}
	// A quoted key cannot occur inside a JSON string, where quotes are
	// escaped, so this finds the member itself.
	if bytes.Contains(data, finishReason) {
		s.finished = true
	}
	return provider.Verdict{}
}

func (s *stream) Usage() events.Usage { return s.u.Usage() }
func (s *stream) Complete() bool      { return s.finished }
func (s *stream) ProviderID() string  { return s.id }
func (s *stream) ServiceTier() string { return s.u.ServiceTier() }

// Classifier classifies the SDK's errors.
func (Provider) Classifier() retry.Classifier { return Classifier }

// ClassifyResponse classifies an error response (see the function of the
// same name; the API sends no hint in its headers).
func (Provider) ClassifyResponse(status int, _ http.Header, body []byte, _ time.Time) retry.Classification {
	return ClassifyResponse(status, body)
}

// ClassifyStreamError classifies the error object of a chunk.
func (Provider) ClassifyStreamError(_ http.Header, data []byte, _ time.Time) retry.Classification {
	c, ok := StreamError(data)
	if !ok {
		// Not an error object: nothing says more than that it failed.
		c = retry.Classification{Kind: events.KindOther, Message: "error event in stream"}
	}
	return c
}

// errorStatus is the RPC status of the errors the gateway makes itself,
// by HTTP status; INTERNAL for the others.
var errorStatus = map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

// ErrorBody is {"error":{"code":...,"message":...,"status":...}}.
func (Provider) ErrorBody(status int, msg string) []byte {
	rpc := errorStatus[status]
	if rpc == "" {
		rpc = "INTERNAL"
	}
	return provider.JSON(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": rpc}})
}

// RateLimits is the zero Observed: the API sends no rate-limit headers.
func (Provider) RateLimits(http.Header, time.Time) guard.Observed { return guard.Observed{} }
