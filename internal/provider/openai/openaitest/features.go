// Package openaitest holds the tables of OpenAI's dialect for the
// providers' conformance suite (providertest.Run): OpenAI's own provider
// and every OpenAI-compatible one (a preset or an --upstream, made with
// openai.New) run them, each under its own name and request ID header.
//
// It is for tests only.
package openaitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// ErrorJSON is an error response body in OpenAI's format; code "" is sent
// as null.
func ErrorJSON(typ, code, msg string) string {
	c := "null"
	if code != "" {
		c = fmt.Sprintf("%q", code)
	}
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%s}}`, msg, typ, c)
}

// SDK is the openai-go SDK, built with opts (pass openai.ClientOptions()),
// making one chat completion against the suite's server.
func SDK(opts ...option.RequestOption) *providertest.SDK {
	call := func(ctx context.Context, baseURL string, extra ...option.RequestOption) error {
		all := append([]option.RequestOption{option.WithBaseURL(baseURL), option.WithAPIKey("sk-test")}, extra...)
		client := sdk.NewClient(append(all, opts...)...)
		_, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")},
		})
		return err
	}
	return &providertest.SDK{
		Call: func(ctx context.Context, _ testing.TB, baseURL string, hc *http.Client) error {
			return call(ctx, baseURL, option.WithHTTPClient(hc))
		},
		RequestTimeout: func(ctx context.Context, t testing.TB, baseURL string, d time.Duration) error {
			hc := &http.Client{}
			t.Cleanup(hc.CloseIdleConnections)
			return call(ctx, baseURL, option.WithHTTPClient(hc), option.WithRequestTimeout(d))
		},
	}
}

// Chunks of a streamed chat completion: two content chunks, the finish
// chunk and the usage chunk (the stream ends with [DONE]).
const (
	ChunkHello = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}],"usage":null}`
	ChunkLo    = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null}`
	ChunkStop  = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`
	ChunkUsage = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":2,"total_tokens":1202,"prompt_tokens_details":{"cached_tokens":1024}}}`
)

