package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// TestConformance runs the providers' conformance suite: Gemini's test is
// its tables.
func TestConformance(t *testing.T) {
	providertest.Run(t, Provider{}, features())
}

// features are Gemini's tables for the conformance suite. The API sends
// no rate-limit headers: that scenario is skipped.
func features() providertest.Features {
	const (
		generate = "/v1beta/models/gemini-2.5-flash:generateContent"
		stream   = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
		request  = `{"contents":[{"role":"user","parts":[{"text":"hello"}]}],"model":"not-this-one"}`
	)
	sse := map[string]string{"Content-Type": "text/event-stream"}
	first := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},"index":0}],"usageMetadata":{"promptTokenCount":80,"candidatesTokenCount":1,"totalTokenCount":81},"responseId":"r1"}`
	last := `{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":80,"candidatesTokenCount":9,"thoughtsTokenCount":40,"totalTokenCount":129},"responseId":"r1"}`

	return providertest.Features{
		Name: Name,
		Routes: []providertest.RouteCase{
			{Path: generate, Want: provider.Route{Endpoint: EndpointGenerate, Model: "gemini-2.5-flash"}},
			{Path: stream, Want: provider.Route{Endpoint: EndpointGenerate, Model: "gemini-2.5-flash", Stream: true}},
			{Path: "/v1/models/gemini-pro:generateContent", Want: provider.Route{Endpoint: EndpointGenerate, Model: "gemini-pro"}},
			{Path: "/v1alpha/models/g:generateContent", Want: provider.Route{Endpoint: EndpointGenerate, Model: "g"}},
		},
		NotRoutes: []string{
			"/v1beta/models/gemini-2.5-flash:countTokens", "/v1beta/models/:generateContent", "/v1beta/models/a/b:generateContent",
			"/v1beta/tunedModels/x:generateContent", "/v1beta/models/g", "/v1/chat/completions", "/v2/models/g:generateContent",
		},
		Requests: []providertest.RequestCase{
			{Name: "the model is the path's", Path: generate, Body: request, Model: "gemini-2.5-flash"},
			{Name: "the path says it streams", Path: stream, Body: request, Model: "gemini-2.5-flash", Stream: true},
		},
		Bodies: []providertest.BodyCase{
			{
				Name: "tool-use prompt and thoughts are added", Path: generate,
				Body:  `{"candidates":[],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":20,"cachedContentTokenCount":40,"toolUsePromptTokenCount":5,"thoughtsTokenCount":7},"responseId":"resp-1"}`,
				Usage: events.Usage{InputTokens: 105, OutputTokens: 27, CacheReadInputTokens: 40, ReasoningTokens: 7}, ProviderID: "resp-1",
			},
			{
				Name: "the service tier of usageMetadata", Path: generate,
				Body:  `{"candidates":[],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"thoughtsTokenCount":3,"serviceTier":"flex"},"responseId":"resp-2"}`,
				Usage: events.Usage{InputTokens: 10, OutputTokens: 5, ReasoningTokens: 3}, ProviderID: "resp-2", ServiceTier: "flex",
			},
			{
				Name: "an unspecified service tier is none", Path: generate,
				Body:  `{"candidates":[],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":2,"serviceTier":"unspecified"}}`,
				Usage: events.Usage{InputTokens: 10, OutputTokens: 2},
			},
			{
				Name: "an array of chunks: the last with usage counts", Path: stream,
				Body:  `[{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":1},"responseId":"r"},{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":9}},{"candidates":[]}]`,
				Usage: events.Usage{InputTokens: 100, OutputTokens: 9}, ProviderID: "r",
			},
			{Name: "no usage metadata", Path: generate, Body: `{"candidates":[]}`, NoUsage: true},
		},
		Streams: []providertest.StreamCase{
			{
				Name: "complete", Path: stream, Request: request, Header: sse,
				Events: []providertest.Event{{Data: first}, {Data: ""}, {Data: last}},
				Usage:  events.Usage{InputTokens: 80, OutputTokens: 49, ReasoningTokens: 40}, ProviderID: "r1",
				Cuts: []providertest.Cut{
					{After: 1, Usage: events.Usage{InputTokens: 80, OutputTokens: 1}, Lost: "the output since the last chunk: each carries the running total"},
				},
			},
			{
				Name: "error chunk midway", Path: stream, Request: request, Header: sse,
				Events: []providertest.Event{{Data: first}, {Data: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`}},
				Usage:  events.Usage{InputTokens: 80, OutputTokens: 1}, ProviderID: "r1", Incomplete: true, Errors: []int{1},
			},
			{
				Name: "the word error in the text is content", Path: stream, Request: request, Header: sse,
				Events:     []providertest.Event{{Data: `{"candidates":[{"content":{"parts":[{"text":"\"error\""}]}}],"responseId":"abc"}`}},
				ProviderID: "abc", Incomplete: true,
			},
		},
		StreamErrors: []providertest.StreamErrorCase{
			{
				Name: "internal", Data: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`,
				Want: providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, MessageContains: "INTERNAL: An internal error has occurred."},
			},
			{
				Name: "unavailable", Data: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`,
				Want: providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "UNAVAILABLE: The model is overloaded."},
			},
		},
		Responses: responses,
		ErrorBodies: providertest.ErrorBodies{
			Kinds: map[int]events.ErrorKind{
				400: events.KindClient, 401: events.KindAuth, 403: events.KindAuth, 408: events.KindServer, 409: events.KindServer,
				413: events.KindClient, 429: events.KindRateLimit, 502: events.KindOverloaded, 503: events.KindOverloaded, 504: events.KindTimeout,
			},
			Parse: func(body []byte) (string, error) {
				var r struct {
					Error *genai.APIError `json:"error"`
				}
				if err := json.Unmarshal(body, &r); err != nil {
					return "", err
				}
				if r.Error == nil || r.Error.Code == 0 || r.Error.Status == "" {
					return "", errors.New("no error object with a code and a status: not a Gemini error")
				}
				return r.Error.Message, nil
			},
		},
		RateLimits: []providertest.RateLimitCase{
			{
				Name:   "other providers' headers mean nothing here",
				Header: map[string]string{"X-Ratelimit-Limit-Requests": "500", "Anthropic-Ratelimit-Requests-Limit": "50"},
			},
		},
		SDK: &providertest.SDK{
			Call: func(ctx context.Context, t testing.TB, baseURL string, hc *http.Client) error {
				return call(ctx, t, baseURL, hc, 0)
			},
			RequestTimeout: func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error {
				return call(ctx, t, baseURL, nil, d)
			},
		},
	}
}

// call makes one call with a client built as newClient builds it.
func call(ctx context.Context, t testing.TB, baseURL string, hc *http.Client, timeout time.Duration) error {
	_, err := newClient(t, baseURL, hc, timeout).Models.GenerateContent(ctx, model, genai.Text("hello"), GenerateContentConfig(nil))
	return err
}

// responses are the error responses of the API and their classification,
// raw and through the SDK.
var responses = []providertest.ResponseCase{
	{
		Name:  "429 per-minute quota with RetryInfo",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", quotaMessage, perMinute)},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 33 * time.Second, HasHint: true, MessageContains: "429 Too Many Requests: RESOURCE_EXHAUSTED: You exceeded your current quota"},
	},
	{
		Name:  "429 with a fractional RetryInfo",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", "slow down", `[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.250s"}]`)},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 250 * time.Millisecond, HasHint: true},
	},
	{
		// genai.APIError has no headers, so a Retry-After header is
		// invisible: the hint only ever comes from RetryInfo.
		Name:  "429 with retry-after headers but no RetryInfo",
		Reply: providertest.Reply{Status: 429, Header: map[string]string{"Content-Type": "application/json", "Retry-After": "5", "Retry-After-Ms": "5000"}, Body: errorBody(429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later.", "")},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true},
	},
	{
		Name:  "429 daily quota",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", quotaMessage, perDay)},
		Want:  providertest.Want{Kind: events.KindQuota, Status: 429, Hint: 17 * time.Second, HasHint: true, MessageContains: "exceeded your current quota"},
	},
	{
		Name:  "429 daily quota in ErrorInfo",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Gemini 2.5 Pro Requests' and limit 'Gemini 2.5 Pro Requests per day'", errorInfoDaily)},
		Want:  providertest.Want{Kind: events.KindQuota, Status: 429},
	},
	{
		Name:  "429 quota with limit 0",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader, Body: errorBody(429, "RESOURCE_EXHAUSTED", "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 0, model: gemini-test", "")},
		Want:  providertest.Want{Kind: events.KindQuota, Status: 429},
	},
	{
		Name:  "503 unavailable",
		Reply: providertest.Reply{Status: 503, Header: jsonHeader, Body: errorBody(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", "")},
		Want:  providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "503 Service Unavailable: UNAVAILABLE: The model is overloaded."},
	},
	{
		Name:  "500 internal",
		Reply: providertest.Reply{Status: 500, Header: jsonHeader, Body: errorBody(500, "INTERNAL", "An internal error has occurred.", "")},
		Want:  providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true},
	},
	{
		Name:  "504 deadline exceeded",
		Reply: providertest.Reply{Status: 504, Header: jsonHeader, Body: errorBody(504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", "")},
		Want:  providertest.Want{Kind: events.KindTimeout, Status: 504, Retryable: true},
	},
	{
		Name:  "unavailable without a code",
		Reply: providertest.Reply{Status: 503, Header: jsonHeader, Body: `{"error":{"message":"try later","status":"UNAVAILABLE"}}`},
		Want:  providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "503 Service Unavailable: UNAVAILABLE: try later"},
		// The SDK leaves the code 0; the raw response's status says more.
		SDKWant: &providertest.Want{Kind: events.KindOverloaded, Retryable: true, MessageContains: "503 Service Unavailable: UNAVAILABLE: try later"},
	},
	{
		Name:  "400 invalid argument",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader, Body: errorBody(400, "INVALID_ARGUMENT", "Request contains an invalid argument.", "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400, MessageContains: "INVALID_ARGUMENT"},
	},
	{
		Name:  "400 failed precondition",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader, Body: errorBody(400, "FAILED_PRECONDITION", "User location is not supported for the API use.", "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400},
	},
	{
		Name:  "401 unauthenticated",
		Reply: providertest.Reply{Status: 401, Header: jsonHeader, Body: errorBody(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", "")},
		Want:  providertest.Want{Kind: events.KindAuth, Status: 401},
	},
	{
		Name:  "403 permission denied",
		Reply: providertest.Reply{Status: 403, Header: jsonHeader, Body: errorBody(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers.", "")},
		Want:  providertest.Want{Kind: events.KindAuth, Status: 403},
	},
	{
		Name:  "404 not found",
		Reply: providertest.Reply{Status: 404, Header: jsonHeader, Body: errorBody(404, "NOT_FOUND", "models/gemini-test is not found for API version v1beta", "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 404},
	},
	{
		Name:  "413 payload too large",
		Reply: providertest.Reply{Status: 413, Header: jsonHeader, Body: errorBody(413, "", "Request payload size exceeds the limit", "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 413},
	},
	{
		// The override header is invisible through genai.APIError, so
		// the status rule stands.
		Name:  "500 with x-should-retry false stays retryable",
		Reply: providertest.Reply{Status: 500, Header: map[string]string{"Content-Type": "application/json", "X-Should-Retry": "false"}, Body: errorBody(500, "INTERNAL", "internal", "")},
		Want:  providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true},
	},
	{
		Name:  "400 with x-should-retry true stays final",
		Reply: providertest.Reply{Status: 400, Header: map[string]string{"Content-Type": "application/json", "X-Should-Retry": "true"}, Body: errorBody(400, "INVALID_ARGUMENT", "bad", "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400},
	},
	{
		Name:  "long message is cut to 1 KiB",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader, Body: errorBody(400, "INVALID_ARGUMENT", strings.Repeat("→", 1000), "")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400},
	},
}
