package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/retry"
)

// renamed is a built-in provider under another name, reached only at its
// mount: what an OpenAI-compatible upstream is (a provider whose routes
// are OpenAI's, under a name of its own).
type renamed struct {
	provider.Provider
	name string
}

func (r renamed) Name() string { return r.name }

func (r renamed) Upstream() provider.Upstream {
	up := r.Provider.Upstream()
	up.AtRoot = false
	return up
}

// testRegistry is the built-in providers plus "mistral", OpenAI's dialect
// under its own name.
func testRegistry(t *testing.T) *provider.Registry {
	t.Helper()
	reg := provider.Builtin()
	oai, ok := reg.Lookup(openai)
	require.True(t, ok)
	require.NoError(t, reg.Add(renamed{Provider: oai, name: "mistral"}))
	return reg
}

// usageOfAll is a successful answer with usage in every provider's
// shape, so that any accounted route reads its own.
const usageOfAll = `{"usage":{"input_tokens":3,"output_tokens":1,"prompt_tokens":3,"completion_tokens":1},"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`

// Every provider is reachable at /NAME/..., the built-ins also at the
// root as before; a provider added later (mistral) only at its mount.
// Each origin here carries a path prefix naming its provider, so the
// path the upstream sees says where the request went: the origin's path
// followed by the request's path after the mount.
func TestMountRouting(t *testing.T) {
	up := startScripted(t, reply(200, usageOfAll))
	origins := map[string]string{}
	for _, p := range []string{anthropic, openai, gemini, "mistral"} {
		origins[p] = up.srv.URL + "/up-" + p
	}
	h := newHarness(t, up.srv.URL, func(c *Config) {
		c.Providers = testRegistry(t)
		c.Upstreams = origins
	})
	tests := []struct {
		name, method, target string
		header               []string
		provider             string // of the events; "" when not accounted
		upstream             string // path and query the upstream saw
	}{
		{"anthropic at the root", "POST", "/v1/messages", nil, anthropic, "/up-anthropic/v1/messages"},
		{"openai at the root", "POST", "/v1/chat/completions", nil, openai, "/up-openai/v1/chat/completions"},
		{"gemini at the root", "POST", "/v1beta/models/g:generateContent?alt=json", nil, gemini, "/up-gemini/v1beta/models/g:generateContent?alt=json"},
		{"anthropic at its mount", "POST", "/anthropic/v1/messages", nil, anthropic, "/up-anthropic/v1/messages"},
		{"openai at its mount", "POST", "/openai/v1/embeddings", nil, openai, "/up-openai/v1/embeddings"},
		{"gemini at its mount", "POST", "/gemini/v1/models/g:generateContent", nil, gemini, "/up-gemini/v1/models/g:generateContent"},
		{"an added provider at its mount", "POST", "/mistral/v1/chat/completions", nil, "mistral", "/up-mistral/v1/chat/completions"},
		{"the root's chat is OpenAI's, not the added provider's", "POST", "/v1/chat/completions", []string{"Authorization", "Bearer m"}, openai, "/up-openai/v1/chat/completions"},
		{"passthrough at a mount", "GET", "/mistral/v1/models?x=1", nil, "", "/up-mistral/v1/models?x=1"},
		{"a mount's path another provider accounts is passthrough", "POST", "/anthropic/v1/chat/completions", nil, "", "/up-anthropic/v1/chat/completions"},
		{"passthrough at a mount needs no hint", "GET", "/gemini/v1/models", nil, "", "/up-gemini/v1/models"},
		{"passthrough at the root by the hint", "GET", "/v1/models", []string{"Anthropic-Version", "2023-06-01"}, "", "/up-anthropic/v1/models"},
		{"passthrough at the root, Gemini's path", "GET", "/v1beta/models", nil, "", "/up-gemini/v1beta/models"},
		{"passthrough at the root, OpenAI's /v1/", "GET", "/v1/models", nil, "", "/up-openai/v1/models"},
		{"the mount alone", "GET", "/mistral", nil, "", "/up-mistral/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, seen := len(h.sink.Events()), len(up.requests())
			req, err := http.NewRequest(tt.method, h.url+tt.target, strings.NewReader(`{"model":"m"}`))
			require.NoError(t, err)
			for i := 0; i+1 < len(tt.header); i += 2 {
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = read(resp)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			reqs := up.requests()
			require.Len(t, reqs, seen+1)
			got := reqs[seen].URL.Path
			if q := reqs[seen].URL.RawQuery; q != "" {
				got += "?" + q
			}
			assert.Equal(t, tt.upstream, got)
			evs := h.events()[before:]
			if tt.provider == "" {
				assert.Empty(t, evs, "not accounted")
				return
			}
			require.Len(t, evs, 1)
			assert.Equal(t, tt.provider, evs[0].Provider)
			assert.Equal(t, int64(3), evs[0].Usage.InputTokens, "the provider's usage was read")
		})
	}
}

