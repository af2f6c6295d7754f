package openai

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider/providertest"
	"github.com/agentledger/ledger/internal/retry"
)

// presetCase is an error reply of a preset's API and how it classifies.
type presetCase struct {
	name  string
	reply providertest.Reply
	want  providertest.Want
}

// presetErrors are, by preset, the errors each classifies otherwise than
// OpenAI would, or in a body OpenAI's SDK does not read, from the preset's
// documentation.
var presetErrors = map[string][]presetCase{
	"mistral": {
		{"429 rate limited at the top level", mistralReply(429, `{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}`, "Retry-After", "2"),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 2 * time.Second, HasHint: true, ProviderRequestID: "kong_1", MessageContains: "429 Too Many Requests: 1300: Rate limit exceeded"}},
		{"429 capacity exceeded is an overload", mistralReply(429, `{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","param":null,"code":"3505"}`),
			providertest.Want{Kind: events.KindOverloaded, Status: 429, Retryable: true, ProviderRequestID: "kong_1", MessageContains: "3505: Service tier capacity exceeded"}},
		{"422 with the validation detail as the message", mistralReply(422, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]},"type":"invalid_request_error","param":null,"code":null}`),
			providertest.Want{Kind: events.KindClient, Status: 422, ProviderRequestID: "kong_1", MessageContains: "invalid_request_error: {\"detail\":[{\"type\":\"extra_forbidden\""}},
		{"429 with a message alone", mistralReply(429, `{"message":"Requests rate limit exceeded"}`),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, ProviderRequestID: "kong_1", MessageContains: "429 Too Many Requests: Requests rate limit exceeded"}},
		{"429 hint from the requests remaining", mistralReply(429, `{"message":"Requests rate limit exceeded"}`, "X-Ratelimit-Remaining-Req-Minute", "0"),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, ProviderRequestID: "kong_1"}},
	},
	"groq": {
		{"498 flex capacity exceeded", reply(498, errorBody("capacity_exceeded", "capacity_exceeded", "Flex tier capacity exceeded")),
			providertest.Want{Kind: events.KindOverloaded, Status: 498, Retryable: true, ProviderRequestID: "req_1"}},
		{"424 failed dependency", reply(424, errorBody("invalid_request_error", "", "MCP server failed")),
			providertest.Want{Kind: events.KindClient, Status: 424, ProviderRequestID: "req_1"}},
		{"429 hint from the exhausted daily requests", reply(429, errorBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per day (RPD)"),
			"X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "2m59.56s", "X-Ratelimit-Remaining-Tokens", "5000", "X-Ratelimit-Reset-Tokens", "1s"),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 2*time.Minute + 59560*time.Millisecond, HasHint: true, ProviderRequestID: "req_1"}},
	},
	"deepseek": {
		{"402 insufficient balance", reply(402, errorBody("unknown_error", "invalid_request_error", "Insufficient Balance")),
			providertest.Want{Kind: events.KindQuota, Status: 402, ProviderRequestID: "req_1", MessageContains: "Insufficient Balance"}},
		{"422 invalid parameters", reply(422, errorBody("invalid_request_error", "", "Invalid temperature")),
			providertest.Want{Kind: events.KindClient, Status: 422, ProviderRequestID: "req_1"}},
		{"503 server overloaded", reply(503, errorBody("server_error", "", "Server overloaded")),
			providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: "req_1"}},
	},
	"together": {
		{"403 is a request over the context, not a permission", reply(403, errorBody("invalid_request_error", "", "Input validation error: inputs tokens + max_new_tokens must be <= 8193")),
			providertest.Want{Kind: events.KindClient, Status: 403, ProviderRequestID: "req_1"}},
		{"402 credit limit", reply(402, errorBody("credit_limit", "", "Credit limit exceeded")),
			providertest.Want{Kind: events.KindQuota, Status: 402, ProviderRequestID: "req_1"}},
		{"429 dynamic token limit, hint from the reset", reply(429, errorBody("dynamic_token_limited", "", "rate limited"), "X-Ratelimit-Remaining", "0", "X-Ratelimit-Reset", "3"),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 3 * time.Second, HasHint: true, ProviderRequestID: "req_1"}},
		{"503 engine overloaded", reply(503, errorBody("server_error", "", "The engine is currently overloaded")),
			providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: "req_1"}},
	},
	"openrouter": {
		{"402 insufficient credits, numeric code", reply(402, `{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/credits","metadata":{"limit_source":"openrouter_credits"}}}`),
			providertest.Want{Kind: events.KindQuota, Status: 402, ProviderRequestID: "req_1", MessageContains: "402 Payment Required: 402: Insufficient credits"}},
		{"403 flagged by moderation", reply(403, `{"error":{"code":403,"message":"Input flagged","metadata":{"reasons":["violence"],"provider_name":"OpenAI"}}}`),
			providertest.Want{Kind: events.KindClient, Status: 403, ProviderRequestID: "req_1"}},
		{"429 hint from the reset in the error's metadata", reply(429, `{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-min","metadata":{"headers":{"X-RateLimit-Limit":"20","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"`+resetMillis+`"}}}}`),
			providertest.Want{Kind: events.KindRateLimit, Status: 429, Retryable: true, Hint: 4 * time.Second, HasHint: true, ProviderRequestID: "req_1"}},
		{"502 model down", reply(502, `{"error":{"code":502,"message":"Provider returned error","metadata":{"provider_name":"Fireworks","raw":"upstream"}}}`),
			providertest.Want{Kind: events.KindServer, Status: 502, Retryable: true, ProviderRequestID: "req_1"}},
	},
	"vllm": {
		{"400 context too long at the top level", reply(400, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`),
			providertest.Want{Kind: events.KindClient, Status: 400, ProviderRequestID: "req_1", MessageContains: "400: This model's maximum context length"}},
		{"404 model not served, wrapped", reply(404, `{"error":{"message":"The model `+"`llama`"+` does not exist.","type":"NotFoundError","param":"model","code":404}}`),
			providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: "req_1"}},
		{"503 engine not ready", reply(503, `{"object":"error","message":"Service Unavailable","type":"ServiceUnavailableError","param":null,"code":503}`),
			providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: "req_1"}},
	},
	"ollama": {
		{"404 model not pulled", reply(404, `{"error":{"message":"model \"llama3\" not found, try pulling it first","type":"not_found_error","param":null,"code":null}}`),
			providertest.Want{Kind: events.KindClient, Status: 404, ProviderRequestID: "req_1", MessageContains: "not_found_error: model \"llama3\" not found"}},
		{"native error string keeps its status", reply(500, `{"error":"llama runner process has terminated: exit status 2"}`),
			providertest.Want{Kind: events.KindServer, Status: 500, Retryable: true, ProviderRequestID: "req_1", MessageContains: "500 Internal Server Error: llama runner process has terminated"}},
		{"503 server busy", reply(503, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`),
			providertest.Want{Kind: events.KindOverloaded, Status: 503, Retryable: true, ProviderRequestID: "req_1"}},
	},
}