// Features are the tables of a provider in OpenAI's dialect named name,
// whose upstream names a request in the header idHeader ("" when it
// does not). They have OpenAI's rate-limit headers; a compatible upstream
// that sends others (or none) replaces RateLimits. SDK is nil: the
// caller sets it (SDK(openai.ClientOptions()...)).
func Features(name, idHeader string) providertest.Features {
	// id is the provider's ID of a request that the upstream named reqID.
	id := func(reqID string) string {
		if idHeader == "" {
			return ""
		}
		return reqID
	}
	// header is a response's header with the request named reqID.
	header := func(reqID string, kv ...string) map[string]string {
		h := map[string]string{}
		if idHeader != "" {
			h[idHeader] = reqID
		}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	jsonHeader := func(reqID string, kv ...string) map[string]string {
		return header(reqID, append([]string{"Content-Type", "application/json"}, kv...)...)
	}
	sse := header("req_s", "Content-Type", "text/event-stream")
	const (
		chat      = "/v1/chat/completions"
		responses = "/v1/responses"
	)
	const streamAsking = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`
	const streamPlain = `{"model":"gpt-test","stream":true,"messages":[]}`
	whole := events.Usage{InputTokens: 1200, OutputTokens: 2, CacheReadInputTokens: 1024}
	chunks := []providertest.Event{{Data: ChunkHello}, {Data: ChunkLo}, {Data: ChunkStop}, {Data: ChunkUsage}, {Data: "[DONE]"}}
	content := providertest.Event{Data: `{"choices":[{"delta":{"content":"Hi"}}]}`}

	return providertest.Features{
		Name: name,
		Routes: []providertest.RouteCase{
			{Path: chat, Want: provider.Route{Endpoint: "chat"}},
			{Path: responses, Want: provider.Route{Endpoint: "responses"}},
			{Path: "/v1/embeddings", Want: provider.Route{Endpoint: "embeddings"}},
		},
		NotRoutes: []string{"/v2/chat/completions", "/v1/models", "/v1/messages", "/v1/responses/resp_1", "/v1/completions", "/v1beta/models/m:generateContent"},
		Requests: []providertest.RequestCase{
			{
				Name: "a stream without options gets the usage option first, the rest byte for byte", Path: chat,
				Body:  ` {"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"{hi}"}]}`,
				Model: "gpt-4.1", Stream: true, InjectedUsage: true,
				Sent: ` {"stream_options":{"include_usage":true},"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"{hi}"}]}`,
			},
			{
				Name: "a stream with options of its own keeps them", Path: chat,
				Body:  `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[]}`,
				Model: "m", Stream: true, InjectedUsage: true,
				Sent: `{"messages":[],"model":"m","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`,
			},
			{Name: "a stream that asks for its usage is sent as it is", Path: chat, Body: streamAsking, Model: "gpt-test", Stream: true},
			{
				Name: "null options are replaced", Path: chat, Body: `{"model":"m","stream_options":null,"stream":true}`,
				Model: "m", Stream: true, InjectedUsage: true,
			},
			{Name: "options that are not an object: the API refuses them", Path: chat, Body: `{"model":"m","stream":true,"stream_options":"odd"}`, Model: "m", Stream: true},
			{Name: "a call that does not stream is sent as it is", Path: chat, Body: `{"model":"m","messages":[]}`, Model: "m"},
			{Name: "embeddings never stream", Path: "/v1/embeddings", Body: `{"model":"e","stream":true,"input":"x"}`, Model: "e"},
			{Name: "the Responses stream reports its usage by itself", Path: responses, Body: `{"model":"r","stream":true}`, Model: "r", Stream: true},
		},
		Bodies: []providertest.BodyCase{
			{
				Name: "chat: the cached tokens are a subset of the prompt", Path: chat, Header: header("req_1"),
				Body:  `{"id":"c","usage":{"prompt_tokens":1200,"completion_tokens":8,"total_tokens":1208,"prompt_tokens_details":{"cached_tokens":1024}}}`,
				Usage: events.Usage{InputTokens: 1200, OutputTokens: 8, CacheReadInputTokens: 1024}, ProviderID: id("req_1"),
			},
			{
				Name: "chat: cache writes", Path: chat,
				Body:  `{"usage":{"prompt_tokens":5000,"completion_tokens":5,"total_tokens":5005,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":4096}}}`,
				Usage: events.Usage{InputTokens: 5000, OutputTokens: 5, CacheCreationInputTokens: 4096},
			},
			{
				Name: "responses", Path: responses, Header: header("req_2"),
				Body:  `{"id":"r","usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048,"cache_write_tokens":512},"output_tokens":400}}`,
				Usage: events.Usage{InputTokens: 3000, OutputTokens: 400, CacheReadInputTokens: 2048, CacheCreationInputTokens: 512}, ProviderID: id("req_2"),
			},
			{
				Name: "chat: reasoning is part of the output; the default tier is standard", Path: chat,
				Body: `{"id":"c","service_tier":"default","usage":{"prompt_tokens":100,"completion_tokens":900,"total_tokens":1000,` +
					`"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":768,"audio_tokens":0}}}`,
				Usage:       events.Usage{InputTokens: 100, OutputTokens: 900, CacheReadInputTokens: 64, ReasoningTokens: 768},
				ServiceTier: "standard",
			},
			{
				Name: "chat: the flex tier; reasoning above the output is cut to it", Path: chat,
				Body:        `{"service_tier":"flex","usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":5}}}`,
				Usage:       events.Usage{InputTokens: 1, OutputTokens: 2, ReasoningTokens: 2},
				ServiceTier: "flex",
			},
			{
				Name: "responses: reasoning and the priority tier", Path: responses,
				Body: `{"id":"r","service_tier":"priority","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},` +
					`"output_tokens":500,"output_tokens_details":{"reasoning_tokens":384}}}`,
				Usage:       events.Usage{InputTokens: 300, OutputTokens: 500, CacheReadInputTokens: 256, ReasoningTokens: 384},
				ServiceTier: "priority",
			},
			{
				Name: "the auto tier is what a request asks, not what served it", Path: chat,
				Body:  `{"service_tier":"auto","usage":{"prompt_tokens":1,"completion_tokens":1}}`,
				Usage: events.Usage{InputTokens: 1, OutputTokens: 1},
			},
			{
				Name: "embeddings have no output", Path: "/v1/embeddings",
				Body:  `{"object":"list","data":[],"usage":{"prompt_tokens":42,"total_tokens":42}}`,
				Usage: events.Usage{InputTokens: 42},
			},
			{Name: "chat without usage", Path: chat, Body: `{"id":"c"}`, NoUsage: true},
			{Name: "null usage", Path: chat, Body: `{"usage":null}`, NoUsage: true},
		},
		Streams: []providertest.StreamCase{
			{
				Name: "chat, usage asked by the client", Path: chat, Request: streamAsking, Header: sse, Events: chunks,
				Usage: whole, ProviderID: id("req_s"),
				Cuts: []providertest.Cut{
					{After: 2, Usage: events.Usage{OutputTokens: 2}, Lost: "the input, and the output beyond one token per content chunk: a chat stream reports its usage in its last chunk only"},
					{After: 4, Usage: whole, Complete: true}, // the usage chunk arrived; only [DONE] is missing
				},
			},
			{
				Name: "chat, usage injected: its chunk is dropped", Path: chat, Request: streamPlain, Header: sse,
				Events: []providertest.Event{{Data: ChunkHello}, {Data: ChunkLo}, {Data: ChunkUsage}, {Data: "[DONE]"}},
				Usage:  whole, ProviderID: id("req_s"), Drop: []int{2},
			},
			{
				Name: "chat error object", Path: chat, Request: streamAsking, Header: sse,
				Events: []providertest.Event{content, {Data: `{"error":{"message":"overloaded","type":"server_error"}}`}},
				Usage:  events.Usage{OutputTokens: 1}, ProviderID: id("req_s"), Incomplete: true, Errors: []int{1},
			},
			{
				Name: "the word error in the text is content", Path: chat, Request: streamAsking, Header: sse,
				Events: []providertest.Event{{Data: `{"choices":[{"delta":{"content":"\"error\""}}],"error":"no"}`}},
				Usage:  events.Usage{OutputTokens: 1}, ProviderID: id("req_s"), Incomplete: true,
			},
			{
				Name: "tool calls and refusals count as output", Path: chat, Request: streamAsking, Header: sse,
				Events: []providertest.Event{{Data: `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}},{"delta":{"refusal":"no"}}]}`}},
				Usage:  events.Usage{OutputTokens: 2}, ProviderID: id("req_s"), Incomplete: true,
			},
			{
				Name: "responses", Path: responses, Request: `{"model":"r","stream":true}`, Header: sse,
				Events: []providertest.Event{
					{Name: "response.created", Data: `{"type":"response.created","response":{"id":"r","usage":null}}`},
					{Name: "response.output_text.delta", Data: `{"type":"response.output_text.delta","delta":"Hi"}`},
					{Data: `{"type":"response.output_text.delta","delta":" there"}`},
					{Name: "response.audio.delta", Data: `{"type":"response.audio.delta","delta":"AAAA"}`},
					{Name: "response.completed", Data: `{"type":"response.completed","response":{"id":"r","usage":{"input_tokens":30,"output_tokens":2,"input_tokens_details":{"cached_tokens":10}}}}`},
				},
				Usage: events.Usage{InputTokens: 30, OutputTokens: 2, CacheReadInputTokens: 10}, ProviderID: id("req_s"),
				Cuts: []providertest.Cut{
					{After: 4, Usage: events.Usage{OutputTokens: 2}, Lost: "the input, and the output beyond one token per delta event (audio not counted): the response's usage comes with its last event"},
				},
			},
			{
				Name: "chat: reasoning and the tier of the chunks", Path: chat, Request: streamAsking, Header: sse,
				Events: []providertest.Event{
					{Data: `{"id":"c2","service_tier":"default","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}`},
					{Data: `{"id":"c2","service_tier":"default","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":700,"completion_tokens_details":{"reasoning_tokens":650}}}`},
					{Data: "[DONE]"},
				},
				Usage: events.Usage{InputTokens: 50, OutputTokens: 700, ReasoningTokens: 650}, ProviderID: id("req_s"), ServiceTier: "standard",
				Cuts: []providertest.Cut{
					{After: 1, Usage: events.Usage{OutputTokens: 1}, Lost: "the input, the reasoning and the output beyond one token per content chunk: they come in the last chunk"},
				},
			},
			{
				Name: "responses: reasoning and the tier", Path: responses, Request: `{"model":"r","stream":true}`, Header: sse,
				Events: []providertest.Event{
					{Name: "response.created", Data: `{"type":"response.created","response":{"id":"r","service_tier":"flex","usage":null}}`},
					{Name: "response.output_text.delta", Data: `{"type":"response.output_text.delta","delta":"Hi"}`},
					{Name: "response.completed", Data: `{"type":"response.completed","response":{"id":"r","service_tier":"flex","usage":{"input_tokens":30,"output_tokens":90,"output_tokens_details":{"reasoning_tokens":80}}}}`},
				},
				Usage: events.Usage{InputTokens: 30, OutputTokens: 90, ReasoningTokens: 80}, ProviderID: id("req_s"), ServiceTier: "flex",
				Cuts: []providertest.Cut{
					{After: 2, Usage: events.Usage{OutputTokens: 1}, Lost: "the input, the reasoning and the output beyond one token per delta: the usage comes with the last event"},
				},
			},
			{
				Name: "responses: incomplete ends it too", Path: responses, Request: `{"model":"r","stream":true}`, Header: sse,
				Events: []providertest.Event{{Name: "response.incomplete", Data: `{"type":"response.incomplete","response":{"usage":{"input_tokens":3,"output_tokens":1}}}`}},
				Usage:  events.Usage{InputTokens: 3, OutputTokens: 1}, ProviderID: id("req_s"),
			},
			{
				Name: "responses: failed", Path: responses, Request: `{"model":"r","stream":true}`, Header: sse,
				Events:     []providertest.Event{{Name: "response.failed", Data: `{"type":"response.failed","response":{"error":{"code":"server_error","message":"x"}}}`}},
				ProviderID: id("req_s"), Incomplete: true, Errors: []int{0},
			},
			{
				Name: "responses: error event", Path: responses, Request: `{"model":"r","stream":true}`, Header: sse,
				Events:     []providertest.Event{{Name: "error", Data: `{"type":"error","code":"rate_limit_exceeded","message":"x"}`}},
				ProviderID: id("req_s"), Incomplete: true, Errors: []int{0},
			},
		},
		StreamErrors: []providertest.StreamErrorCase{
			{
				Name: "chat chunk with an error", Data: `{"error":{"message":"The server had an error","type":"server_error","code":null}}`,
				Want: providertest.Want{Kind: events.KindServer, Retryable: true, MessageContains: "error event in stream: server_error: The server had an error"},
			},
			{
				Name: "chat rate limit", Data: `{"error":{"message":"slow","type":"tokens","code":"rate_limit_exceeded"}}`,
				Want: providertest.Want{Kind: events.KindRateLimit, Retryable: true},
			},
			{
				Name: "chat quota", Data: `{"error":{"message":"pay","type":"insufficient_quota","code":"insufficient_quota"}}`,
				Want: providertest.Want{Kind: events.KindQuota},
			},
			{
				Name: "unknown error", Data: `{"error":{"message":"odd","type":"mystery","code":42}}`,
				Want: providertest.Want{Kind: events.KindOther, MessageContains: "mystery: odd"},
			},
			{
				Name: "responses error event", Data: `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3}`,
				Want: providertest.Want{Kind: events.KindRateLimit, Retryable: true, MessageContains: "slow down"},
			},
			{
				Name: "response.failed", Data: `{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"}}}`,
				Want: providertest.Want{Kind: events.KindServer, Retryable: true, MessageContains: "boom"},
			},
		},
		Responses: []providertest.ResponseCase{
			{
				Name:  "429 with retry-after",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_429", "Retry-After", "2"), Body: ErrorJSON("requests", "rate_limit_exceeded", "Rate limit reached for gpt-test on requests per min (RPM)")},
				Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 2 * time.Second, HasHint: true, ProviderRequestID: id("req_429"), MessageContains: "429 Too Many Requests: rate_limit_exceeded: Rate limit reached"},
			},
			{
				Name:  "429 with retry-after-ms",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_429ms", "Retry-After", "2", "Retry-After-Ms", "1500"), Body: ErrorJSON("tokens", "rate_limit_exceeded", "slow down")},
				Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 1500 * time.Millisecond, HasHint: true, ProviderRequestID: id("req_429ms")},
			},
			{
				Name: "429 hint from the exhausted limit's reset",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_reset",
					"X-Ratelimit-Remaining-Requests", "12", "X-Ratelimit-Reset-Requests", "1s",
					"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "6m0s"),
					Body: ErrorJSON("tokens", "rate_limit_exceeded", "Rate limit reached on tokens per min (TPM)")},
				Want: providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 6 * time.Minute, HasHint: true, ProviderRequestID: id("req_reset")},
			},
			{
				Name: "429 insufficient quota",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_quota"),
					Body: ErrorJSON("insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.")},
				Want: providertest.Want{Kind: events.KindQuota, Status: 429, ProviderRequestID: id("req_quota"), MessageContains: "insufficient_quota: You exceeded your current quota"},
			},
			{
				Name:  "400 billing hard limit",
				Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_hard"), Body: ErrorJSON("invalid_request_error", "billing_hard_limit_reached", "Billing hard limit has been reached")},
				Want:  providertest.Want{Kind: events.KindQuota, Status: 400, ProviderRequestID: id("req_hard")},
			},
			{
				Name:  "429 quota is not retried even with x-should-retry true",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_q2", "X-Should-Retry", "true"), Body: ErrorJSON("insufficient_quota", "", "quota")},
				Want:  providertest.Want{Kind: events.KindQuota, Status: 429, ProviderRequestID: id("req_q2")},
			},
			{
				Name:  "500 server error",
				Reply: providertest.Reply{Status: 500, Header: jsonHeader("req_500"), Body: ErrorJSON("server_error", "", "The server had an error while processing your request.")},
				Want:  providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, ProviderRequestID: id("req_500"), MessageContains: "500 Internal Server Error: server_error: The server had an error"},
			},
			{
				Name:  "502 with an HTML body",
				Reply: providertest.Reply{Status: 502, Header: header("req_502", "Content-Type", "text/html"), Body: "<html><body><h1>502 Bad Gateway</h1></body></html>"},
				Want:  providertest.Want{Kind: events.KindServer, Status: 502, Retryable: true, ProviderRequestID: id("req_502"), MessageContains: "502 Bad Gateway", MessageLacks: "<html>"},
			},
			{
				Name:  "429 hint from the requests limit's reset",
				Reply: providertest.Reply{Status: 429, Header: jsonHeader("req_rr", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "1.5s"), Body: ErrorJSON("requests", "rate_limit_exceeded", "slow down")},
				Want:  providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 1500 * time.Millisecond, HasHint: true, ProviderRequestID: id("req_rr")},
			},
			{
				Name:  "503 overloaded",
				Reply: providertest.Reply{Status: 503, Header: jsonHeader("req_503"), Body: ErrorJSON("server_error", "", "The engine is currently overloaded, please try again later")},
				Want:  providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: id("req_503")},
			},
			{
				Name:  "400 invalid request",
				Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_400"), Body: ErrorJSON("invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens.")},
				Want:  providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: id("req_400"), MessageContains: "context_length_exceeded"},
			},
			{
				Name:  "401 invalid key",
				Reply: providertest.Reply{Status: 401, Header: jsonHeader("req_401"), Body: ErrorJSON("invalid_request_error", "invalid_api_key", "Incorrect API key provided")},
				Want:  providertest.Want{Kind: events.KindAuth, Status: 401, ProviderRequestID: id("req_401")},
			},
			{
				Name:  "403 unsupported region",
				Reply: providertest.Reply{Status: 403, Header: jsonHeader("req_403"), Body: ErrorJSON("request_forbidden", "unsupported_country_region_territory", "Country, region, or territory not supported")},
				Want:  providertest.Want{Kind: events.KindAuth, Status: 403, ProviderRequestID: id("req_403")},
			},
			{
				Name:  "404 model not found",
				Reply: providertest.Reply{Status: 404, Header: jsonHeader("req_404"), Body: ErrorJSON("invalid_request_error", "model_not_found", "The model does not exist")},
				Want:  providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: id("req_404")},
			},
			{
				Name:  "422 unprocessable",
				Reply: providertest.Reply{Status: 422, Header: jsonHeader("req_422"), Body: ErrorJSON("invalid_request_error", "", "unprocessable")},
				Want:  providertest.Want{Kind: events.KindClient, Status: 422, ProviderRequestID: id("req_422")},
			},
			{
				Name:  "500 with x-should-retry false",
				Reply: providertest.Reply{Status: 500, Header: jsonHeader("req_nsr", "X-Should-Retry", "false"), Body: ErrorJSON("server_error", "", "no")},
				Want:  providertest.Want{Kind: events.KindServer, Status: 500, ProviderRequestID: id("req_nsr")},
			},
			{
				Name:  "400 with x-should-retry true",
				Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_sr", "X-Should-Retry", "true"), Body: ErrorJSON("invalid_request_error", "", "transient")},
				Want:  providertest.Want{Kind: events.KindClient, Status: 400, Retryable: true, ProviderRequestID: id("req_sr")},
			},
			{
				Name:  "long message is cut to 1 KiB",
				Reply: providertest.Reply{Status: 400, Header: jsonHeader("req_long"), Body: ErrorJSON("invalid_request_error", "", strings.Repeat("ü", 3000))},
				Want:  providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: id("req_long")},
			},
		},
		ErrorBodies: providertest.ErrorBodies{
			Kinds: map[int]events.ErrorKind{
				400: events.KindClient, 401: events.KindAuth, 403: events.KindAuth, 408: events.KindTimeout, 409: events.KindServer,
				413: events.KindClient, 429: events.KindRateLimit, 502: events.KindServer, 503: events.KindOverloaded, 504: events.KindTimeout,
			},
			Parse: parseError,
		},
		RateLimits: []providertest.RateLimitCase{
			{
				Name: "requests and tokens", Header: map[string]string{
					"x-ratelimit-limit-requests":             "500",
					"x-ratelimit-remaining-requests":         "499",
					"x-ratelimit-reset-requests":             "120ms",
					"x-ratelimit-limit-tokens":               "200000",
					"x-ratelimit-remaining-tokens":           "150000",
					"x-ratelimit-reset-tokens":               "6m0s",
					"anthropic-ratelimit-requests-limit":     "50", // Anthropic's: not read
					"anthropic-ratelimit-requests-remaining": "0",
				},
				Want: guard.Observed{
					Limit:        guard.Limits{guard.Requests: 500, guard.Tokens: 200000},
					Remaining:    [guard.NumDims]int64{guard.Requests: 499, guard.Tokens: 150000},
					HasRemaining: [guard.NumDims]bool{guard.Requests: true, guard.Tokens: true},
					Reset:        [guard.NumDims]time.Time{guard.Requests: providertest.Now.Add(120 * time.Millisecond), guard.Tokens: providertest.Now.Add(6 * time.Minute)},
				},
			},
			{
				Name: "a bare number of seconds", Header: map[string]string{"x-ratelimit-remaining-tokens": " 12 ", "x-ratelimit-reset-tokens": "1.5"},
				Want: guard.Observed{
					Remaining:    [guard.NumDims]int64{guard.Tokens: 12},
					HasRemaining: [guard.NumDims]bool{guard.Tokens: true},
					Reset:        [guard.NumDims]time.Time{guard.Tokens: providertest.Now.Add(1500 * time.Millisecond)},
				},
			},
		},
	}
}

