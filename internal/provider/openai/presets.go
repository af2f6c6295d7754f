package openai

import (
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// Preset is what the ledger knows of one OpenAI-compatible API beyond
// OpenAI's own rules: where it is, which of the accounted endpoints it
// serves, the rate-limit headers it sends and the errors it classifies
// differently. It is data: Compatible builds a Provider from it.
type Preset struct {
	// Name is the preset's name, and the provider's name when the
	// configuration names no other.
	Name string
	// Origin is the API's default origin, without the /v1 that the
	// clients' paths carry: /NAME/v1/chat/completions on the gateway goes
	// to Origin + /v1/chat/completions.
	Origin string
	// Doc is the documentation page the preset was read from.
	Doc string
	// Endpoints are the accounted endpoints the API serves: "chat",
	// "embeddings", "responses".
	Endpoints []string
	// RequestIDHeader is the response header that names the request;
	// "" for OpenAI's x-request-id.
	RequestIDHeader string
	// Local: the API serves on the operator's own machine and needs no
	// credential (Ollama, vLLM); a gateway mounts it only when named.
	Local bool
	// UsageUnasked: a chat stream reports its usage in its last chunk
	// without stream_options, which the API refuses (Mistral answers 422
	// "Extra inputs are not permitted"): the gateway does not add it.
	UsageUnasked bool
	// Limits are the rate-limit headers the API sends; none for an
	// API that sends none.
	Limits []LimitHeaders
	// Rules are the errors classified otherwise than OpenAI's rules do,
	// the first match winning.
	Rules []ErrorRule
	// Fake is how the fake provider speaks the API (compat_fake.go).
	Fake FakePreset
}

// LimitHeaders are the canonical names of the headers of one dimension of
// a rate limit; "" for a header the API does not send.
type LimitHeaders struct {
	Dim              guard.Dim
	Limit, Remaining string
	Reset            string
	// ResetFormat is how Reset is written.
	ResetFormat ResetFormat
	// LimitPerMinute: Limit counts a minute's worth (the guards learn it).
	// A limit over another window (Groq's requests per day, Together's
	// per second) is not learned; its remaining and reset still are.
	LimitPerMinute bool
}

// ResetFormat is how a reset header is written.
type ResetFormat int

const (
	// ResetDuration is a duration from now, "6m0s", "20ms", or seconds
	// ("12", "0.5"), as OpenAI's x-ratelimit-reset-*.
	ResetDuration ResetFormat = iota
	// ResetUnixMillis is a time in milliseconds since the Unix epoch
	// (OpenRouter's X-RateLimit-Reset).
	ResetUnixMillis
)

// ErrorRule classifies the error responses that match it. Status 0
// matches any status (and the error events inside a stream, which have
// none); Codes match the error's code or type, case-insensitively; none
// matches any.
type ErrorRule struct {
	Status    int
	Codes     []string
	Kind      events.ErrorKind
	Retryable bool
	// Why is the documented reason, for the reader of the table.
	Why string
}

// The presets, from each API's documentation (Doc). Every one speaks
// OpenAI's Chat Completions; their errors come in OpenAI's
// {"error":{...}} body unless said otherwise, and the rules of OpenAI's
// classification apply to them (status rule, x-should-retry,
// Retry-After, quota codes) before their own.
//
// A new preset is an entry here (with its fake answers), its cases in
// presets_test.go (errors, rate-limit headers, origin) and
// compat_fake_test.go (its fake's faults), and a row of the README's
// table: four files, three of them in this folder.
var presets = []Preset{
	{
		// Mistral's errors come as {"object":"error","message":...,
		// "type":...,"code":"1300"} at the top level, or as
		// {"message":...} alone. Its rate-limit headers have their own
		// names (mistralai/client-ts#169):
		// x-ratelimit-{limit,remaining}-{req,tokens}-minute; the older
		// x-ratelimitbysize-*-minute are tokens per minute too.
		// Its responses pass through Kong, which names the request in
		// X-Kong-Request-Id (and in the body of its own 401s). It refuses stream_options (openai/openai-agents-python#442) and
		// sends the usage in a stream's last chunk unasked.
		Name: "mistral", Origin: "https://api.mistral.ai",
		Doc:             "https://docs.mistral.ai/api/ (errors), https://docs.mistral.ai/deployment/ai-studio/tier/ (rate limits)",
		Endpoints:       []string{"chat", "embeddings"},
		UsageUnasked:    true,
		RequestIDHeader: "X-Kong-Request-Id",
		Limits: []LimitHeaders{
			{Dim: guard.Requests, Limit: "X-Ratelimit-Limit-Req-Minute", Remaining: "X-Ratelimit-Remaining-Req-Minute", LimitPerMinute: true},
			{Dim: guard.Tokens, Limit: "X-Ratelimit-Limit-Tokens-Minute", Remaining: "X-Ratelimit-Remaining-Tokens-Minute", LimitPerMinute: true},
			{Dim: guard.Tokens, Limit: "X-Ratelimitbysize-Limit-Minute", Remaining: "X-Ratelimitbysize-Remaining-Minute", LimitPerMinute: true},
		},
		Rules: []ErrorRule{
			{Status: http.StatusTooManyRequests, Codes: []string{"service_tier_capacity_exceeded", "3505"}, Kind: events.KindOverloaded, Retryable: true,
				Why: "a 429 that says the model's capacity is exceeded is the provider's overload, not the workspace's rate"},
			{Status: 0, Codes: []string{"rate_limited", "1300"}, Kind: events.KindRateLimit, Retryable: true, Why: "the workspace's rate limit"},
		},
		Fake: FakePreset{TopLevelErrors: true, Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultRateLimit: {http.StatusTooManyRequests, "rate_limited", "1300", "Rate limit exceeded"},
			fakekit.FaultOverload:  {http.StatusTooManyRequests, "service_tier_capacity_exceeded", "3505", "Service tier capacity exceeded for this model."},
		}},
	},
	{
		// Groq's x-ratelimit-*-requests are requests per DAY (RPD), its
		// -tokens tokens per minute; 498 is its own status for a flex tier
		// at capacity.
		Name: "groq", Origin: "https://api.groq.com/openai",
		Doc:       "https://console.groq.com/docs/rate-limits, https://console.groq.com/docs/errors",
		Endpoints: []string{"chat", "responses"},
		Limits: []LimitHeaders{
			{Dim: guard.Requests, Remaining: "X-Ratelimit-Remaining-Requests", Reset: "X-Ratelimit-Reset-Requests"},
			{Dim: guard.Tokens, Limit: "X-Ratelimit-Limit-Tokens", Remaining: "X-Ratelimit-Remaining-Tokens", Reset: "X-Ratelimit-Reset-Tokens", LimitPerMinute: true},
		},
		Rules: []ErrorRule{
			{Status: 498, Kind: events.KindOverloaded, Retryable: true, Why: "flex tier capacity exceeded: try again later"},
			{Status: 499, Kind: events.KindClient, Why: "the request was cancelled"},
			{Status: http.StatusFailedDependency, Kind: events.KindClient, Why: "a remote tool (MCP) the request names failed"},
		},
		Fake: FakePreset{Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultRateLimit: {http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for model on requests per day (RPD)."},
			fakekit.FaultOverload:  {498, "capacity_exceeded", "capacity_exceeded", "Flex tier capacity exceeded. Try again later."},
		}},
	},
	{
		// DeepSeek sends no rate-limit headers.
		Name: "deepseek", Origin: "https://api.deepseek.com",
		Doc:       "https://api-docs.deepseek.com/quick_start/error_codes",
		Endpoints: []string{"chat"},
		Rules: []ErrorRule{
			{Status: http.StatusPaymentRequired, Kind: events.KindQuota, Why: "insufficient balance: top up"},
			{Status: http.StatusUnprocessableEntity, Kind: events.KindClient, Why: "invalid parameters"},
			{Status: http.StatusServiceUnavailable, Kind: events.KindOverloaded, Retryable: true, Why: "server overloaded: retry after a brief wait"},
		},
		Fake: FakePreset{Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultOverload: {http.StatusServiceUnavailable, "server_error", "", "Server overloaded, please retry shortly."},
		}},
	},
	{
		// Together counts per second and sends the requests' remaining and
		// reset (seconds) as x-ratelimit-*, the tokens' remaining as
		// x-tokenlimit-remaining. Its 403 is a request longer than the
		// model's context, not a permission.
		Name: "together", Origin: "https://api.together.xyz",
		Doc:       "https://docs.together.ai/docs/error-codes, https://docs.together.ai/docs/rate-limits",
		Endpoints: []string{"chat", "embeddings"},
		Limits: []LimitHeaders{
			{Dim: guard.Requests, Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset"},
			{Dim: guard.Tokens, Remaining: "X-Tokenlimit-Remaining"},
		},
		Rules: []ErrorRule{
			{Status: http.StatusForbidden, Kind: events.KindClient, Why: "input tokens plus max_tokens exceed the model's context"},
			{Status: http.StatusPaymentRequired, Kind: events.KindQuota, Why: "spending limit reached or out of credits"},
			{Status: http.StatusTooManyRequests, Codes: []string{"dynamic_request_limited", "dynamic_token_limited"}, Kind: events.KindRateLimit, Retryable: true,
				Why: "above the organisation's dynamic rate"},
			{Status: http.StatusServiceUnavailable, Kind: events.KindOverloaded, Retryable: true, Why: "engine overloaded"},
		},
		Fake: FakePreset{Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultRateLimit: {http.StatusTooManyRequests, "dynamic_request_limited", "", "You are above your dynamic request rate."},
			fakekit.FaultOverload:  {http.StatusServiceUnavailable, "server_error", "", "The engine is currently overloaded, please try again later."},
		}},
	},
	{
		// OpenRouter's error code is the status as a number, with
		// metadata; a 429's X-RateLimit-* may come as headers or inside
		// error.metadata.headers, the reset in Unix milliseconds. Its 403
		// is an input flagged by moderation.
		Name: "openrouter", Origin: "https://openrouter.ai/api",
		Doc:       "https://openrouter.ai/docs/api-reference/errors",
		Endpoints: []string{"chat", "embeddings", "responses"},
		Limits: []LimitHeaders{
			{Dim: guard.Requests, Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetFormat: ResetUnixMillis},
		},
		Rules: []ErrorRule{
			{Status: http.StatusPaymentRequired, Kind: events.KindQuota, Why: "insufficient credits on the account or the key"},
			{Status: http.StatusForbidden, Kind: events.KindClient, Why: "the input was flagged by the model's moderation"},
			{Status: http.StatusRequestTimeout, Kind: events.KindTimeout, Retryable: true, Why: "the request timed out"},
			{Status: http.StatusBadGateway, Kind: events.KindServer, Retryable: true, Why: "the chosen model is down or answered badly"},
			{Status: http.StatusServiceUnavailable, Kind: events.KindOverloaded, Retryable: true, Why: "no provider meets the routing requirements now"},
		},
		Fake: FakePreset{Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultRateLimit: {http.StatusTooManyRequests, "", "429", "Rate limit exceeded: limit_rpm"},
			fakekit.FaultOverload:  {http.StatusServiceUnavailable, "", "503", "No allowed providers are available for the selected model."},
		}},
	},
	{
		// vLLM's errors are {"object":"error","message":...,
		// "type":"BadRequestError","code":400} (newer versions wrap the
		// same in "error"); it sends no rate-limit headers.
		Name: "vllm", Origin: "http://localhost:8000", Local: true,
		Doc:       "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html",
		Endpoints: []string{"chat", "embeddings", "responses"},
		Rules: []ErrorRule{
			{Status: http.StatusNotFound, Kind: events.KindClient, Why: "the model is not served (NotFoundError)"},
			{Status: http.StatusServiceUnavailable, Kind: events.KindOverloaded, Retryable: true, Why: "the engine is not ready or refuses more requests"},
		},
		Fake: FakePreset{TopLevelErrors: true, Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultOverload:    {http.StatusServiceUnavailable, "ServiceUnavailableError", "503", "Service Unavailable"},
			fakekit.FaultServerError: {http.StatusInternalServerError, "InternalServerError", "500", "EngineCore encountered an issue."},
			fakekit.FaultBadRequest:  {http.StatusBadRequest, "BadRequestError", "400", "This model's maximum context length is 4096 tokens."},
		}},
	},
	{
		// Ollama's /v1 errors are {"error":{"message":...,"type":
		// "not_found_error"|"invalid_request_error"|"api_error"}}, its
		// native ones {"error":"..."}; it sends no rate-limit headers.
		Name: "ollama", Origin: "http://localhost:11434", Local: true,
		Doc:       "https://docs.ollama.com/api/openai-compatibility, https://docs.ollama.com/api/errors",
		Endpoints: []string{"chat", "embeddings", "responses"},
		Rules: []ErrorRule{
			{Status: http.StatusNotFound, Kind: events.KindClient, Why: "the model is not pulled (ollama pull MODEL): no retry fixes it"},
			{Status: http.StatusServiceUnavailable, Kind: events.KindOverloaded, Retryable: true, Why: "server busy: too many requests queued (OLLAMA_MAX_QUEUE)"},
		},
		Fake: FakePreset{Faults: map[fakekit.Fault]FakeError{
			fakekit.FaultOverload:    {http.StatusServiceUnavailable, "api_error", "", "server busy, please try again.  maximum pending requests exceeded"},
			fakekit.FaultServerError: {http.StatusInternalServerError, "api_error", "", "llama runner process has terminated: exit status 2"},
			fakekit.FaultBadRequest:  {http.StatusNotFound, "not_found_error", "", `model "llama3.2" not found, try pulling it first`},
		}},
	},
}

// requestIDHeader is the header that names a request of the API.
func (p *Preset) requestIDHeader() string {
	if p.RequestIDHeader == "" {
		return RequestIDHeader
	}
	return p.RequestIDHeader
}

// LookupPreset returns the preset named name.
func LookupPreset(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// Presets returns the presets' names, in the order of the table.
func Presets() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	return out
}
