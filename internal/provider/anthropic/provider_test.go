package anthropic

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

func TestRegistered(t *testing.T) {
	p, ok := provider.Lookup(Name)
	require.True(t, ok)
	assert.Equal(t, Provider{}, p)
	var found bool
	for _, c := range retry.RegisteredClassifiers() {
		found = found || c.Provider == Name
	}
	assert.True(t, found, "the classifier is registered with the provider")
	up := p.Upstream()
	assert.Equal(t, []string{"X-Api-Key", "Authorization"}, up.CredentialHeaders)
	assert.True(t, up.AtRoot)
	assert.False(t, up.Fallback)
}

func TestMatch(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/v1/messages", true},
		{"/v1/messages/count_tokens", false},
		{"/v1/messages/batches", false},
		{"/v1/chat/completions", false},
		{"/v1/models", false},
	}
	for _, tt := range tests {
		rt, ok := Provider{}.Match(tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		if ok {
			assert.Equal(t, provider.Route{Endpoint: "messages"}, rt)
		}
	}
}

func TestPassthrough(t *testing.T) {
	tests := []struct {
		path   string
		header []string
		want   bool
	}{
		{"/v1/models", []string{"Anthropic-Version", "2023-06-01"}, true},
		{"/v1/models", []string{"X-Api-Key", "k"}, true},
		{"/v1/messages/batches", nil, true},
		{"/v1/models", []string{"Authorization", "Bearer k"}, false},
		{"/v1beta/models", nil, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.path, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		assert.Equal(t, tt.want, Provider{}.Upstream().Passthrough(r), "%s %v", tt.path, tt.header)
	}
}

func TestInspect(t *testing.T) {
	body := []byte(`{"model":"claude-x","stream":true,"messages":[]}`)
	assert.Equal(t, provider.Request{Model: "claude-x", Stream: true, Body: body}, Provider{}.Inspect(provider.Route{}, body))
	bad := []byte(`not json`)
	assert.Equal(t, provider.Request{Body: bad}, Provider{}.Inspect(provider.Route{}, bad))
}

func TestBodyUsage(t *testing.T) {
	h := http.Header{}
	h.Set("Request-Id", "req_1")
	u, id, ok := Provider{}.BodyUsage(provider.Route{}, h, []byte(`{"usage":{"input_tokens":10,"output_tokens":2,"cache_read_input_tokens":5}}`))
	assert.True(t, ok)
	assert.Equal(t, "req_1", id)
	assert.Equal(t, events.Usage{InputTokens: 15, OutputTokens: 2, CacheReadInputTokens: 5}, u)
	_, _, ok = Provider{}.BodyUsage(provider.Route{}, h, []byte(`{"id":"msg"}`))
	assert.False(t, ok)
}

func TestStream(t *testing.T) {
	type ev struct{ name, data string }
	start := ev{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":4}}}`}
	delta := ev{"message_delta", `{"type":"message_delta","usage":{"output_tokens":7}}`}
	tests := []struct {
		name     string
		events   []ev
		want     events.Usage
		complete bool
		errAt    int // index of the event that is an error; -1 for none
	}{
		{"whole", []ev{start, {"content_block_delta", `{}`}, delta, {"message_stop", `{"type":"message_stop"}`}},
			events.Usage{InputTokens: 14, OutputTokens: 7, CacheReadInputTokens: 4}, true, -1},
		{"broken after the start: the output so far", []ev{start, {"content_block_delta", `{}`}},
			events.Usage{InputTokens: 14, OutputTokens: 1, CacheReadInputTokens: 4}, false, -1},
		{"error event", []ev{start, {"error", `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`}},
			events.Usage{InputTokens: 14, OutputTokens: 1, CacheReadInputTokens: 4}, false, 1},
		{"unreadable event", []ev{start, {"message_delta", `{`}},
			events.Usage{InputTokens: 14, OutputTokens: 1, CacheReadInputTokens: 4}, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Request-Id", "req_s")
			s := Provider{}.NewStream(provider.Route{}, h, provider.Request{})
			for i, e := range tt.events {
				v := s.Observe(e.name, []byte(e.data))
				assert.Equal(t, provider.Verdict{Error: i == tt.errAt}, v, e.name)
			}
			assert.Equal(t, tt.want, s.Usage())
			assert.Equal(t, tt.complete, s.Complete())
			assert.Equal(t, "req_s", s.ProviderID())
		})
	}
}

func TestErrorBody(t *testing.T) {
	for status, typ := range map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 413: "request_too_large",
		429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error",
	} {
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type, Message string
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(Provider{}.ErrorBody(status, "why"), &body))
		assert.Equal(t, "error", body.Type)
		assert.Equal(t, typ, body.Error.Type, status)
		assert.Equal(t, "why", body.Error.Message)
		// What the gateway says of its own errors is classified by the
		// provider's rules as the status says.
		c := Provider{}.ClassifyResponse(status, nil, Provider{}.ErrorBody(status, "why"), time.Time{})
		assert.Equal(t, status, c.Status)
	}
}

func TestRateLimits(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	for k, v := range map[string]string{
		"anthropic-ratelimit-requests-limit":          "50",
		"anthropic-ratelimit-requests-remaining":      "49",
		"anthropic-ratelimit-requests-reset":          "2026-03-01T12:00:01Z",
		"anthropic-ratelimit-input-tokens-limit":      "30000",
		"anthropic-ratelimit-input-tokens-remaining":  "0",
		"anthropic-ratelimit-input-tokens-reset":      "2026-03-01T12:00:02.5Z",
		"anthropic-ratelimit-output-tokens-limit":     "8000",
		"anthropic-ratelimit-output-tokens-remaining": "7990",
		"anthropic-ratelimit-tokens-limit":            "38000", // not read
		"x-ratelimit-limit-requests":                  "500",   // OpenAI's: not read
	} {
		h.Set(k, v)
	}
	o := Provider{}.RateLimits(h, now)
	assert.Equal(t, guard.Limits{guard.Requests: 50, guard.InputTokens: 30000, guard.OutputTokens: 8000}, o.Limit)
	assert.Equal(t, [guard.NumDims]int64{49, 0, 7990, 0}, o.Remaining)
	assert.Equal(t, [guard.NumDims]bool{true, true, true, false}, o.HasRemaining)
	assert.Equal(t, now.Add(time.Second), o.Reset[guard.Requests])
	assert.Equal(t, now.Add(2500*time.Millisecond), o.Reset[guard.InputTokens])
	assert.True(t, o.Reset[guard.OutputTokens].IsZero())
}
