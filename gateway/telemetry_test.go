package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/gateway"
	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
	"github.com/agentledger/ledger/ledgertest"
)

// WithTracerProvider and WithMeterProvider: a call through the gateway to
// ledgertest's fake OpenAI, whose first attempt fails, is a call span
// over two attempt spans, and its tokens and duration reach the meter
// provider given.
func TestTelemetryOptions(t *testing.T) {
	l := ledgertest.Start(t, ledgertest.WithoutAggregator())
	up := ledgertest.FakeOpenAI(t, ledgertest.ServerError(), ledgertest.Succeed(ledger.Usage{InputTokens: 300, OutputTokens: 40}))
	k := telemetrytest.New(t)
	gw := ledgertest.StartGateway(t, l, ledgertest.GatewayUpstream(up),
		gateway.WithRetryPolicy(ledger.Policy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}),
		gateway.WithTracerProvider(k.TracerProvider), gateway.WithMeterProvider(k.MeterProvider))

	req, err := http.NewRequest(http.MethodPost, gw.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer test")
	req.Header.Set("X-Ledger-Session-Id", "sess-gw-otel")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	calls := k.Named("chat gpt-4.1-mini")
	require.Len(t, calls, 1)
	attrs := telemetrytest.Attrs(calls[0])
	assert.Equal(t, "sess-gw-otel", attrs["gen_ai.conversation.id"].AsString())
	assert.Equal(t, resp.Header.Get("X-Ledger-Request-Id"), attrs["ledger.request_id"].AsString())
	assert.Equal(t, int64(2), attrs["ledger.attempts"].AsInt64())
	assert.Equal(t, int64(40), attrs["gen_ai.usage.output_tokens"].AsInt64())
	assert.Len(t, k.Named("chat gpt-4.1-mini attempt"), 2)
	out := telemetrytest.Select(k.Histogram(t, "gen_ai.client.token.usage"), attribute.String("gen_ai.token.type", "output"))
	var sum float64
	for _, p := range out {
		sum += p.Sum
	}
	assert.Equal(t, 40.0, sum)
	assert.Len(t, k.Histogram(t, "gen_ai.client.operation.duration"), 1)
}