// resetAt is the fixed clock of the reset hints; resetMillis is 4 s after
// it, in Unix milliseconds.
var (
	resetAt     = time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
	resetMillis = strconv.FormatInt(resetAt.Add(4*time.Second).UnixMilli(), 10)
)

// mistralReply is a reply of Mistral's, which names the request in
// X-Kong-Request-Id.
func mistralReply(status int, body string, kv ...string) providertest.Reply {
	return reply(status, body, append(kv, "X-Kong-Request-Id", "kong_1")...)
}

// reply is a JSON error reply with request ID req_1 and the extra headers
// given as name, value pairs.
func reply(status int, body string, kv ...string) providertest.Reply {
	return providertest.Reply{Status: status, Header: jsonHeader("req_1", kv...), Body: body}
}

// TestPresetErrors classifies each preset's distinct errors twice, as its
// SDK client sees them (a real openai-go client with
// CompatClientOptions, classified by Classifier, as every middleware
// does) and as the gateway sees them (the raw response), and checks both
// agree.
func TestPresetErrors(t *testing.T) {
	for _, name := range Presets() {
		p, _ := LookupPreset(name)
		registerCompat(name, &p)
		cases := presetErrors[name]
		require.NotEmpty(t, cases, "preset %s has no error table", name)
		for _, tt := range cases {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				s := providertest.Start(t, tt.reply)
				client := sdk.NewClient(append([]option.RequestOption{option.WithBaseURL(s.URL), option.WithAPIKey("k")}, CompatClientOptions(name)...)...)
				_, err := client.Chat.Completions.New(context.Background(), newParams())
				var oe *sdk.Error
				require.True(t, errors.As(err, &oe), "SDK error %T %v", err, err)
				assert.EqualValues(t, 1, s.Requests())

				got, ok := Classifier.Classify(err, resetAt)
				require.True(t, ok)
				providertest.Check(t, got, tt.want)

				wire := classifyCompat(&p, tt.reply.Status, tt.reply.HTTPHeader(), parseErrorBody([]byte(tt.reply.Body)), resetAt)
				providertest.CheckWire(t, got, wire, tt.reply)
			})
		}
	}
}

