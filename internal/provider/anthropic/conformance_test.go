package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// TestConformance runs the providers' conformance suite: Anthropic's test
// is its tables.
func TestConformance(t *testing.T) {
	providertest.Run(t, Provider{}, features())
}

// Events of a Messages stream.
const (
	eventStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1,"cache_read_input_tokens":900,"cache_creation_input_tokens":60}}}`
	eventBlock = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	eventDelta = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`
	eventStop  = `{"type":"content_block_stop","index":0}`
	eventUsage = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":37}}`
	eventEnd   = `{"type":"message_stop"}`
)

// features are Anthropic's tables for the conformance suite.
func features() providertest.Features {
	sse := map[string]string{"Content-Type": "text/event-stream", RequestIDHeader: "req_stream"}
	complete := []providertest.Event{
		{Name: "message_start", Data: eventStart},
		{Name: "content_block_start", Data: eventBlock},
		{Name: "ping", Data: `{"type": "ping"}`},
		{Name: "content_block_delta", Data: eventDelta},
		{Name: "content_block_stop", Data: eventStop},
		{Name: "message_delta", Data: eventUsage},
		{Name: "message_stop", Data: eventEnd},
	}
	whole := events.Usage{InputTokens: 1000, OutputTokens: 37, CacheReadInputTokens: 900, CacheCreationInputTokens: 60}
	started := events.Usage{InputTokens: 1000, OutputTokens: 1, CacheReadInputTokens: 900, CacheCreationInputTokens: 60}
	const streamRequest = `{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`

	return providertest.Features{
		Name:      Name,
		Routes:    []providertest.RouteCase{{Path: "/v1/messages", Want: provider.Route{Endpoint: "messages"}}},
		NotRoutes: []string{"/v1/messages/count_tokens", "/v1/messages/batches", "/v1/complete", "/v1/models", "/v1/chat/completions", "/anthropic/v1/messages"},
		Requests: []providertest.RequestCase{
			{Name: "whole", Path: "/v1/messages", Body: `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`, Model: "claude-test"},
			{Name: "stream", Path: "/v1/messages", Body: streamRequest, Model: "claude-test", Stream: true},
			{Name: "no model", Path: "/v1/messages", Body: `{"max_tokens":64,"messages":[]}`},
		},
		Bodies: []providertest.BodyCase{
			{
				Name: "cache read and creation are added to the input", Path: "/v1/messages", Header: map[string]string{RequestIDHeader: "req_body"},
				Body:  `{"id":"msg_1","type":"message","usage":{"input_tokens":120,"output_tokens":512,"cache_read_input_tokens":2034,"cache_creation_input_tokens":10}}`,
				Usage: events.Usage{InputTokens: 2164, OutputTokens: 512, CacheReadInputTokens: 2034, CacheCreationInputTokens: 10}, ProviderID: "req_body",
			},
			{
				Name: "null cache counts", Path: "/v1/messages",
				Body:  `{"id":"msg_2","type":"message","usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":null,"cache_creation_input_tokens":null}}`,
				Usage: events.Usage{InputTokens: 3, OutputTokens: 1},
			},
			{
				Name: "the 1-hour cache write, thinking and the service tier", Path: "/v1/messages",
				Body: `{"id":"msg_3","type":"message","usage":{"input_tokens":50,"output_tokens":900,"cache_read_input_tokens":1000,"cache_creation_input_tokens":300,` +
					`"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens_details":{"thinking_tokens":640},"service_tier":"priority"}}`,
				Usage: events.Usage{InputTokens: 1350, OutputTokens: 900, CacheReadInputTokens: 1000, CacheCreationInputTokens: 300,
					CacheCreation1hInputTokens: 200, ReasoningTokens: 640},
				ServiceTier: "priority",
			},
			{
				Name: "the cache write is at least its two parts", Path: "/v1/messages",
				Body:  `{"id":"msg_4","type":"message","usage":{"input_tokens":5,"output_tokens":2,"cache_creation":{"ephemeral_5m_input_tokens":7,"ephemeral_1h_input_tokens":3},"service_tier":"standard"}}`,
				Usage: events.Usage{InputTokens: 15, OutputTokens: 2, CacheCreationInputTokens: 10, CacheCreation1hInputTokens: 3}, ServiceTier: "standard",
			},
			{
				Name: "thinking above the output is cut to it", Path: "/v1/messages",
				Body:  `{"id":"msg_5","type":"message","usage":{"input_tokens":5,"output_tokens":2,"output_tokens_details":{"thinking_tokens":9}}}`,
				Usage: events.Usage{InputTokens: 5, OutputTokens: 2, ReasoningTokens: 2},
			},
			{Name: "an error has no usage", Path: "/v1/messages", Body: `{"type":"error","error":{"type":"api_error","message":"x"}}`, NoUsage: true},
		},
		Streams: []providertest.StreamCase{
			{
				Name: "complete", Path: "/v1/messages", Request: streamRequest, Header: sse, Events: complete,
				Usage: whole, ProviderID: "req_stream",
				Cuts: []providertest.Cut{
					{After: 1, Usage: started, Lost: "the output after message_start's count: message_delta carries the cumulative output"},
					{After: 4, Usage: started, Lost: "the output streamed since message_start"},
					{After: 6, Usage: whole}, // message_delta arrived; only message_stop is missing
				},
			},
			{
				Name: "a message_delta's input counts replace message_start's", Path: "/v1/messages", Request: streamRequest, Header: sse,
				Events: []providertest.Event{
					{Name: "message_start", Data: `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":0}}}`},
					{Name: "message_delta", Data: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":57}}`},
					{Name: "message_delta", Data: `{"type":"message_delta","usage":{"output_tokens":60,"input_tokens":25}}`},
					{Name: "message_stop", Data: eventEnd},
				},
				Usage: events.Usage{InputTokens: 125, OutputTokens: 60, CacheReadInputTokens: 100}, ProviderID: "req_stream",
			},
			{
				Name: "thinking, the 1-hour cache write and the tier", Path: "/v1/messages", Request: streamRequest, Header: sse,
				Events: []providertest.Event{
					{Name: "message_start", Data: `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"output_tokens":1,"cache_read_input_tokens":100,` +
						`"cache_creation_input_tokens":80,"cache_creation":{"ephemeral_5m_input_tokens":30,"ephemeral_1h_input_tokens":50},"service_tier":"priority"}}}`},
					{Name: "content_block_start", Data: `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
					{Name: "message_delta", Data: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":500,"output_tokens_details":{"thinking_tokens":300}}}`},
					{Name: "message_stop", Data: eventEnd},
				},
				Usage:       events.Usage{InputTokens: 200, OutputTokens: 500, CacheReadInputTokens: 100, CacheCreationInputTokens: 80, CacheCreation1hInputTokens: 50, ReasoningTokens: 300},
				ProviderID:  "req_stream",
				ServiceTier: "priority",
				Cuts: []providertest.Cut{
					{After: 2, Usage: events.Usage{InputTokens: 200, OutputTokens: 1, CacheReadInputTokens: 100, CacheCreationInputTokens: 80, CacheCreation1hInputTokens: 50},
						Lost: "the output and its thinking part: message_delta carries them"},
				},
			},
			{
				Name: "an unreadable event leaves the usage as it was", Path: "/v1/messages", Request: streamRequest, Header: sse,
				Events: []providertest.Event{{Name: "message_start", Data: eventStart}, {Name: "message_delta", Data: `{`}},
				Usage:  started, ProviderID: "req_stream", Incomplete: true,
			},
			{
				Name: "overloaded error event after message_start", Path: "/v1/messages", Request: streamRequest, Header: sse,
				Events: []providertest.Event{
					{Name: "message_start", Data: eventStart},
					{Name: "content_block_start", Data: eventBlock},
					{Name: "error", Data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
				},
				Usage: started, ProviderID: "req_stream", Incomplete: true, Errors: []int{2},
			},
		},
		StreamErrors: []providertest.StreamErrorCase{
			{
				Name: "overloaded", Header: map[string]string{RequestIDHeader: "req_s"}, Data: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
				Want: providertest.Want{Kind: events.KindOverloaded, Retryable: true, ProviderRequestID: "req_s", MessageContains: "error event in stream: overloaded_error: Overloaded"},
			},
			{
				Name: "invalid request", Header: map[string]string{RequestIDHeader: "req_s"}, Data: `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`,
				Want: providertest.Want{Kind: events.KindClient, ProviderRequestID: "req_s"},
			},
			{
				Name: "billing", Data: `{"type":"error","error":{"type":"billing_error","message":"no credit"}}`,
				Want: providertest.Want{Kind: events.KindQuota},
			},
		},
		Responses: responses,
		ErrorBodies: providertest.ErrorBodies{
			Kinds: map[int]events.ErrorKind{
				400: events.KindClient, 401: events.KindAuth, 403: events.KindAuth, 408: events.KindTimeout, 409: events.KindServer,
				413: events.KindClient, 429: events.KindRateLimit, 502: events.KindServer, 503: events.KindOverloaded, 504: events.KindTimeout,
			},
			Parse: func(body []byte) (string, error) {
				var ae sdk.Error
				if err := ae.UnmarshalJSON(body); err != nil {
					return "", err
				}
				if ae.Type() == "" {
					return "", errors.New("no error.type: not an Anthropic error")
				}
				return ae.Message, nil
			},
		},
		RateLimits: []providertest.RateLimitCase{
			{
				Name: "requests and token limits", Header: map[string]string{
					"anthropic-ratelimit-requests-limit":          "50",
					"anthropic-ratelimit-requests-remaining":      "49",
					"anthropic-ratelimit-requests-reset":          "2026-01-02T03:04:06Z",
					"anthropic-ratelimit-input-tokens-limit":      "30000",
					"anthropic-ratelimit-input-tokens-remaining":  "0",
					"anthropic-ratelimit-input-tokens-reset":      "2026-01-02T03:04:07.5Z",
					"anthropic-ratelimit-output-tokens-limit":     "8000",
					"anthropic-ratelimit-output-tokens-remaining": "7990",
					"anthropic-ratelimit-tokens-limit":            "38000", // repeats the tighter of the two: not read
				},
				Want: guard.Observed{
					Limit:        guard.Limits{guard.Requests: 50, guard.InputTokens: 30000, guard.OutputTokens: 8000},
					Remaining:    [guard.NumDims]int64{guard.Requests: 49, guard.InputTokens: 0, guard.OutputTokens: 7990},
					HasRemaining: [guard.NumDims]bool{guard.Requests: true, guard.InputTokens: true, guard.OutputTokens: true},
					Reset:        [guard.NumDims]time.Time{guard.Requests: providertest.Now.Add(time.Second), guard.InputTokens: providertest.Now.Add(2500 * time.Millisecond)},
				},
			},
			{
				Name: "OpenAI's headers are not Anthropic's", Header: map[string]string{"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499"},
				Want: guard.Observed{},
			},
		},
		SDK: &providertest.SDK{
			Call: func(ctx context.Context, t testing.TB, baseURL string, hc *http.Client) error {
				return call(ctx, t, baseURL, option.WithHTTPClient(hc))
			},
			RequestTimeout: func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error {
				return call(ctx, t, baseURL, option.WithRequestTimeout(d))
			},
		},
	}
}

// call makes one call with a client built as newClient builds it.
func call(ctx context.Context, t testing.TB, baseURL string, opts ...option.RequestOption) error {
	client := newClient(t, baseURL, opts...)
	_, err := client.Messages.New(ctx, newParams())
	return err
}

// responses are the error responses of the Messages API and their
// classification, raw and through the SDK.
var responses = []providertest.ResponseCase{
	{
		Name:  "429 with retry-after",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_429", "Retry-After", "7"), Body: errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 7 * time.Second, HasHint: true, ProviderRequestID: "req_429", MessageContains: "429 Too Many Requests: rate_limit_error: Number of request tokens"},
	},
	{
		Name:  "429 with retry-after-ms",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_429ms", "Retry-After", "7", "Retry-After-Ms", "250"), Body: errorBody("rate_limit_error", "slow down")},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 250 * time.Millisecond, HasHint: true, ProviderRequestID: "req_429ms"},
	},
	{
		Name:  "429 with an HTTP-date retry-after",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_date", "Retry-After", providertest.Now.Add(9*time.Second).Format(http.TimeFormat)), Body: errorBody("rate_limit_error", "slow down")},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 9 * time.Second, HasHint: true, ProviderRequestID: "req_date"},
	},
	{
		Name:  "429 ramp limit",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_ramp", "Retry-After", "3"), Body: `{"type":"error","error":{"type":"rate_limit_error","message":"ramp","details":{"error_code":"ramp_limit_exceeded"}}}`},
		Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 3 * time.Second, HasHint: true, ProviderRequestID: "req_ramp"},
	},
	{
		Name:  "529 overloaded",
		Reply: providertest.Reply{Status: 529, Header: jsonHeader("req_529"), Body: errorBody("overloaded_error", "Overloaded")},
		Want:  providertest.Want{Kind: events.KindOverloaded, Status: 529, Retryable: true, ProviderRequestID: "req_529", MessageContains: "529: overloaded_error: Overloaded"},
	},
	{
		Name:  "500 api error",
		Reply: providertest.Reply{Status: 500, Header: jsonHeader("req_500"), Body: errorBody("api_error", "Internal server error")},
		Want:  providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, ProviderRequestID: "req_500", MessageContains: "api_error"},
	},
	{
		Name:  "503 with an HTML body",
		Reply: providertest.Reply{Status: 503, Header: map[string]string{"Content-Type": "text/html"}, Body: "<html><body>upstream connect error</body></html>"},
		Want:  providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, MessageContains: "503 Service Unavailable", MessageLacks: "<html>"},
	},
	{
		Name:  "504 timeout error",
		Reply: providertest.Reply{Status: 504, Header: jsonHeader("req_504"), Body: errorBody("timeout_error", "Request timed out")},
		Want:  providertest.Want{Kind: events.KindTimeout, Status: 504, Retryable: true, ProviderRequestID: "req_504"},
	},
	{
		Name:  "409 conflict",
		Reply: providertest.Reply{Status: 409, Header: jsonHeader("req_409"), Body: errorBody("conflict_error", "conflict")},
		Want:  providertest.Want{Kind: events.KindServer, Status: 409, Retryable: true, ProviderRequestID: "req_409"},
	},
	{
		Name:  "400 invalid request",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_400"), Body: errorBody("invalid_request_error", "messages: field required")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_400", MessageContains: "invalid_request_error: messages: field required"},
	},
	{
		Name:  "401 authentication",
		Reply: providertest.Reply{Status: 401, Header: jsonHeader("req_401"), Body: errorBody("authentication_error", "invalid x-api-key")},
		Want:  providertest.Want{Kind: events.KindAuth, Status: 401, ProviderRequestID: "req_401"},
	},
	{
		Name:  "403 permission",
		Reply: providertest.Reply{Status: 403, Header: jsonHeader("req_403"), Body: errorBody("permission_error", "not allowed")},
		Want:  providertest.Want{Kind: events.KindAuth, Status: 403, ProviderRequestID: "req_403"},
	},
	{
		Name:  "404 not found",
		Reply: providertest.Reply{Status: 404, Header: jsonHeader("req_404"), Body: errorBody("not_found_error", "model: claude-test")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: "req_404"},
	},
	{
		Name:  "413 request too large",
		Reply: providertest.Reply{Status: 413, Header: jsonHeader("req_413"), Body: errorBody("request_too_large", "Request exceeds the maximum allowed number of bytes")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 413, ProviderRequestID: "req_413"},
	},
	{
		Name:  "400 credit balance too low",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_credit"), Body: errorBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")},
		Want:  providertest.Want{Kind: events.KindQuota, Status: 400, ProviderRequestID: "req_credit", MessageContains: "credit balance is too low"},
	},
	{
		Name:  "402 billing error",
		Reply: providertest.Reply{Status: 402, Header: jsonHeader("req_402"), Body: errorBody("billing_error", "billing")},
		Want:  providertest.Want{Kind: events.KindQuota, Status: 402, ProviderRequestID: "req_402"},
	},
	{
		Name: "429 spend limit is quota, even with x-should-retry true",
		Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_spend", "Retry-After", "60", "X-Should-Retry", "true"),
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"The organization has reached its spend limit","details":{"error_code":"enforced_spend_limit_reached"}}}`},
		Want: providertest.Want{Kind: events.KindQuota, Status: 429, Hint: time.Minute, HasHint: true, ProviderRequestID: "req_spend"},
	},
	{
		Name:  "500 with x-should-retry false",
		Reply: providertest.Reply{Status: 500, Header: jsonHeader("req_nsr", "X-Should-Retry", "false"), Body: errorBody("api_error", "do not retry")},
		Want:  providertest.Want{Kind: events.KindServer, Status: 500, ProviderRequestID: "req_nsr"},
	},
	{
		Name:  "400 with x-should-retry true",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_sr", "X-Should-Retry", "true"), Body: errorBody("invalid_request_error", "transient")},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400, Retryable: true, ProviderRequestID: "req_sr"},
	},
	{
		Name:  "long message is cut to 1 KiB",
		Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_long"), Body: errorBody("invalid_request_error", strings.Repeat("é", 2000))},
		Want:  providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_long", MessageContains: "invalid_request_error: éé"},
	},
}
