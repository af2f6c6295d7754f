package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/natstest"
	"github.com/agentledger/ledger/internal/sim/fakeprovider"
	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
)

// The command exports its calls' GenAI spans and histograms over OTLP/HTTP
// when the standard environment names an endpoint, and flushes them when
// it stops: a real receiver has them once the command has exited.
func TestRunExportsOTLP(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	clearOTelEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	srv, _, _ := natstest.StartJS(t)
	fp := startFakeProvider(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := startCommand(t, ctx, "run", "--nats-url", srv.URL(), "--listen", "127.0.0.1:0", "--create-stream",
		"--anthropic-url", fp.URL(), "--forward-ledger-headers", "--retry-base-delay", "1ms")
	resp := callMessages(t, addr, "X-Api-Key", "k", "X-Ledger-Session-Id", "sess-otlp")
	require.Equal(t, 200, resp.StatusCode)
	reqID := resp.Header.Get("X-Ledger-Request-Id")
	stopCommand(t, cancel, done, errb)

	var calls int
	for _, s := range rcv.Spans() {
		assert.Equal(t, serviceName, s.Resource["service.name"])
		attrs := telemetrytest.StringAttrs(s.Attributes)
		assert.Equal(t, "sess-otlp", attrs["gen_ai.conversation.id"], s.Name)
		assert.Equal(t, reqID, attrs["ledger.request_id"], s.Name)
		if s.Name == "chat claude-x" {
			calls++
			assert.Equal(t, "anthropic", attrs["gen_ai.provider.name"])
		}
	}
	assert.Equal(t, 1, calls, "the call's span, flushed at the stop")
	metrics, _ := rcv.Metrics()
	assert.Contains(t, metrics, "gen_ai.client.token.usage")
	assert.Contains(t, metrics, "gen_ai.client.operation.duration")
}

// startFakeProvider starts a fake provider without faults (seed 1); the
// test's cleanup closes it.
func startFakeProvider(t *testing.T) *fakeprovider.Server {
	t.Helper()
	fp, err := fakeprovider.Listen("127.0.0.1:0", fakeprovider.Options{Seed: 1})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	return fp
}

// clearOTelEnv empties the OpenTelemetry environment for the test,
// whatever the machine's says.
func clearOTelEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		t.Setenv(k, "")
	}
}

// An OpenTelemetry environment the command cannot follow (OTLP over
// gRPC, another exporter) is a usage error naming the variable, before
// the command connects anywhere.
func TestRunRefusesAnOTelEnvironmentItCannotFollow(t *testing.T) {
	for v, val := range map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_EXPORTER": "zipkin"} {
		t.Run(v, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
			t.Setenv(v, val)
			assertRefused(t, []string{"run", "--nats-url", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0"}, v)
		})
	}
}
