package openai

import (
	"encoding/json"
	"net/http"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider/fakekit"
)

// FakeOptions are the differences of an OpenAI-compatible provider's API
// from OpenAI's, as its fake dialect speaks them. The zero value is an
// OpenAI-compatible API that sends no rate-limit headers.
type FakeOptions struct {
	// Prefix is the path the fake provider serves the API under; ""
	// selects "/" and the provider's name, as the gateway mounts it. The
	// SDK's base URL is the fake provider's URL, the prefix and /v1/.
	Prefix string
	// RateLimitHeaders are the rate-limit headers the API sends (those
	// its Provider's guards read); nil: none. A rate limit also says the
	// requests dimension is empty, in its remaining and reset headers.
	RateLimitHeaders guard.RateLimitHeaders
	// Limits maps the tier to the organization's dimensions; nil selects
	// OpenAI's one tokens limit (fakekit.CombinedLimits).
	Limits func(fakekit.Tier) []fakekit.Dimension
	// ErrorBody is the body of an error response; nil selects OpenAI's
	// (OpenAIErrorBody).
	ErrorBody func(e FakeError) any
	// Fail answers a fault the API's own way (status, headers and
	// error), when it says so (ok); nil, or ok false, answers OpenAI's.
	Fail func(w http.ResponseWriter, d fakekit.Decision) (e FakeError, ok bool)
	// UsageUnasked: a chat stream ends with its usage whether asked or
	// not, and a request that asks (stream_options) is refused, as
	// Mistral does.
	UsageUnasked bool
	// Reasoning: answers report a reasoning part of the output
	// (completion_tokens_details / output_tokens_details), for the calls
	// fakekit.Dialect.Subsets gives one.
	Reasoning bool
	// ServiceTiers are the tiers (contract form) answers name in their
	// service_tier, one per call (fakekit.ServiceTierFor); "standard" is
	// written "default", as OpenAI does. Empty: answers name none.
	ServiceTiers []string
	// Model is the model the simulator asks for; "" selects none, and the
	// simulator does not drive the provider.
	Model string
	// SimOrder places the provider in the simulator's default round
	// robin (fakekit.Sim.Order); 0 selects 100, after the built-in
	// providers.
	SimOrder int
}

// FakeError is an error the fake dialect answers.
type FakeError struct {
	Status int
	// Type is OpenAI's error.type ("invalid_request_error",
	// "server_error", "requests").
	Type string
	// Code is OpenAI's error.code ("rate_limit_exceeded"); "" for none.
	Code    string
	Message string
}

// OpenAIErrorBody is OpenAI's error body, {"error": {"message", "type",
// "param", "code"}}.
func OpenAIErrorBody(e FakeError) any {
	var code any
	if e.Code != "" {
		code = e.Code
	}
	return map[string]any{
		"error": map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": code},
	}
}

// Fake is the provider's fake dialect (fakekit.Faker): OpenAI's own for
// Default, else FakeDialect under the provider's name with its rate-limit
// headers.
func (p *Provider) Fake() *fakekit.Dialect {
	if p == Default {
		return OpenAIFakeDialect()
	}
	return FakeDialect(p.name, FakeOptions{RateLimitHeaders: p.limits})
}

