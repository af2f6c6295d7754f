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