// TestPresetErrorsDifferFromOpenAI is the control of TestPresetErrors:
// each case that classifies otherwise under OpenAI's rules alone (a
// client without the preset's options), so that the table tests the
// preset's rules and not OpenAI's.
func TestPresetErrorsDifferFromOpenAI(t *testing.T) {
	differs := map[string]string{
		"mistral":    "429 capacity exceeded is an overload",
		"groq":       "498 flex capacity exceeded",
		"together":   "403 is a request over the context, not a permission",
		"openrouter": "403 flagged by moderation",
		"ollama":     "native error string keeps its status",
	}
	for name, caseName := range differs {
		for _, tt := range presetErrors[name] {
			if tt.name != caseName {
				continue
			}
			t.Run(name, func(t *testing.T) {
				s := providertest.Start(t, tt.reply)
				client := newClient(t, s.URL)
				_, err := client.Chat.Completions.New(context.Background(), newParams())
				got, _ := providertest.Classify(context.Background(), retry.Chain{Classifier}, err, resetAt)
				assert.False(t, got.Kind == tt.want.Kind && got.Retryable == tt.want.Retryable && got.Status == tt.want.Status,
					"OpenAI's rules alone already give %+v", got)
			})
		}
	}
}

func TestPresetRateLimits(t *testing.T) {
	now := resetAt
	tests := []struct {
		preset string
		header map[string]string
		want   guard.Observed
	}{
		{"mistral", map[string]string{"X-Ratelimit-Limit-Req-Minute": "720", "X-Ratelimit-Remaining-Req-Minute": "717",
			"X-Ratelimit-Limit-Tokens-Minute": "5000000", "X-Ratelimit-Remaining-Tokens-Minute": "4999911", "X-Ratelimit-Tokens-Query-Cost": "52"},
			observed(lim(guard.Requests, 720), lim(guard.Tokens, 5000000), rem(guard.Requests, 717), rem(guard.Tokens, 4999911))},
		{"mistral", map[string]string{"X-Ratelimitbysize-Limit-Minute": "500000", "X-Ratelimitbysize-Remaining-Minute": "499000", "X-Ratelimitbysize-Limit-Month": "1000000000"},
			observed(lim(guard.Tokens, 500000), rem(guard.Tokens, 499000))},
		{"groq", map[string]string{"X-Ratelimit-Limit-Requests": "14400", "X-Ratelimit-Remaining-Requests": "14370", "X-Ratelimit-Reset-Requests": "2m59.56s",
			"X-Ratelimit-Limit-Tokens": "18000", "X-Ratelimit-Remaining-Tokens": "17997", "X-Ratelimit-Reset-Tokens": "7.66s"},
			// requests per day: remaining and reset, never a per-minute limit
			observed(lim(guard.Tokens, 18000), rem(guard.Requests, 14370), rem(guard.Tokens, 17997),
				reset(guard.Requests, now.Add(2*time.Minute+59560*time.Millisecond)), reset(guard.Tokens, now.Add(7660*time.Millisecond)))},
		{"together", map[string]string{"X-Ratelimit-Limit": "10", "X-Ratelimit-Remaining": "9", "X-Ratelimit-Reset": "1", "X-Tokenlimit-Limit": "3000", "X-Tokenlimit-Remaining": "2900"},
			// per second: what remains and when, no per-minute limit
			observed(rem(guard.Requests, 9), rem(guard.Tokens, 2900), reset(guard.Requests, now.Add(time.Second)))},
		{"openrouter", map[string]string{"X-Ratelimit-Limit": "20", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": resetMillis},
			observed(rem(guard.Requests, 0), reset(guard.Requests, now.Add(4*time.Second)))},
		{"deepseek", map[string]string{"X-Ratelimit-Limit-Requests": "100", "X-Ratelimit-Remaining-Requests": "1"}, guard.Observed{}},
		{"vllm", map[string]string{"X-Ratelimit-Limit-Requests": "100"}, guard.Observed{}},
		{"ollama", map[string]string{"X-Ratelimit-Limit-Requests": "100"}, guard.Observed{}},
		{"mistral", map[string]string{"X-Ratelimit-Limit-Req-Minute": "-3", "X-Ratelimit-Remaining-Req-Minute": "lots"}, guard.Observed{}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			p, ok := LookupPreset(tt.preset)
			require.True(t, ok)
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			assert.Equal(t, tt.want, p.RateLimits(h, now))
		})
	}
}

