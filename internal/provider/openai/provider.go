package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// Provider is an API in OpenAI's dialect as the gateway and the guards
// see it: OpenAI's own (Default, registered as "openai" when the package
// is initialised), or an OpenAI-compatible upstream under a name of its
// own (New). It is immutable.
type Provider struct {
	name     string
	upstream provider.Upstream
	limits   guard.RateLimitHeaders
}

// Origin is OpenAI's public endpoint.
const Origin = "https://api.openai.com"

// RateLimitHeaders are OpenAI's x-ratelimit-{limit,remaining,reset}-
// {requests,tokens} (reset a duration; tokens counts input plus output).
var RateLimitHeaders = guard.RateLimitHeaders{
	{Dim: guard.Requests, Limit: "X-Ratelimit-Limit-Requests", Remaining: "X-Ratelimit-Remaining-Requests", Reset: "X-Ratelimit-Reset-Requests"},
	{Dim: guard.Tokens, Limit: "X-Ratelimit-Limit-Tokens", Remaining: "X-Ratelimit-Remaining-Tokens", Reset: "X-Ratelimit-Reset-Tokens"},
}

// Default is OpenAI's API: the API key in Authorization as a bearer
// token, the request ID in x-request-id; at the gateway's root, where it
// takes the unaccounted requests under /v1/ that Anthropic's and Gemini's
// hints do not claim (they are asked first: the registry's order).
var Default = New(Name, provider.Upstream{
	Origin:            Origin,
	CredentialHeaders: []string{"Authorization"},
	BearerCredential:  true,
	RequestIDHeader:   RequestIDHeader,
	AtRoot:            true,
	Passthrough:       passthrough,
}, RateLimitHeaders)

// passthrough recognises OpenAI's API root, /v1/: every path its SDKs
// use. A path outside it (say /ollama/... of an upstream this gateway
// does not mount) is no OpenAI request, and its credential must not go
// there.
func passthrough(r *http.Request) bool {
	p := r.URL.Path
	return p == "/v1" || strings.HasPrefix(p, "/v1/")
}

func init() { provider.Register(Default) }

// New returns a provider of OpenAI's dialect named name (the events'
// provider field), whose API is described by up and whose rate-limit
// headers are limits (nil: it sends none). Its routes, usage, streams,
// classification and error bodies are OpenAI's.
func New(name string, up provider.Upstream, limits guard.RateLimitHeaders) *Provider {
	up.CredentialHeaders = slices.Clone(up.CredentialHeaders)
	return &Provider{name: name, upstream: up, limits: slices.Clone(limits)}
}

// The accounted endpoints.
const (
	EndpointChat       = "chat"
	EndpointResponses  = "responses"
	EndpointEmbeddings = "embeddings"
)

// paths are the accounted paths, by endpoint.
var paths = map[string]string{
	"/v1/chat/completions": EndpointChat,
	"/v1/responses":        EndpointResponses,
	"/v1/embeddings":       EndpointEmbeddings,
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.name }

// Upstream describes where the API is and how its clients authenticate.
func (p *Provider) Upstream() provider.Upstream {
	up := p.upstream
	up.CredentialHeaders = slices.Clone(up.CredentialHeaders)
	return up
}

// Match accounts POST /v1/chat/completions, /v1/responses and
// /v1/embeddings.
func (p *Provider) Match(path string) (provider.Route, bool) {
	ep, ok := paths[path]
	return provider.Route{Endpoint: ep}, ok
}

// Inspect reads the model and the stream flag, and makes a chat stream
// report its usage: stream_options.include_usage is added when the client
// did not ask for it (InjectedUsage).
func (p *Provider) Inspect(rt provider.Route, body []byte) provider.Request {
	var req struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
	}
	parsed := json.Unmarshal(body, &req) == nil
	out := provider.Request{Model: req.Model, Stream: req.Stream, Body: body}
	switch rt.Endpoint {
	case EndpointEmbeddings:
		out.Stream = false
	case EndpointChat:
		if parsed && req.Stream {
			out.Body, out.InjectedUsage = includeUsage(body, req.StreamOptions)
		}
	}
	return out
}

