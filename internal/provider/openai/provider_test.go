package openai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
)

func TestRegistered(t *testing.T) {
	p, ok := provider.Lookup(Name)
	require.True(t, ok)
	assert.Same(t, Default, p)
	up := p.Upstream()
	assert.Equal(t, Origin, up.Origin)
	assert.Equal(t, []string{"Authorization"}, up.CredentialHeaders)
	assert.True(t, up.BearerCredential)
	assert.True(t, up.AtRoot)
	assert.True(t, up.Fallback)
	assert.Nil(t, up.Passthrough)
}

// New makes an OpenAI-compatible provider under a name of its own, with
// its own upstream and rate-limit headers; the caller's slices are its
// own.
func TestNew(t *testing.T) {
	creds := []string{"Authorization"}
	p := New("mistral", provider.Upstream{Origin: "https://api.mistral.ai", CredentialHeaders: creds, BearerCredential: true, RequestIDHeader: "X-Kong-Request-Id"}, nil)
	creds[0] = "X-Changed"
	assert.Equal(t, "mistral", p.Name())
	up := p.Upstream()
	assert.Equal(t, []string{"Authorization"}, up.CredentialHeaders)
	up.CredentialHeaders[0] = "X-Changed"
	assert.Equal(t, []string{"Authorization"}, p.Upstream().CredentialHeaders, "Upstream returns a copy")
	assert.False(t, up.AtRoot)

	h := http.Header{}
	h.Set("X-Kong-Request-Id", "kong-1")
	h.Set("X-Request-Id", "openai-1")
	h.Set("X-Ratelimit-Limit-Requests", "500")
	_, id, _ := p.BodyUsage(provider.Route{Endpoint: EndpointChat}, h, []byte(`{}`))
	assert.Equal(t, "kong-1", id, "its own request ID header")
	assert.Equal(t, "kong-1", p.NewStream(provider.Route{Endpoint: EndpointChat}, h, provider.Request{}).ProviderID())
	assert.True(t, func() bool { o := p.RateLimits(h, time.Now()); return o.Empty() }(), "no rate-limit headers declared")
}

func TestMatch(t *testing.T) {
	tests := []struct {
		path     string
		endpoint string // "" for no match
	}{
		{"/v1/chat/completions", EndpointChat},
		{"/v1/responses", EndpointResponses},
		{"/v1/embeddings", EndpointEmbeddings},
		{"/v2/chat/completions", ""},
		{"/v1/models", ""},
		{"/v1/messages", ""},
		{"/v1/responses/resp_1", ""},
	}
	for _, tt := range tests {
		rt, ok := Default.Match(tt.path)
		assert.Equal(t, tt.endpoint != "", ok, tt.path)
		assert.Equal(t, tt.endpoint, rt.Endpoint, tt.path)
	}
}

func TestInspect(t *testing.T) {
	chat := provider.Route{Endpoint: EndpointChat}
	body := []byte(` {"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"{hi}"}]}`)
	req := Default.Inspect(chat, body)
	assert.Equal(t, "gpt-4.1", req.Model)
	assert.True(t, req.Stream)
	assert.True(t, req.InjectedUsage)
	assert.Equal(t, ` {"stream_options":{"include_usage":true},"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"{hi}"}]}`, string(req.Body),
		"inserted first; the rest byte for byte")

	body = []byte(`{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[]}`)
	req = Default.Inspect(chat, body)
	assert.True(t, req.InjectedUsage)
	var got struct {
		Model         string          `json:"model"`
		StreamOptions map[string]bool `json:"stream_options"`
	}
	require.NoError(t, json.Unmarshal(req.Body, &got))
	assert.Equal(t, map[string]bool{"include_obfuscation": false, "include_usage": true}, got.StreamOptions, "the client's options kept")
	assert.Equal(t, "m", got.Model)

	body = []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
	req = Default.Inspect(chat, body)
	assert.False(t, req.InjectedUsage)
	assert.Equal(t, body, req.Body)

	body = []byte(`{"model":"m","stream_options":null,"stream":true}`)
	req = Default.Inspect(chat, body)
	assert.True(t, req.InjectedUsage)
	assert.True(t, strings.HasPrefix(string(req.Body), `{"stream_options":{"include_usage":true},`))

	body = []byte(`{"model":"m","stream":true,"stream_options":"odd"}`)
	req = Default.Inspect(chat, body)
	assert.False(t, req.InjectedUsage, "options that are not an object: the API refuses them")
	assert.Equal(t, body, req.Body)

	body = []byte(`{"model":"m","messages":[]}`)
	assert.Equal(t, provider.Request{Model: "m", Body: body}, Default.Inspect(chat, body), "a call that does not stream is sent as it is")

	body = []byte(`{"model":"e","stream":true,"input":"x"}`)
	assert.Equal(t, provider.Request{Model: "e", Body: body}, Default.Inspect(provider.Route{Endpoint: EndpointEmbeddings}, body), "embeddings never stream")

	body = []byte(`{"model":"r","stream":true}`)
	assert.Equal(t, provider.Request{Model: "r", Stream: true, Body: body}, Default.Inspect(provider.Route{Endpoint: EndpointResponses}, body), "the Responses stream reports its usage by itself")

	body = []byte(`not json`)
	assert.Equal(t, provider.Request{Body: body}, Default.Inspect(chat, body))
}

