package gateway

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/provider"
	oai "github.com/agentledger/ledger/internal/provider/openai"
	"github.com/agentledger/ledger/internal/retry"
)

// A stream of OpenAI's dialect whose usage never came (cut before its
// usage chunk or its response.completed, or ended by an upstream that
// ignored include_usage) records the input estimated from the request in
// estimated_input_tokens, never in the usage's input; a stream whose
// usage came records none. Before issue 19 its input was 0, unflagged.
//
// The requests' estimates, by hand (each word below is one token on
// o200k_base): chat "hello" is 3 (message) + 1 ("user") + 1 + 3 (reply)
// = 8; Responses "hello world" is 3 + 1 + 2 + 3 = 9.
func TestStreamWithoutUsageRecordsTheEstimatedInput(t *testing.T) {
	const (
		chatBody   = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		mistral    = `{"model":"mistral-large-latest","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		respBody   = `{"model":"gpt-5","stream":true,"input":"hello world"}`
		respDelta  = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}"
		respCreate = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}"
		respDone   = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1,\"total_tokens\":10}}}"
	)
	for _, tc := range []struct {
		name, path, body string
		up               step
		cut              bool
		usage            events.Usage
		estimated        int64
	}{
		{"chat cut before its usage", "/v1/chat/completions", chatBody,
			sse(true, chunk(""), chunk("a"), chunk("b")), true, events.Usage{OutputTokens: 2}, 8},
		{"chat ended without usage", "/v1/chat/completions", chatBody,
			sse(false, chunk("a"), "data: [DONE]"), false, events.Usage{OutputTokens: 1}, 8},
		{"chat with its usage", "/v1/chat/completions", chatBody,
			sse(false, chunk("a"), usageChunk, "data: [DONE]"), false, events.Usage{InputTokens: 300, OutputTokens: 2, CacheReadInputTokens: 100}, 0},
		{"responses cut before completed", "/v1/responses", respBody,
			sse(true, respCreate, respDelta), true, events.Usage{OutputTokens: 1}, 9},
		{"responses completed", "/v1/responses", respBody,
			sse(false, respCreate, respDelta, respDone), false, events.Usage{InputTokens: 9, OutputTokens: 1}, 0},
		{"the mistral preset cut before its usage", "/mistral/v1/chat/completions", mistral,
			sse(true, chunk("a"), chunk("b"), chunk("c")), true, events.Usage{OutputTokens: 3}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startScripted(t, tc.up)
			h := newHarness(t, up.srv.URL, func(c *Config) {
				reg := provider.Builtin()
				m, err := oai.Compatible("mistral", oai.Config{Preset: "mistral", Origin: up.srv.URL})
				require.NoError(t, err)
				require.NoError(t, reg.Add(m))
				c.Providers = reg
				c.Upstreams["mistral"] = up.srv.URL
			})
			resp := h.post(tc.path, tc.body, "Authorization", "Bearer k")
			_, err := read(resp)
			assert.Equal(t, tc.cut, err != nil, "the client's stream is cut: %v", err)
			evs := h.events()
			require.Len(t, evs, 1, "a stream that reached the client is not retried")
			assert.Equal(t, tc.usage, evs[0].Usage, "the estimate is never the usage's input")
			assert.Equal(t, tc.estimated, evs[0].EstimatedInputTokens)
		})
	}
}

// The tokenizer estimates run at most Limits.MaxEstimates at once (by
// default GOMAXPROCS): with every slot taken, a stream without usage is
// recorded without an estimate, at once, and the skip is counted and
// logged; a stream whose usage came needs no slot; once a slot is free
// the estimate is made again. Before, nothing bounded the estimates
// (each about 33 ms of CPU for a 256 KiB body).
func TestEstimatesAreCapped(t *testing.T) {
	const chatBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	t.Run("default and validation", func(t *testing.T) {
		h := newHarness(t, "http://127.0.0.1:1", nil)
		assert.Equal(t, runtime.GOMAXPROCS(0), cap(h.gw.estimates))
		_, err := New(Config{Retry: retry.Options{Sink: retry.NewMemorySink()}, Limits: Limits{MaxEstimates: -1}})
		require.ErrorContains(t, err, "Limits.MaxEstimates is -1")
	})
	t.Run("skipped at the cap", func(t *testing.T) {
		up := startScripted(t, sse(true, chunk("a"), chunk("b")), sse(false, chunk("a"), usageChunk, "data: [DONE]"), sse(true, chunk("a"), chunk("b")))
		h := newHarness(t, up.srv.URL, func(c *Config) { c.Limits.MaxEstimates = 2 })
		h.gw.estimates <- struct{}{} // two estimates running elsewhere
		h.gw.estimates <- struct{}{}
		skipped := func() uint64 { return h.gw.Stats().Refusals[ReasonEstimateSkipped] }

		_, err := read(h.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k"))
		require.Error(t, err, "the stream was cut")
		evs := h.events()
		require.Len(t, evs, 1)
		assert.Equal(t, events.Usage{OutputTokens: 2}, evs[0].Usage)
		assert.Zero(t, evs[0].EstimatedInputTokens, "skipped, not waited for")
		assert.Equal(t, uint64(1), skipped())
		assert.True(t, h.logs.Contains("Limits.MaxEstimates estimates are running"), "the skip is logged")

		_, err = read(h.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), skipped(), "a stream whose usage came needs no estimate")

		<-h.gw.estimates // one of them ends
		_, err = read(h.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k"))
		require.Error(t, err)
		evs = h.events()
		require.Len(t, evs, 3)
		assert.Equal(t, int64(8), evs[2].EstimatedInputTokens, "a free slot: estimated")
		assert.Equal(t, uint64(1), skipped())
		assert.Len(t, h.gw.estimates, 1, "the estimate gave its slot back")
	})
}