// parseError reads an error response body as the SDK does: the "error"
// object into an *openai.Error.
func parseError(body []byte) (string, error) {
	var wrapper struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &wrapper); err != nil {
		return "", err
	}
	if len(wrapper.Error) == 0 || wrapper.Error[0] != '{' {
		return "", errors.New("no error object: not an OpenAI error")
	}
	var e sdk.Error
	if err := e.UnmarshalJSON(wrapper.Error); err != nil {
		return "", err
	}
	if e.Type == "" {
		return "", errors.New("no error.type: not an OpenAI error")
	}
	return e.Message, nil
}

// Without returns f for a compatible API that does not account the
// endpoint at path (a preset's Endpoints): the path moves to NotRoutes,
// and the cases on it go.
func Without(f providertest.Features, path string) providertest.Features {
	f.Routes = slices.DeleteFunc(slices.Clone(f.Routes), func(c providertest.RouteCase) bool { return c.Path == path })
	f.NotRoutes = append(slices.Clone(f.NotRoutes), path)
	f.Requests = slices.DeleteFunc(slices.Clone(f.Requests), func(c providertest.RequestCase) bool { return c.Path == path })
	f.Bodies = slices.DeleteFunc(slices.Clone(f.Bodies), func(c providertest.BodyCase) bool { return c.Path == path })
	f.Streams = slices.DeleteFunc(slices.Clone(f.Streams), func(c providertest.StreamCase) bool { return c.Path == path })
	return f
}

// UsageUnasked returns f for a compatible API whose chat streams report
// their usage unasked and refuse stream_options (Mistral): Inspect adds
// nothing, and the usage chunk, the client's own, is not dropped.
func UsageUnasked(f providertest.Features) providertest.Features {
	f.Requests = slices.Clone(f.Requests)
	for i := range f.Requests {
		f.Requests[i].InjectedUsage, f.Requests[i].Sent = false, ""
	}
	f.Streams = slices.Clone(f.Streams)
	for i := range f.Streams {
		f.Streams[i].Drop = nil
	}
	return f
}