func TestBodyUsage(t *testing.T) {
	h := http.Header{}
	h.Set("X-Request-Id", "req_1")
	tests := []struct {
		endpoint, body string
		want           events.Usage
	}{
		{EndpointChat, `{"usage":{"prompt_tokens":10,"completion_tokens":2}}`, events.Usage{InputTokens: 10, OutputTokens: 2}},
		{EndpointResponses, `{"usage":{"input_tokens":7,"output_tokens":3}}`, events.Usage{InputTokens: 7, OutputTokens: 3}},
		{EndpointEmbeddings, `{"usage":{"prompt_tokens":4,"total_tokens":4}}`, events.Usage{InputTokens: 4}},
	}
	for _, tt := range tests {
		u, id, ok := Default.BodyUsage(provider.Route{Endpoint: tt.endpoint}, h, []byte(tt.body))
		assert.True(t, ok, tt.endpoint)
		assert.Equal(t, tt.want, u, tt.endpoint)
		assert.Equal(t, "req_1", id)
	}
	_, _, ok := Default.BodyUsage(provider.Route{Endpoint: EndpointChat}, h, []byte(`{"id":"x"}`))
	assert.False(t, ok)
}

func TestStreams(t *testing.T) {
	type ev struct{ name, data string }
	content := ev{"", `{"choices":[{"delta":{"content":"Hi"}}]}`}
	usage := ev{"", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2}}`}
	done := ev{"", `[DONE]`}
	tests := []struct {
		name     string
		endpoint string
		injected bool
		events   []ev
		verdicts []provider.Verdict
		want     events.Usage
		complete bool
	}{
		{"chat, usage asked by the client", EndpointChat, false, []ev{content, content, usage, done},
			make([]provider.Verdict, 4), events.Usage{InputTokens: 12, OutputTokens: 2}, true},
		{"chat, usage injected: its chunk is dropped", EndpointChat, true, []ev{content, usage, done},
			[]provider.Verdict{{}, {Drop: true}, {}}, events.Usage{InputTokens: 12, OutputTokens: 2}, true},
		{"chat broken before its usage: the chunks counted", EndpointChat, true, []ev{content, content},
			make([]provider.Verdict, 2), events.Usage{OutputTokens: 2}, false},
		{"chat error object", EndpointChat, false, []ev{content, {"", `{"error":{"message":"overloaded","type":"server_error"}}`}},
			[]provider.Verdict{{}, {Error: true}}, events.Usage{OutputTokens: 1}, false},
		{"the word error in the text is content", EndpointChat, false, []ev{{"", `{"choices":[{"delta":{"content":"\"error\""}}],"error":"no"}`}},
			make([]provider.Verdict, 1), events.Usage{OutputTokens: 1}, false},
		{"responses", EndpointResponses, false, []ev{
			{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`},
			{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":30,"output_tokens":2}}}`}},
			make([]provider.Verdict, 2), events.Usage{InputTokens: 30, OutputTokens: 2}, true},
		{"responses incomplete ends it too", EndpointResponses, false, []ev{
			{"response.incomplete", `{"type":"response.incomplete","response":{"usage":{"input_tokens":3,"output_tokens":1}}}`}},
			make([]provider.Verdict, 1), events.Usage{InputTokens: 3, OutputTokens: 1}, true},
		{"responses failed", EndpointResponses, false, []ev{
			{"response.failed", `{"type":"response.failed","response":{"error":{"code":"server_error","message":"x"}}}`}},
			[]provider.Verdict{{Error: true}}, events.Usage{}, false},
		{"responses error event", EndpointResponses, false, []ev{{"error", `{"type":"error","code":"rate_limit_exceeded","message":"x"}`}},
			[]provider.Verdict{{Error: true}}, events.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("X-Request-Id", "req_s")
			s := Default.NewStream(provider.Route{Endpoint: tt.endpoint}, h, provider.Request{Stream: true, InjectedUsage: tt.injected})
			for i, e := range tt.events {
				assert.Equal(t, tt.verdicts[i], s.Observe(e.name, []byte(e.data)), "event %d", i)
			}
			assert.Equal(t, tt.want, s.Usage())
			assert.Equal(t, tt.complete, s.Complete())
			assert.Equal(t, "req_s", s.ProviderID())
		})
	}
}

func TestErrorBody(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "invalid_request_error", 413: "invalid_request_error",
		429: "rate_limit_exceeded", 500: "server_error", 502: "server_error", 503: "server_error"} {
		var body struct {
			Error struct {
				Message, Type string
				Param, Code   any
			} `json:"error"`
		}
		raw := Default.ErrorBody(status, "why")
		require.NoError(t, json.Unmarshal(raw, &body))
		assert.Equal(t, typ, body.Error.Type, status)
		assert.Equal(t, "why", body.Error.Message)
		assert.Contains(t, string(raw), `"param":null`)
		assert.Equal(t, status, Default.ClassifyResponse(status, nil, raw, time.Time{}).Status)
	}
}

func TestRateLimits(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	for k, v := range map[string]string{
		"x-ratelimit-limit-requests":             "500",
		"x-ratelimit-remaining-requests":         "499",
		"x-ratelimit-reset-requests":             "120ms",
		"x-ratelimit-limit-tokens":               "200000",
		"x-ratelimit-remaining-tokens":           "150000",
		"x-ratelimit-reset-tokens":               "6m0s",
		"anthropic-ratelimit-requests-limit":     "50", // Anthropic's: not read
		"anthropic-ratelimit-requests-remaining": "0",
	} {
		h.Set(k, v)
	}
	o := Default.RateLimits(h, now)
	assert.Equal(t, guard.Limits{guard.Requests: 500, guard.Tokens: 200000}, o.Limit)
	assert.Equal(t, [guard.NumDims]bool{true, false, false, true}, o.HasRemaining)
	assert.Equal(t, int64(150000), o.Remaining[guard.Tokens])
	assert.Equal(t, now.Add(120*time.Millisecond), o.Reset[guard.Requests])
	assert.Equal(t, now.Add(6*time.Minute), o.Reset[guard.Tokens])
}