// obs sets one field of an Observed.
type obs func(*guard.Observed)

func observed(fs ...obs) guard.Observed {
	var o guard.Observed
	for _, f := range fs {
		f(&o)
	}
	return o
}

func lim(d guard.Dim, v int64) obs { return func(o *guard.Observed) { o.Limit[d] = v } }
func rem(d guard.Dim, v int64) obs {
	return func(o *guard.Observed) { o.Remaining[d], o.HasRemaining[d] = v, true }
}
func reset(d guard.Dim, t time.Time) obs { return func(o *guard.Observed) { o.Reset[d] = t } }

func TestPresetOrigins(t *testing.T) {
	want := map[string]string{
		"mistral":    "https://api.mistral.ai",
		"groq":       "https://api.groq.com/openai",
		"deepseek":   "https://api.deepseek.com",
		"together":   "https://api.together.xyz",
		"openrouter": "https://openrouter.ai/api",
		"vllm":       "http://localhost:8000",
		"ollama":     "http://localhost:11434",
	}
	assert.ElementsMatch(t, Presets(), mapKeys(want))
	for name, origin := range want {
		p, ok := LookupPreset(name)
		require.True(t, ok, name)
		assert.Equal(t, origin, p.Origin, name)
		assert.NotEmpty(t, p.Doc, name)
		assert.Contains(t, p.Endpoints, "chat", name)
	}
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestParseErrorBody(t *testing.T) {
	tests := []struct {
		body string
		want apiError
	}{
		{`{"error":{"message":"m","type":"t","code":"c"}}`, apiError{Message: "m", Type: "t", Code: "c"}},
		{`{"error":{"message":"m","code":402}}`, apiError{Message: "m", Code: "402"}},
		{`{"error":"plain"}`, apiError{Message: "plain"}},
		{`{"object":"error","message":"m","type":"t","code":"1300"}`, apiError{Message: "m", Type: "t", Code: "1300"}},
		{`{"message":{"detail":[1, 2]}}`, apiError{Message: `{"detail":[1,2]}`}},
		{`<html>502</html>`, apiError{}},
		{``, apiError{}},
		{`{"error":{"message":"m","metadata":{"headers":{"X-RateLimit-Remaining":"0","X-RateLimit-Reset":1700000000000}}}}`,
			apiError{Message: "m", Limits: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1700000000000"}}}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, parseErrorBody([]byte(tt.body)), tt.body)
	}
}
