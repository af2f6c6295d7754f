package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
)

// TestTelemetry: a call through the gateway to a fake upstream that
// fails once and then answers is a call span named after the route's
// operation and the model, over two attempt spans, with the session, the
// request ID the client got, the provider's conventional name, the usage;
// it joins the client's trace (traceparent); the histograms count both
// attempts' tokens and the call's duration.
func TestTelemetry(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, path, body string
		header           []string
		span, provider   string
		input            float64 // the success's input tokens (the 500 billed none)
	}{
		{"anthropic messages", "/v1/messages", anthropicBody, []string{"X-Api-Key", "k"},
			"chat claude-test", "anthropic", 100},
		{"gemini generate", "/v1beta/models/gemini-test:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, []string{"X-Goog-Api-Key", "k"},
			"generate_content gemini-test", "gcp.gemini", 3},
		{"openai embeddings", "/v1/embeddings", `{"model":"emb-test","input":"x"}`, []string{"Authorization", "Bearer k"},
			"embeddings emb-test", "openai", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := anthropicOK
			if tt.provider != "anthropic" {
				ok = usageOfAll
			}
			up := startScripted(t, reply(500, overloaded), reply(200, ok))
			k := telemetrytest.New(t)
			h := newHarness(t, up.srv.URL, func(c *Config) {
				c.Retry.TracerProvider, c.Retry.MeterProvider = k.TracerProvider, k.MeterProvider
			})
			resp := h.post(tt.path, tt.body, append(tt.header, HeaderSessionID, "sess-otel", "traceparent", parent)...)
			_, err := read(resp)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			reqID := resp.Header.Get(HeaderRequestID)

			calls := k.Named(tt.span)
			require.Len(t, calls, 1)
			cs := calls[0]
			assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", cs.SpanContext().TraceID().String(), "the client's trace")
			assert.Equal(t, "00f067aa0ba902b7", cs.Parent().SpanID().String())
			assert.Equal(t, trace.SpanKindClient, cs.SpanKind())
			attempts := k.Named(tt.span + " attempt")
			require.Len(t, attempts, 2)
			for i, a := range append(attempts, cs) {
				attrs := telemetrytest.Attrs(a)
				assert.Equal(t, tt.provider, attrs["gen_ai.provider.name"].AsString(), "span %d", i)
				assert.Equal(t, "sess-otel", attrs["gen_ai.conversation.id"].AsString(), "span %d", i)
				assert.Equal(t, reqID, attrs["ledger.request_id"].AsString(), "span %d", i)
				if i < 2 {
					assert.Equal(t, cs.SpanContext().SpanID(), a.Parent().SpanID(), "attempt %d under the call", i)
					assert.Equal(t, int64(i), attrs["ledger.attempt"].AsInt64())
				}
			}
			a0 := telemetrytest.Attrs(attempts[0])
			assert.Equal(t, "server", a0["error.type"].AsString())
			assert.Equal(t, "server", a0["ledger.retry_reason"].AsString())
			assert.Equal(t, "success", telemetrytest.Attrs(cs)["ledger.outcome"].AsString())

			in := telemetrytest.Select(k.Histogram(t, "gen_ai.client.token.usage"), attribute.String("gen_ai.token.type", "input"))
			var sum float64
			for _, p := range in {
				sum += p.Sum
			}
			assert.Equal(t, tt.input, sum)
			dur := k.Histogram(t, "gen_ai.client.operation.duration")
			require.Len(t, dur, 1)
			assert.Equal(t, uint64(1), dur[0].Count)
		})
	}
}

// TestTelemetryOffLeavesTheContext: without providers the gateway adds
// nothing to a call's context.
func TestTelemetryOffLeavesTheContext(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1", nil)
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := r.Context()
	assert.Equal(t, ctx, h.gw.telemetryContext(ctx, r, "chat"))
}