// includeUsageMember is what is added to a chat stream's request that has
// no stream_options.
const includeUsageMember = `"stream_options":{"include_usage":true},`

// includeUsage returns body with stream_options.include_usage set, and
// whether it had to be set. A request without stream_options gets the
// member inserted first, leaving the rest byte for byte; one with
// stream_options of its own (null included: a member inserted before it
// would be a second stream_options, and decoders keep the last) has it
// rewritten, and the body re-encoded.
func includeUsage(body []byte, opts json.RawMessage) ([]byte, bool) {
	o := bytes.TrimSpace(opts)
	if string(o) == "null" {
		o = []byte("{}")
	}
	if len(o) == 0 {
		i := bytes.IndexByte(body, '{')
		out := make([]byte, 0, len(body)+len(includeUsageMember))
		out = append(append(append(out, body[:i+1]...), includeUsageMember...), body[i+1:]...)
		return out, true
	}
	var so map[string]json.RawMessage
	if json.Unmarshal(o, &so) != nil {
		return body, false // not an object: the API will refuse it
	}
	if v := bytes.TrimSpace(so["include_usage"]); string(v) == "true" {
		return body, false
	}
	so["include_usage"] = json.RawMessage("true")
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body, false
	}
	var err error
	if top["stream_options"], err = json.Marshal(so); err != nil {
		return body, false
	}
	out, err := json.Marshal(top)
	if err != nil {
		return body, false
	}
	return out, true
}

// requestID is the provider's ID of a request, from its upstream's
// header.
func (p *Provider) requestID(h http.Header) string {
	if p.upstream.RequestIDHeader == "" || h == nil {
		return ""
	}
	return requestIDOf(h.Get(p.upstream.RequestIDHeader))
}

// BodyUsage reads the usage of a chat completion, a response or an
// embedding, and the request ID header.
func (p *Provider) BodyUsage(rt provider.Route, header http.Header, body []byte) (provider.Answer, bool) {
	var a provider.Answer
	var ok bool
	switch rt.Endpoint {
	case EndpointChat:
		a.Usage, a.ServiceTier, ok = ChatUsage(body)
	case EndpointResponses:
		a.Usage, a.ServiceTier, ok = ResponseBodyUsage(body)
	case EndpointEmbeddings:
		a.Usage, ok = EmbeddingUsage(body)
	}
	a.ProviderID = p.requestID(header)
	return a, ok
}

// NewStream follows a chat stream (the usage in the last chunk, the
// content chunks counted before it; [DONE] ends it) or a Responses stream
// (response.completed or .incomplete carries the usage and ends it).
func (p *Provider) NewStream(rt provider.Route, header http.Header, req provider.Request) provider.Stream {
	est := inputEstimate{endpoint: rt.Endpoint, model: req.Model, body: req.Body}
	if rt.Endpoint == EndpointResponses {
		return &responsesStream{id: p.requestID(header), est: est}
	}
	return &chatStream{id: p.requestID(header), injected: req.InjectedUsage, est: est}
}

// inputEstimate is the input of a stream's request, estimated
// (EstimateInput) when the provider took the request but its usage never
// came: a stream cut before its usage chunk, or a chat stream whose
// client set stream_options.include_usage false.
type inputEstimate struct {
	endpoint, model string
	body            []byte // as sent upstream
	took            bool   // an event other than an error arrived
}

// of returns the estimate, 0 when the stream reported its usage
// (complete) or no event but errors arrived (nothing says the provider
// took the request), or when the body is not estimable.
func (e *inputEstimate) of(complete bool) int64 {
	if !e.needed(complete) {
		return 0
	}
	est, err := EstimateInput(e.endpoint, e.model, e.body)
	if err != nil {
		return 0
	}
	return est.Tokens
}

// needed reports whether of estimates.
func (e *inputEstimate) needed(complete bool) bool { return !complete && e.took }

type chatStream struct {
	u        StreamUsage
	id       string
	injected bool
	done     bool
	est      inputEstimate
}

var (
	doneData  = []byte("[DONE]")
	errorWord = []byte(`"error"`)
)

