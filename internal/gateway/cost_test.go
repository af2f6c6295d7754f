package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/pricing"
)

// The answer carries the attempt's cost, priced by hand: 10 uncached
// input tokens at $1/M, 90 cache reads at $0.10/M and 5 output tokens at
// $5/M are 10,000 + 9,000 + 25,000 nano-USD; a model without a price says
// so; without a catalog there is no header.
func TestCostHeader(t *testing.T) {
	cat, err := pricing.Parse([]byte(`{"entries": [{"provider": "anthropic", "model": "claude-test", "effective_from": "2020-01-01",
 "input": "1", "cache_read": "0.10", "output": "5", "source": "test", "read_on": "2026-12-04"}]}`))
	require.NoError(t, err)
	other, err := pricing.Parse([]byte(`{"entries": [{"provider": "anthropic", "model": "claude-other", "effective_from": "2020-01-01",
 "input": "1", "output": "5", "source": "test", "read_on": "2026-12-04"}]}`))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		prices *pricing.Catalog
		want   string
	}{
		{"priced", cat, "0.000044"},
		{"unpriced", other, "unpriced"},
		{"no catalog", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startScripted(t, reply(200, anthropicOK, "Request-Id", "req_ok"))
			h := newHarness(t, up.srv.URL, func(c *Config) { c.Prices = tc.prices })
			resp := h.post("/v1/messages", anthropicBody, "X-Api-Key", "sk-ant-test")
			_, err := read(resp)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, tc.want, resp.Header.Get(HeaderCost))
		})
	}
}

// trailerPrices prices the models of TestCostTrailer, in $/Mtok.
const trailerPrices = `{"entries": [
 {"provider": "anthropic", "model": "claude-test", "effective_from": "2020-01-01", "input": "1", "cache_read": "0.10", "output": "5", "source": "test", "read_on": "2026-12-04"},
 {"provider": "openai", "model": "gpt-4o", "effective_from": "2020-01-01", "input": "2", "cache_read": "1", "output": "8", "source": "test", "read_on": "2026-12-04"},
 {"provider": "openai", "model": "gpt-5", "effective_from": "2020-01-01", "input": "1", "output": "10", "source": "test", "read_on": "2026-12-04"},
 {"provider": "gemini", "model": "gemini-test", "effective_from": "2020-01-01", "input": "0.3", "output": "2.5", "source": "test", "read_on": "2026-12-04"}]}`

// A stream's answer announces X-Ledger-Cost as a trailer and sends it
// after its last event, for every provider's stream, over HTTP/1.1
// (chunked) and HTTP/2, read by net/http's client from resp.Trailer. Each
// cost by hand, at trailerPrices:
//   - Anthropic: 20 uncached input at $1/M, 100 cache reads at $0.10/M,
//     42 output at $5/M: 20,000 + 10,000 + 210,000 = 240,000 nano-USD;
//   - Anthropic ended by an error event after message_start (what it
//     billed as far as the stream says: output 1): 20,000 + 10,000 +
//     5,000 = 35,000;
//   - OpenAI chat: 200 uncached at $2/M, 100 cached at $1/M, 2 output at
//     $8/M: 400,000 + 100,000 + 16,000 = 516,000;
//   - Responses: 9 input at $1/M, 1 output at $10/M: 9,000 + 10,000;
//   - Gemini: 10 input at $0.30/M, 5 output at $2.50/M: 3,000 + 12,500;
//   - a Gemini model without a price: "unpriced", never 0.
//
// A stream cut upstream is cut for the client too (an error, no clean
// end), so no trailer arrives; its cost is the ledger's. Before issue 19
// closed, a stream carried no cost at all.
func TestCostTrailer(t *testing.T) {
	cat, err := pricing.Parse([]byte(trailerPrices))
	require.NoError(t, err)
	const (
		chatBody    = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		respBody    = `{"model":"gpt-5","stream":true,"input":"hello world"}`
		respCreate  = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}"
		respDelta   = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}"
		respDone    = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1,\"total_tokens\":10}}}"
		geminiChunk = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15}}`
	)
	cases := []struct {
		name, path, body string
		up               step
		cut              bool
		want             string
	}{
		{"anthropic", "/v1/messages", anthropicStreamBody, sse(false, evStart, evDelta, evMsgDelta, evStop), false, "0.00024"},
		{"anthropic ended by an error event", "/v1/messages", anthropicStreamBody, sse(false, evStart, evDelta, evOverloaded), false, "0.000035"},
		{"openai chat", "/v1/chat/completions", chatBody, sse(false, chunk("a"), usageChunk, "data: [DONE]"), false, "0.000516"},
		{"openai responses", "/v1/responses", respBody, sse(false, respCreate, respDelta, respDone), false, "0.000019"},
		{"gemini", "/v1beta/models/gemini-test:streamGenerateContent?alt=sse", `{"contents":[]}`, sse(false, geminiChunk), false, "0.0000155"},
		{"gemini unpriced", "/v1beta/models/gemini-other:streamGenerateContent?alt=sse", `{"contents":[]}`, sse(false, geminiChunk), false, "unpriced"},
		{"anthropic cut upstream", "/v1/messages", anthropicStreamBody, sse(true, evStart, evDelta), true, ""},
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, tc := range cases {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				up := startScripted(t, tc.up)
				h := newHarness(t, up.srv.URL, func(c *Config) { c.Prices = cat })
				client := http.DefaultClient
				if proto == "HTTP/2.0" {
					srv := httptest.NewUnstartedServer(h.gw)
					srv.EnableHTTP2 = true
					srv.StartTLS()
					t.Cleanup(srv.Close)
					h.url, client = srv.URL, srv.Client()
				}
				req, err := http.NewRequest(http.MethodPost, h.url+tc.path, strings.NewReader(tc.body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer k")
				resp, err := client.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				require.Equal(t, proto, resp.Proto)
				require.Equal(t, 200, resp.StatusCode)
				assert.Empty(t, resp.Header.Get(HeaderCost), "a stream's cost is not known when its headers leave")
				_, hasTrailer := resp.Trailer[HeaderCost]
				assert.True(t, hasTrailer, "the trailer is announced before the body")
				_, err = read(resp)
				assert.Equal(t, tc.cut, err != nil, "the client's stream is cut: %v", err)
				assert.Equal(t, tc.want, resp.Trailer.Get(HeaderCost))
				evs := h.events()
				require.Len(t, evs, 1)
				if tc.want != "" && tc.want != "unpriced" {
					cost, ok := cat.Price(pricing.Attempt{Provider: evs[0].Provider, Model: evs[0].Model, ServiceTier: evs[0].ServiceTier, At: evs[0].StartedAt, Usage: evs[0].Usage})
					require.True(t, ok)
					assert.Equal(t, tc.want, cost.Total.String(), "the trailer is the cost of the usage the ledger records")
				}
			})
		}
	}
}
