package openai

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/guard"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

func TestCompatible(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		origin     string
		accounts   []string // of chat, embeddings, responses
		requestIDH string
	}{
		{"mistral", Config{Preset: "mistral"}, "https://api.mistral.ai", []string{"/v1/chat/completions", "/v1/embeddings"}, "X-Kong-Request-Id"},
		{"groq", Config{Preset: "groq"}, "https://api.groq.com/openai", []string{"/v1/chat/completions", "/v1/responses"}, RequestIDHeader},
		{"deepseek", Config{Preset: "deepseek"}, "https://api.deepseek.com", []string{"/v1/chat/completions"}, RequestIDHeader},
		{"ollama", Config{Preset: "ollama"}, "http://localhost:11434", []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"}, RequestIDHeader},
		{"lab", Config{Preset: "vllm", Origin: "http://10.0.0.5:8000/"}, "http://10.0.0.5:8000", []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"}, RequestIDHeader},
		{"corp", Config{Origin: "https://llm.corp.example/api"}, "https://llm.corp.example/api", []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"}, RequestIDHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compatible(tt.name, tt.cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.name, p.Name())
			up := p.Upstream()
			assert.Equal(t, tt.origin, up.Origin)
			assert.Equal(t, []string{"Authorization"}, up.CredentialHeaders)
			assert.True(t, up.BearerCredential)
			assert.Equal(t, tt.requestIDH, up.RequestIDHeader)
			assert.False(t, up.AtRoot, "a compatible upstream is mounted at /NAME/ only")
			for _, path := range []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses"} {
				_, ok := p.Match(path)
				assert.Equal(t, slices.Contains(tt.accounts, path), ok, path)
			}
			_, ok := p.Match("/v1/models")
			assert.False(t, ok)
		})
	}
}

func TestCompatibleRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"Mistral", Config{Preset: "mistral"}, `name: "Mistral" must be`},
		{"x", Config{Preset: "llamacpp"}, `preset: "llamacpp" is not one of mistral, groq`},
		{"corp", Config{}, "origin: required without a preset"},
		{"corp", Config{Origin: "https://api.mistral.ai/v1"}, `must not end in /v1: the clients' paths (/NAME/v1/...) carry it; give https://api.mistral.ai`},
		{"corp", Config{Origin: "https://api.mistral.ai/v1/"}, "must not end in /v1"},
		{"corp", Config{Origin: "ftp://llm.corp"}, "must start with http:// or https://"},
		{"corp", Config{Origin: "llm.corp:8000"}, "must start with http:// or https://"},
		{"corp", Config{Origin: "http://"}, "has no host"},
		{"corp", Config{Origin: "https://user:secret@llm.corp"}, "must not carry credentials"},
		{"corp", Config{Origin: "https://llm.corp/?x=1"}, "must have no query or fragment"},
	}
	for _, tt := range tests {
		_, err := Compatible(tt.name, tt.cfg)
		require.Error(t, err, "%s %+v", tt.name, tt.cfg)
		assert.Contains(t, err.Error(), tt.want)
		assert.NotContains(t, err.Error(), "secret", "credentials are never repeated")
	}
}

// A chat stream to Mistral is sent as the client wrote it: Mistral
// refuses stream_options (422) and sends the usage unasked. Every other
// preset gets OpenAI's include_usage.
func TestCompatibleInspect(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	chat := provider.Route{Endpoint: EndpointChat}
	for _, name := range Presets() {
		p, err := Compatible(name, Config{Preset: name})
		require.NoError(t, err)
		req := p.Inspect(chat, body)
		assert.Equal(t, "m", req.Model)
		assert.True(t, req.Stream)
		if name == "mistral" {
			assert.False(t, req.InjectedUsage, name)
			assert.Equal(t, string(body), string(req.Body), name)
		} else {
			assert.True(t, req.InjectedUsage, name)
			assert.Contains(t, string(req.Body), `"include_usage":true`, name)
		}
	}
}

// The provider's ClassifyResponse, ClassifyStreamError, RateLimits and
// Classifier are the preset's.
func TestCompatibleProviderUsesItsPreset(t *testing.T) {
	p, err := Compatible("mistral", Config{Preset: "mistral"})
	require.NoError(t, err)
	now := time.Now()
	h := http.Header{"X-Kong-Request-Id": {"kong_9"}, "X-Ratelimit-Limit-Req-Minute": {"720"}}
	body := []byte(`{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","param":null,"code":"3505"}`)

	c := p.ClassifyResponse(429, h, body, now)
	providertest.Check(t, c, providertest.Want{Kind: events.KindOverloaded, Status: 429, Retryable: true, ProviderRequestID: "kong_9", MessageContains: "3505"})
	assert.EqualValues(t, 720, p.RateLimits(h, now).Limit[guard.Requests])

	sc := p.ClassifyStreamError(nil, []byte(`{"error":{"message":"capacity","type":"service_tier_capacity_exceeded","code":"3505"}}`), now)
	assert.Equal(t, events.KindOther, sc.Kind, "a capacity rule holds only on a 429")
	sc = p.ClassifyStreamError(nil, []byte(`{"object":"error","message":"Rate limit exceeded","type":"rate_limited","code":"1300"}`), now)
	assert.Equal(t, events.KindRateLimit, sc.Kind)
	assert.True(t, sc.Retryable)

	// its Classifier applies the preset to an SDK error whatever its
	// response names (a chain of one's own)
	s := providertest.Start(t, providertest.Reply{Status: 429, Header: map[string]string{"Content-Type": "application/json"}, Body: string(body)})
	client := newClient(t, s.URL)
	_, err = client.Chat.Completions.New(context.Background(), newParams())
	got, ok := p.Classifier().Classify(err, now)
	require.True(t, ok)
	assert.Equal(t, events.KindOverloaded, got.Kind)
	got, _ = Classifier.Classify(err, now)
	assert.Equal(t, events.KindRateLimit, got.Kind, "OpenAI's rules for a client that names no provider")
}
