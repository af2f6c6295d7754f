package openai

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NotNil(t, up.Passthrough)
	for path, want := range map[string]bool{"/v1/models": true, "/v1": true, "/v1beta/models": false, "/ollama/v1/models": false, "/": false} {
		assert.Equal(t, want, up.Passthrough(httptest.NewRequest(http.MethodGet, path, nil)), path)
	}
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
	a, _ := p.BodyUsage(provider.Route{Endpoint: EndpointChat}, h, []byte(`{}`))
	assert.Equal(t, "kong-1", a.ProviderID, "its own request ID header")
	assert.Equal(t, "kong-1", p.NewStream(provider.Route{Endpoint: EndpointChat}, h, provider.Request{}).ProviderID())
	assert.True(t, func() bool { o := p.RateLimits(h, time.Now()); return o.Empty() }(), "no rate-limit headers declared")
}