// The breaker of a provider at a mount is its own: a failing added
// provider opens its breaker, not OpenAI's, whose routes it shares.
func TestAddedProviderHasItsOwnBreaker(t *testing.T) {
	up := startScripted(t, reply(200, usageOfAll))
	down := startScripted(t, reply(503, `{"error":{"message":"down","type":"server_error"}}`))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		group, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1})
		require.NoError(t, err)
		c.Retry.Breakers = group
		c.Providers = testRegistry(t)
		c.Upstreams = map[string]string{openai: up.srv.URL, "mistral": down.srv.URL}
	})
	resp := h.post("/mistral/v1/chat/completions", `{"model":"m"}`)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "circuit_open", resp.Header.Get(HeaderGatewayError))
	assert.Len(t, down.requests(), 1, "one failure opened mistral's breaker")
	resp = h.post("/v1/chat/completions", `{"model":"m"}`)
	assert.Equal(t, 200, resp.StatusCode, "OpenAI's breaker is another")
	guards := h.gw.Middleware().Guards()
	assert.Equal(t, breaker.Open, guards.Get("mistral/m").BreakerState())
	assert.Equal(t, breaker.Closed, guards.Get("openai/m").BreakerState())
	providers := map[string]bool{}
	for _, ev := range h.events() {
		providers[ev.Provider] = true
	}
	assert.Equal(t, map[string]bool{"mistral": true, openai: true}, providers, "the events name the provider")
}

// The providers and their origins are validated, naming the field.
func TestProvidersConfig(t *testing.T) {
	sink := retry.Options{Sink: retry.NewMemorySink()}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"origin of an unknown provider", Config{Upstreams: map[string]string{"mistral": "http://h"}},
			[]string{"Upstreams", `"mistral"`, "anthropic, gemini, openai"}},
		{"bad origin", Config{Upstreams: map[string]string{openai: "http://h?x=1"}}, []string{`Upstreams["openai"]`, "query"}},
		{"empty registry", Config{Providers: &provider.Registry{}}, []string{"Providers", "no provider"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Retry = sink
			_, err := New(tt.cfg)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	reg := testRegistry(t)
	_, err := New(Config{Retry: sink, Providers: reg, Upstreams: map[string]string{"mistral": "http://127.0.0.1:1/v1/"}})
	assert.NoError(t, err, "an added provider's origin, with a path prefix")
}

// A request no provider at the root takes is
// answered 404, naming the mounts.
func TestNoRoute(t *testing.T) {
	up := startScripted(t, reply(200, usageOfAll))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		reg := &provider.Registry{}
		builtin := testRegistry(t)
		for _, name := range []string{anthropic, "mistral"} {
			p, _ := builtin.Lookup(name)
			require.NoError(t, reg.Add(p))
		}
		c.Providers = reg
		c.Upstreams = map[string]string{anthropic: up.srv.URL, "mistral": up.srv.URL}
	})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	body, _ := read(resp)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "no_route", resp.Header.Get(HeaderGatewayError))
	assert.Contains(t, body, "anthropic, mistral")
	resp = h.post("/mistral/v1/chat/completions", `{"model":"m"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, up.requests(), 1)
}

// A request at the root that no provider claims (an unmounted upstream's
// path, say /ollama/v1/... on a gateway that mounts no ollama) is refused
// 404: it used to go to OpenAI, the root's fallback, with the client's
// credential.
func TestUnclaimedRequestKeepsItsCredential(t *testing.T) {
	up := startScripted(t, reply(200, usageOfAll))
	h := newHarness(t, up.srv.URL, nil)
	for _, path := range []string{"/ollama/v1/chat/completions", "/ollama/api/tags", "/nosuch"} {
		resp := h.post(path, `{"model":"m"}`, "Authorization", "Bearer sk-ollama-key")
		body, _ := read(resp)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		assert.Equal(t, "no_route", resp.Header.Get(HeaderGatewayError), path)
		assert.NotContains(t, body, "sk-ollama-key", path)
	}
	assert.Empty(t, up.requests(), "nothing reached an upstream")
}