// FakeDialect is the Chat Completions, Responses and Embeddings APIs as
// the fake provider speaks them for the provider named name: OpenAI's
// (OpenAIFakeDialect), or an OpenAI-compatible provider's, with the
// differences opts gives. Streams report their usage only in their last
// event (a chat stream only when stream_options.include_usage asks),
// errors carry the x-request-id header, and a rate limit retry-after-ms
// and retry-after. Its Sim, when opts names a model, drives the SDK's
// Chat.Completions.New.
func FakeDialect(name string, opts FakeOptions) *fakekit.Dialect {
	api := &fakeAPI{errorBody: opts.ErrorBody, limitHeaders: opts.RateLimitHeaders, failHook: opts.Fail, usageUnasked: opts.UsageUnasked, tiers: opts.ServiceTiers}
	if api.errorBody == nil {
		api.errorBody = OpenAIErrorBody
	}
	d := &fakekit.Dialect{
		Provider: name,
		Prefix:   opts.Prefix,
		BasePath: "/v1/",
		Endpoints: []fakekit.Endpoint{
			{Path: "/v1/chat/completions", Handle: api.chatCompletions},
			{Path: "/v1/responses", Handle: api.responses},
			{Path: "/v1/embeddings", Handle: api.embeddings},
		},
		Limits:       opts.Limits,
		LimitHeaders: fakekit.LimitHeadersOf(opts.RateLimitHeaders),
		Reasoning:    opts.Reasoning,
		ServiceTiers: opts.ServiceTiers,
	}
	if d.Prefix == "" {
		d.Prefix = "/" + name
	}
	if d.Limits == nil {
		d.Limits = fakekit.CombinedLimits
	}
	if opts.Model != "" {
		order := opts.SimOrder
		if order == 0 {
			order = 100
		}
		d.Sim = &fakekit.Sim{Model: opts.Model, Order: order, NewCaller: newFakeCaller, Classifier: Classifier}
	}
	return d
}

// OpenAIFakeDialect is OpenAI's own dialect, under /openai, with the
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers.
func OpenAIFakeDialect() *fakekit.Dialect {
	return FakeDialect(Name, FakeOptions{RateLimitHeaders: RateLimitHeaders, Model: "gpt-4.1-mini", SimOrder: 1,
		Reasoning: true, ServiceTiers: []string{"standard", "flex", "priority"}})
}

// fakeAPI is one provider's dialect of the OpenAI APIs.
type fakeAPI struct {
	errorBody    func(FakeError) any
	limitHeaders guard.RateLimitHeaders
	failHook     func(http.ResponseWriter, fakekit.Decision) (FakeError, bool)
	usageUnasked bool
	tiers        []string // contract form; see FakeOptions.ServiceTiers
}

// setTier puts call c's service tier, as OpenAI writes it, in an answer
// object; an API that names none leaves it without.
func (api *fakeAPI) setTier(obj map[string]any, c fakekit.Call) {
	switch tier := fakekit.ServiceTierFor(c.RequestID, api.tiers); tier {
	case "":
	case "standard":
		obj["service_tier"] = "default"
	default:
		obj["service_tier"] = tier
	}
}

// fakeCreated is the fixed creation time of every completion, so that the
// answers are deterministic.
const fakeCreated = 1_700_000_000

// error answers an error; requestID "" sends no x-request-id.
func (api *fakeAPI) error(w http.ResponseWriter, requestID string, e FakeError) {
	if requestID != "" {
		w.Header().Set(RequestIDHeader, requestID)
	}
	fakekit.WriteJSON(w, e.Status, api.errorBody(e))
}

