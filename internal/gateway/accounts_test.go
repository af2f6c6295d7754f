package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/guard"
)

const (
	tenantA = "sk-ant-tenant-a-0123456789"
	tenantB = "sk-ant-tenant-b-0123456789"
)

// byKey is an upstream step that answers by the request's API key.
func byKey(steps map[string]step) step {
	return func(w http.ResponseWriter, r *http.Request) { steps[r.Header.Get("X-Api-Key")](w, r) }
}

// Issue 17 item 3: one tenant's 429 holds only its own account. Tenant A's
// key gets 429 with retry-after 30; a call with B's key right after goes
// through (before, the hold was the provider/model's, and B got 429
// without reaching the provider), while A's next call is held.
func TestOneAccountsHoldDoesNotHoldAnother(t *testing.T) {
	up := startScripted(t, byKey(map[string]step{
		tenantA: reply(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "Retry-After", "30"),
		tenantB: reply(200, anthropicOK),
	}))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		gs, err := guard.New(guard.Config{RateLimits: true})
		require.NoError(t, err)
		c.Retry.Guards = gs
	})
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", tenantA)
	require.Equal(t, 429, resp.StatusCode, "A's own 429, relayed: 30 s is over the hint cap")
	require.Empty(t, resp.Header.Get(HeaderGatewayError))

	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", tenantB)
	assert.Equal(t, 200, resp.StatusCode, "B's account is not held")
	assert.Equal(t, 2, len(up.requests()), "B's call reached the provider")

	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", tenantA)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "rate_limited", resp.Header.Get(HeaderGatewayError), "A's account is held by the gateway")
	assert.Equal(t, 2, len(up.requests()))
	body, _ := read(resp)
	assert.NotContains(t, body, tenantA)
	assert.NotContains(t, h.logs.String(), tenantA)
}

// A provider-wide outage still opens one breaker that every account
// shares: A's failures open it, and B's call is refused without reaching
// the provider.
func TestOutageOpensTheBreakerForEveryAccount(t *testing.T) {
	up := startScripted(t, reply(500, overloaded))
	h := newHarness(t, up.srv.URL, func(c *Config) {
		gs, err := guard.New(guard.Config{RateLimits: true, Breaker: breaker.Config{FailureThreshold: 3}})
		require.NoError(t, err)
		c.Retry.Guards = gs
	})
	resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", tenantA)
	require.Equal(t, 500, resp.StatusCode)
	n := len(up.requests())
	resp = h.post("/v1/messages", anthropicBody, "X-Api-Key", tenantB)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "circuit_open", resp.Header.Get(HeaderGatewayError))
	assert.Equal(t, n, len(up.requests()))
}

// The account of a request: the key's own, else a digest of the
// credential that goes upstream (the same on every replica, not the
// credential), else none.
func TestAccountOf(t *testing.T) {
	req := func(kv ...string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("{}"))
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Set(kv[i], kv[i+1])
		}
		return r
	}
	m := testMounts(t)
	ant, oai, gem := m.byName[anthropic], m.byName[openai], m.byName[gemini]
	a := accountOf(nil, req("X-Api-Key", tenantA), ant)
	assert.True(t, strings.HasPrefix(a, "cred-"), a)
	assert.NotContains(t, a, "tenant")
	assert.Equal(t, a, accountOf(nil, req("Authorization", "Bearer "+tenantA), ant), "one credential, one account")
	assert.Equal(t, a, accountOf(nil, req("Authorization", "Bearer "+tenantA), oai))
	assert.NotEqual(t, a, accountOf(nil, req("X-Api-Key", tenantB), ant))
	assert.Equal(t, "acme", accountOf(&Key{Account: "acme"}, req("X-Api-Key", tenantA), ant))
	assert.Empty(t, accountOf(nil, req(), ant))
	g := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?key="+tenantA, nil)
	assert.Equal(t, a, accountOf(nil, g, gem))
	// The credential that goes upstream is the provider's own: the one
	// its clients put first.
	both := req("X-Api-Key", tenantB, "Authorization", "Bearer "+tenantA)
	assert.Equal(t, a, accountOf(nil, both, oai))
	assert.NotEqual(t, a, accountOf(nil, both, ant))
}