func (s *chatStream) Observe(_ string, data []byte) provider.Verdict {
	if bytes.Equal(bytes.TrimSpace(data), doneData) {
		s.done = true
		return provider.Verdict{}
	}
	if len(data) == 0 {
		return provider.Verdict{}
	}
	if bytes.Contains(data, errorWord) && isErrorObject(data) {
		return provider.Verdict{Error: true}
	}
	s.est.took = true
	usageOnly, _ := s.u.ObserveRaw(data)
	return provider.Verdict{Drop: usageOnly && s.injected}
}

func (s *chatStream) Usage() events.Usage { return s.u.Usage() }

// EstimatedInput is the request's input estimated when the usage chunk
// never came (provider.InputEstimator).
func (s *chatStream) EstimatedInput() int64 { return s.est.of(s.u.Complete()) }
func (s *chatStream) NeedsEstimate() bool   { return s.est.needed(s.u.Complete()) }
func (s *chatStream) Complete() bool        { return s.done || s.u.Complete() }
func (s *chatStream) ProviderID() string    { return s.id }
func (s *chatStream) ServiceTier() string   { return s.u.ServiceTier() }

// isErrorObject reports whether a chunk's "error" member is an object: an
// error in the stream, rather than a word in the generated text.
func isErrorObject(data []byte) bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &v) == nil && len(v.Error) > 0 && v.Error[0] == '{'
}

type responsesStream struct {
	u    ResponseStreamUsage
	id   string
	done bool
	est  inputEstimate
}

func (s *responsesStream) Observe(name string, data []byte) provider.Verdict {
	_ = s.u.ObserveRaw(name, data)
	switch name {
	case "error", "response.failed":
		return provider.Verdict{Error: true}
	case "response.completed", "response.incomplete":
		s.done = true
	}
	s.est.took = true
	return provider.Verdict{}
}

func (s *responsesStream) Usage() events.Usage { return s.u.Usage() }

// EstimatedInput is the request's input estimated when no event carried
// the response's usage (provider.InputEstimator).
func (s *responsesStream) EstimatedInput() int64 { return s.est.of(s.u.Complete()) }
func (s *responsesStream) NeedsEstimate() bool   { return s.est.needed(s.u.Complete()) }
func (s *responsesStream) Complete() bool        { return s.done }
func (s *responsesStream) ProviderID() string    { return s.id }
func (s *responsesStream) ServiceTier() string   { return s.u.ServiceTier() }

// Classifier classifies the SDK's errors, the request ID read from the
// provider's own header.
func (p *Provider) Classifier() retry.Classifier {
	if http.CanonicalHeaderKey(p.upstream.RequestIDHeader) == http.CanonicalHeaderKey(RequestIDHeader) {
		return Classifier
	}
	return retry.ClassifierFunc(func(err error, now time.Time) (retry.Classification, bool) {
		c, ok := Classify(err, now)
		var oe *sdk.Error
		if ok && errors.As(err, &oe) && oe != nil && oe.Response != nil {
			c.ProviderRequestID = p.requestID(oe.Response.Header)
		}
		return c, ok
	})
}

// ClassifyResponse classifies an error response (see the function of the
// same name), the request ID read from the provider's own header.
func (p *Provider) ClassifyResponse(status int, header http.Header, body []byte, now time.Time) retry.Classification {
	c := ClassifyResponse(status, header, body, now)
	c.ProviderRequestID = p.requestID(header)
	return c
}

// ClassifyStreamError classifies the data of an error chunk or event (see
// the function of the same name).
func (p *Provider) ClassifyStreamError(_ http.Header, data []byte, _ time.Time) retry.Classification {
	return ClassifyStreamError(data)
}

// ErrorBody is {"error":{"message":...,"type":...,"param":null,
// "code":null}}.
func (p *Provider) ErrorBody(status int, msg string) []byte {
	typ := "server_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status < 500:
		typ = "invalid_request_error"
	}
	return provider.JSON(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}

// RateLimits reads the rate-limit headers the provider declared.
func (p *Provider) RateLimits(header http.Header, now time.Time) guard.Observed {
	return p.limits.RateLimits(header, now)
}