// fakeChatRequest is the part of a Chat Completions request the fake
// reads.
type fakeChatRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	MaxCompletionTokens int64             `json:"max_completion_tokens"`
	MaxTokens           int64             `json:"max_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// fakeChatReply answers one attempt of a chat completion.
type fakeChatReply struct {
	api   *fakeAPI
	model string
	limit int64
	// stream answers with chunks; includeUsage adds the usage chunk at
	// the end, as stream_options.include_usage asks.
	stream, includeUsage bool
}

// chatCompletions serves POST /v1/chat/completions.
func (api *fakeAPI) chatCompletions(s fakekit.Server, w http.ResponseWriter, r *http.Request) {
	var req fakeChatRequest
	c, ok := api.decode(s, w, r, &req, func() string {
		switch {
		case req.Model == "":
			return "you must provide a model parameter"
		case len(req.Messages) == 0:
			return "messages: expected a non-empty array"
		case api.usageUnasked && req.StreamOptions.IncludeUsage:
			return "stream_options: Extra inputs are not permitted"
		}
		return ""
	}, func() string { return req.Model })
	if !ok {
		return
	}
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	s.Serve(w, r, c, fakekit.Attempt{
		Model: req.Model, Stream: req.Stream, MaxOutput: limit,
		Reply: fakeChatReply{api: api, model: req.Model, limit: limit, stream: req.Stream, includeUsage: req.StreamOptions.IncludeUsage || api.usageUnasked},
	})
}

// decode identifies and decodes the request of an endpoint, and answers
// it (false) when it is invalid: check returns what is wrong with the
// decoded request, or "", and model, given to the truth with a request
// check refuses, what it names ("" when it is not for the truth).
func (api *fakeAPI) decode(s fakekit.Server, w http.ResponseWriter, r *http.Request, req any, check func() string, model func() string) (fakekit.Call, bool) {
	c, err := s.Identify(r)
	if err != nil {
		s.Unidentified()
		api.error(w, "", FakeError{http.StatusBadRequest, "invalid_request_error", "missing_header", err.Error()})
		return c, false
	}
	if r.Header.Get("Authorization") == "" {
		s.Invalid(c, "")
		api.error(w, fakekit.RequestID("req_", c), FakeError{http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "You didn't provide an API key."})
		return c, false
	}
	if err := fakekit.DecodeBody(w, r, req); err != nil {
		s.Invalid(c, "")
		api.error(w, fakekit.RequestID("req_", c), FakeError{http.StatusBadRequest, "invalid_request_error", "invalid_json", err.Error()})
		return c, false
	}
	if msg := check(); msg != "" {
		s.Invalid(c, model())
		api.error(w, fakekit.RequestID("req_", c), FakeError{http.StatusBadRequest, "invalid_request_error", "invalid_value", msg})
		return c, false
	}
	return c, true
}

// fail answers a fault, for every endpoint.
func (api *fakeAPI) fail(w http.ResponseWriter, c fakekit.Call, d fakekit.Decision) {
	id := fakekit.RequestID("req_", c)
	if api.failHook != nil {
		if e, ok := api.failHook(w, d); ok {
			api.error(w, id, e)
			return
		}
	}
	switch d.Fault {
	case fakekit.FaultRateLimit:
		fakekit.RetryAfterHeaders(w, d)
		for _, h := range api.limitHeaders {
			if h.Dim == guard.Requests && !h.ResetIsDate {
				w.Header().Set(h.Remaining, "0")
				w.Header().Set(h.Reset, d.RetryAfter.String())
			}
		}
		api.error(w, id, FakeError{http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "Rate limit reached for requests per min."})
	case fakekit.FaultOverload:
		api.error(w, id, FakeError{http.StatusServiceUnavailable, "server_error", "", "The server is overloaded or not ready yet."})
	case fakekit.FaultServerError:
		api.error(w, id, FakeError{http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request."})
	case fakekit.FaultOutage:
		api.error(w, id, FakeError{http.StatusServiceUnavailable, "server_error", "", "The service is unavailable."})
	default: // FaultBadRequest
		api.error(w, id, FakeError{http.StatusBadRequest, "invalid_request_error", "invalid_value", "messages[0].content: the simulated request is malformed"})
	}
}

func (o fakeChatReply) Fail(w http.ResponseWriter, c fakekit.Call, d fakekit.Decision) {
	o.api.fail(w, c, d)
}

func (o fakeChatReply) Succeed(w http.ResponseWriter, c fakekit.Call, u events.Usage) error {
	w.Header().Set(RequestIDHeader, fakekit.RequestID("req_", c))
	finish := "stop"
	if o.limit > 0 && u.OutputTokens >= o.limit {
		finish = "length"
	}
	if o.stream {
		return o.succeedStream(w, c, u, finish)
	}
	body := map[string]any{
		"id":                 fakekit.RequestID("chatcmpl-", c),
		"object":             "chat.completion",
		"created":            fakeCreated,
		"model":              o.model,
		"system_fingerprint": "fp_fakeprovider",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": fakekit.ReplyText(c), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": fakeChatUsage(u),
	}
	o.api.setTier(body, c)
	fakekit.WriteJSON(w, http.StatusOK, body)
	return nil
}

// fakeChatUsage is the usage object of a chat completion.
func fakeChatUsage(u events.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":             u.InputTokens,
		"completion_tokens":         u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheReadInputTokens, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}
