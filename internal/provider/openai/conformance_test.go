package openai

import (
	"testing"

	"github.com/agentledger/ledger/internal/provider"
	"github.com/agentledger/ledger/internal/provider/openai/openaitest"
	"github.com/agentledger/ledger/internal/provider/providertest"
)

// TestConformance runs the providers' conformance suite on OpenAI's API:
// its test is the tables of OpenAI's dialect (openaitest), which every
// OpenAI-compatible provider runs too.
func TestConformance(t *testing.T) {
	f := openaitest.Features(Name, RequestIDHeader)
	f.SDK = openaitest.SDK(ClientOptions()...)
	providertest.Run(t, Default, f)
}

// TestConformanceOfACompatibleUpstream runs the same tables on an
// OpenAI-compatible provider made with New, as every preset and
// --upstream runs them: its own name and request ID header, no rate-limit
// headers.
func TestConformanceOfACompatibleUpstream(t *testing.T) {
	p := New("compat", provider.Upstream{Origin: "https://llm.example.com/openai", CredentialHeaders: []string{"Authorization"}, BearerCredential: true, RequestIDHeader: "X-Kong-Request-Id"}, nil)
	f := openaitest.Features("compat", "X-Kong-Request-Id")
	f.RateLimits = []providertest.RateLimitCase{{Name: "OpenAI's headers are not read", Header: map[string]string{"X-Ratelimit-Limit-Requests": "500", "X-Ratelimit-Remaining-Requests": "499"}}}
	f.SDK = openaitest.SDK(ClientOptions()...)
	providertest.Run(t, p, f)
}

// unasked is a compatible API like Mistral's: no embeddings accounted,
// and chat streams that report their usage unasked (the body goes as the
// client wrote it).
type unasked struct{ *Provider }

func (p unasked) Match(path string) (provider.Route, bool) {
	rt, ok := p.Provider.Match(path)
	return rt, ok && rt.Endpoint != EndpointEmbeddings
}

func (p unasked) Inspect(rt provider.Route, body []byte) provider.Request {
	req := p.Provider.Inspect(rt, body)
	req.Body, req.InjectedUsage = body, false
	return req
}

// TestConformanceOfAnAPIWithoutEmbeddingsOrStreamOptions shows the tables
// of a compatible API that differs from OpenAI's (openaitest.Without,
// openaitest.UsageUnasked), as a preset's test makes them.
func TestConformanceOfAnAPIWithoutEmbeddingsOrStreamOptions(t *testing.T) {
	p := unasked{New("unasked", provider.Upstream{Origin: "https://llm.example.com", CredentialHeaders: []string{"Authorization"}, BearerCredential: true, RequestIDHeader: RequestIDHeader}, RateLimitHeaders)}
	f := openaitest.UsageUnasked(openaitest.Without(openaitest.Features("unasked", RequestIDHeader), "/v1/embeddings"))
	f.SDK = openaitest.SDK(ClientOptions()...)
	providertest.Run(t, p, f)
}
