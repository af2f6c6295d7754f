package gemini

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
)

func TestRegistered(t *testing.T) {
	p, ok := provider.Lookup(Name)
	require.True(t, ok)
	assert.Equal(t, Provider{}, p)
	up := p.Upstream()
	assert.Equal(t, []string{"X-Goog-Api-Key"}, up.CredentialHeaders)
	assert.Equal(t, "key", up.CredentialQuery)
	assert.True(t, up.AtRoot)
}

func TestMatch(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
		want provider.Route
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", true, provider.Route{Endpoint: EndpointGenerate, Model: "gemini-2.5-flash"}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", true, provider.Route{Endpoint: EndpointGenerate, Model: "gemini-2.5-flash", Stream: true}},
		{"/v1/models/gemini-pro:generateContent", true, provider.Route{Endpoint: EndpointGenerate, Model: "gemini-pro"}},
		{"/v1alpha/models/g:generateContent", true, provider.Route{Endpoint: EndpointGenerate, Model: "g"}},
		{"/v1beta/models/gemini-2.5-flash:countTokens", false, provider.Route{}},
		{"/v1beta/models/:generateContent", false, provider.Route{}},
		{"/v1beta/models/a/b:generateContent", false, provider.Route{}},
		{"/v1beta/tunedModels/x:generateContent", false, provider.Route{}},
		{"/v1beta/models/g", false, provider.Route{}},
		{"/v1/chat/completions", false, provider.Route{}},
	}
	for _, tt := range tests {
		rt, ok := Provider{}.Match(tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		assert.Equal(t, tt.want, rt, tt.path)
	}
}

func TestPassthrough(t *testing.T) {
	tests := []struct {
		target string
		header []string
		want   bool
	}{
		{"/v1beta/models", nil, true},
		{"/v1alpha/files", nil, true},
		{"/v1/files?key=abc", nil, true},
		{"/upload/v1beta/files", []string{"X-Goog-Api-Key", "k"}, true},
		{"/download/v1beta/files/x", nil, true},
		{"/v1/models", []string{"X-Goog-Api-Key", "k"}, true},
		{"/v1/models", []string{"Authorization", "Bearer k"}, false},
		{"/v1/messages/batches", nil, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.target, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			r.Header.Set(tt.header[i], tt.header[i+1])
		}
		assert.Equal(t, tt.want, Provider{}.Upstream().Passthrough(r), "%s %v", tt.target, tt.header)
	}
}

func TestInspect(t *testing.T) {
	body := []byte(`{"contents":[],"model":"not-this-one"}`)
	assert.Equal(t, provider.Request{Model: "g", Stream: true, Body: body}, Provider{}.Inspect(provider.Route{Endpoint: EndpointGenerate, Model: "g", Stream: true}, body))
	assert.Equal(t, provider.Request{Model: "g", Body: body}, Provider{}.Inspect(provider.Route{Endpoint: EndpointGenerate, Model: "g"}, body))
}

func TestStream(t *testing.T) {
	chunk1 := `{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":1},"responseId":"abc"}`
	chunk2 := `{"candidates":[{"content":{"parts":[{"text":" there"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":2}}`
	tests := []struct {
		name     string
		chunks   []string
		errAt    int
		want     events.Usage
		complete bool
	}{
		{"whole", []string{chunk1, "", chunk2}, -1, events.Usage{InputTokens: 50, OutputTokens: 2}, true},
		{"broken: the running total so far", []string{chunk1}, -1, events.Usage{InputTokens: 50, OutputTokens: 1}, false},
		{"error chunk", []string{chunk1, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`}, 1, events.Usage{InputTokens: 50, OutputTokens: 1}, false},
		{"the word error in the text", []string{`{"candidates":[{"content":{"parts":[{"text":"\"error\""}]}}],"responseId":"abc"}`}, -1, events.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Provider{}.NewStream(provider.Route{Endpoint: EndpointGenerate, Stream: true}, http.Header{}, provider.Request{})
			for i, c := range tt.chunks {
				assert.Equal(t, provider.Verdict{Error: i == tt.errAt}, s.Observe("", []byte(c)), "chunk %d", i)
			}
			assert.Equal(t, tt.want, s.Usage())
			assert.Equal(t, tt.complete, s.Complete())
			assert.Equal(t, "abc", s.ProviderID())
		})
	}
}

func TestErrorBody(t *testing.T) {
	for status, rpc := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 409: "ABORTED",
		413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		var body struct {
			Error struct {
				Code            int
				Message, Status string
			} `json:"error"`
		}
		raw := Provider{}.ErrorBody(status, "why")
		require.NoError(t, json.Unmarshal(raw, &body))
		assert.Equal(t, status, body.Error.Code)
		assert.Equal(t, rpc, body.Error.Status, status)
		assert.Equal(t, "why", body.Error.Message)
		assert.Equal(t, status, Provider{}.ClassifyResponse(status, nil, raw, time.Time{}).Status)
	}
}

func TestNoRateLimits(t *testing.T) {
	h := http.Header{}
	h.Set("X-Ratelimit-Limit-Requests", "500")
	h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
	o := Provider{}.RateLimits(h, time.Now())
	assert.True(t, o.Empty())
}
