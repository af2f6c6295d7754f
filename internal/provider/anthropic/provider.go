package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// Provider is the Anthropic Messages API as the gateway and the guards
// see it. It is registered as "anthropic" when the package is
// initialised.
type Provider struct{}

func init() { provider.Register(Provider{}) }

// Origin is the API's public endpoint.
const Origin = "https://api.anthropic.com"

// messagesPath is the one accounted endpoint.
const messagesPath = "/v1/messages"

// rateLimitHeaders are the anthropic-ratelimit-{requests,input-tokens,
// output-tokens}-{limit,remaining,reset} headers (reset an RFC 3339
// time). The combined anthropic-ratelimit-tokens-* repeats the most
// restrictive of the two token limits and is not read.
var rateLimitHeaders = guard.RateLimitHeaders{
	{Dim: guard.Requests, Limit: "Anthropic-Ratelimit-Requests-Limit", Remaining: "Anthropic-Ratelimit-Requests-Remaining", Reset: "Anthropic-Ratelimit-Requests-Reset", ResetIsDate: true},
	{Dim: guard.InputTokens, Limit: "Anthropic-Ratelimit-Input-Tokens-Limit", Remaining: "Anthropic-Ratelimit-Input-Tokens-Remaining", Reset: "Anthropic-Ratelimit-Input-Tokens-Reset", ResetIsDate: true},
	{Dim: guard.OutputTokens, Limit: "Anthropic-Ratelimit-Output-Tokens-Limit", Remaining: "Anthropic-Ratelimit-Output-Tokens-Remaining", Reset: "Anthropic-Ratelimit-Output-Tokens-Reset", ResetIsDate: true},
}

// Name is "anthropic".
func (Provider) Name() string { return Name }

// Upstream: the API key in x-api-key (or an OAuth token in
// Authorization), the request ID in request-id; at the gateway's root.
func (Provider) Upstream() provider.Upstream {
	return provider.Upstream{
		Origin:            Origin,
		CredentialHeaders: []string{"X-Api-Key", "Authorization"},
		RequestIDHeader:   RequestIDHeader,
		Passthrough:       passthrough,
		AtRoot:            true,
	}
}

// passthrough recognises what only Anthropic's clients send: the
// anthropic-version header, x-api-key, and the paths under /v1/messages
// (batches, count_tokens).
func passthrough(r *http.Request) bool {
	return r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" || strings.HasPrefix(r.URL.Path, messagesPath)
}

// Match accounts POST /v1/messages.
func (Provider) Match(path string) (provider.Route, bool) {
	if path == messagesPath {
		return provider.Route{Endpoint: "messages"}, true
	}
	return provider.Route{}, false
}

// Inspect reads the model and the stream flag; the body goes as it came.
func (Provider) Inspect(_ provider.Route, body []byte) provider.Request {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &req) // not JSON: the API will refuse it
	return provider.Request{Model: req.Model, Stream: req.Stream, Body: body}
}

// BodyUsage reads a message's usage and service tier, and the request-id
// header.
func (Provider) BodyUsage(_ provider.Route, header http.Header, body []byte) (provider.Answer, bool) {
	u, tier, ok := MessageUsage(body)
	return provider.Answer{Usage: u, ProviderID: RequestID(header), ServiceTier: tier}, ok
}

// NewStream follows a Messages stream: message_start carries the input,
// message_delta the cumulative output; message_stop ends it.
func (Provider) NewStream(_ provider.Route, header http.Header, _ provider.Request) provider.Stream {
	return &stream{id: RequestID(header)}
}

type stream struct {
	u    StreamUsage
	id   string
	done bool
}

func (s *stream) Observe(name string, data []byte) provider.Verdict {
	switch name {
	case "error":
		return provider.Verdict{Error: true}
	case "message_stop":
		s.done = true
	}
	_ = s.u.ObserveRaw(name, data) // an unreadable event leaves the usage as it was
	return provider.Verdict{}
}

func (s *stream) Usage() events.Usage { return s.u.Usage() }
func (s *stream) Complete() bool      { return s.done }
func (s *stream) ProviderID() string  { return s.id }
func (s *stream) ServiceTier() string { return s.u.ServiceTier() }

// Classifier classifies the SDK's errors.
func (Provider) Classifier() retry.Classifier { return Classifier }

// ClassifyResponse classifies an error response (see the function of the
// same name).
func (Provider) ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	return ClassifyResponse(status, header, body, now)
}

// ClassifyStreamError classifies an error event (see the function of the
// same name).
func (Provider) ClassifyStreamError(header http.Header, data []byte, now time.Time) retry.Classification {
	return ClassifyStreamError(header, data, now)
}

// ErrorBody is {"type":"error","error":{"type":...,"message":...}}, with
// the error type the API gives status.
func (Provider) ErrorBody(status int, msg string) []byte {
	typ := "api_error"
	switch {
	case status == http.StatusServiceUnavailable:
		typ = "overloaded_error"
	case status == http.StatusGatewayTimeout:
		typ = "timeout_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = typeRequestTooLarge
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	return provider.JSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// RateLimits reads the anthropic-ratelimit-* headers.
func (Provider) RateLimits(header http.Header, now time.Time) guard.Observed {
	return rateLimitHeaders.RateLimits(header, now)
}
