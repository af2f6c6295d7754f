package telemetry_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/retry"
	"github.com/agentledger/ledger/internal/telemetry"
	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
	"github.com/agentledger/ledger/internal/testkit"
)

// otelEnv are the variables FromEnv and the SDK read; each test starts
// with all of them empty, whatever the machine's environment says.
var otelEnv = []string{
	"OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_TRACES_SAMPLER",
}

func setEnv(t *testing.T, kv map[string]string) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
	for k, v := range kv {
		t.Setenv(k, v)
	}
}

// call makes one call through a retry middleware with p's providers: a
// 500 that billed input, then a success.
func call(t *testing.T, p *telemetry.Providers) {
	t.Helper()
	m, err := retry.New(retry.Options{
		Sink: retry.NewMemorySink(), Clock: testkit.NewClockNow(), TracerProvider: p.TracerProvider, MeterProvider: p.MeterProvider,
		Classifier: retry.ClassifierFunc(func(error, time.Time) (retry.Classification, bool) {
			return retry.Classification{Kind: events.KindServer, Status: 500, Retryable: true}, true
		}),
	})
	require.NoError(t, err)
	_, err = retry.Do(context.Background(), m, retry.Call{SessionID: "sess-otlp", RequestID: "req-otlp", Provider: "gemini", Model: "gemini-2.5-flash"},
		func(_ context.Context, a retry.Attempt) (int, retry.Report, error) {
			if a.Number == 0 {
				return 0, retry.Report{Usage: events.Usage{InputTokens: 40}}, errors.New("upstream 500")
			}
			return 1, retry.Report{Usage: events.Usage{InputTokens: 40, OutputTokens: 8}}, nil
		})
	require.NoError(t, err)
}

// TestFromEnvExportsOTLP: the standard environment alone turns the
// export on, to a real OTLP/HTTP receiver, and Shutdown flushes the
// middleware's spans and histograms to it, under OTEL_SERVICE_NAME.
func TestFromEnvExportsOTLP(t *testing.T) {
	tests := []struct {
		name         string
		env          func(url string) map[string]string
		traces, mets bool
		paths        []string
	}{
		{"common endpoint", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u}
		}, true, true, []string{"/v1/traces", "/v1/metrics"}},
		{"signal endpoints", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/t/traces", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": u + "/m/metrics",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}
		}, true, true, []string{"/t/traces", "/m/metrics"}},
		{"traces only", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u + "/v1/traces"}
		}, true, false, []string{"/v1/traces"}},
		{"metrics exporter otlp, the other none", func(u string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": u, "OTEL_METRICS_EXPORTER": "otlp", "OTEL_TRACES_EXPORTER": "none"}
		}, false, true, []string{"/v1/metrics"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := telemetrytest.NewReceiver(t)
			env := tt.env(rcv.URL)
			env["OTEL_SERVICE_NAME"] = "otel-test"
			setEnv(t, env)
			p, err := telemetry.FromEnv(context.Background(), telemetry.Config{ServiceName: "ledger-gateway", Version: "v-test"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) }) // should the test stop early
			require.True(t, p.Enabled())
			require.Equal(t, tt.traces, p.TracerProvider != nil)
			require.Equal(t, tt.mets, p.MeterProvider != nil)
			call(t, p)
			require.NoError(t, p.Shutdown(context.Background()))
			// Shutdown has stopped them; the last may still be returning.
			var stacks string
			stopped := func() bool {
				stacks = goroutines()
				return !strings.Contains(stacks, "go.opentelemetry.io/otel/sdk")
			}
			if !assert.Eventually(t, stopped, 10*time.Second, 5*time.Millisecond) {
				t.Fatalf("Shutdown stops them; still running:\n%s", stacks)
			}
			require.ElementsMatch(t, tt.paths, rcv.Paths())

			spans := rcv.Spans()
			if !tt.traces {
				require.Empty(t, spans)
			} else {
				require.Len(t, spans, 3)
				byName := map[string]int{}
				for _, s := range spans {
					byName[s.Name]++
					require.Equal(t, "otel-test", s.Resource["service.name"], "OTEL_SERVICE_NAME wins")
					require.Equal(t, "v-test", s.Resource["service.version"])
					attrs := telemetrytest.StringAttrs(s.Attributes)
					require.Equal(t, "gcp.gemini", attrs["gen_ai.provider.name"])
					require.Equal(t, "sess-otlp", attrs["gen_ai.conversation.id"])
					require.Equal(t, "req-otlp", attrs["ledger.request_id"])
				}
				require.Equal(t, map[string]int{"chat gemini-2.5-flash": 1, "chat gemini-2.5-flash attempt": 2}, byName)
			}

			metrics, res := rcv.Metrics()
			if !tt.mets {
				require.Empty(t, metrics)
				return
			}
			require.Equal(t, "otel-test", res["service.name"])
			usage := metrics["gen_ai.client.token.usage"]
			require.NotNil(t, usage, "gen_ai.client.token.usage exported")
			require.Equal(t, "{token}", usage.Unit)
			var input float64
			for _, dp := range usage.GetHistogram().GetDataPoints() {
				if telemetrytest.StringAttrs(dp.Attributes)["gen_ai.token.type"] == "input" {
					input += dp.GetSum()
				}
			}
			require.Equal(t, 80.0, input, "both attempts' input: billed")
			dur := metrics["gen_ai.client.operation.duration"]
			require.NotNil(t, dur)
			require.Equal(t, "s", dur.Unit)
			require.Len(t, dur.GetHistogram().GetDataPoints(), 1)
		})
	}
}

// TestFromEnvOff: with no OTLP environment, or the SDK disabled, or both
// exporters none, nothing is built, nothing is exported (a receiver named
// by an endpoint gets nothing) and no goroutine is left.
func TestFromEnvOff(t *testing.T) {
	rcv := telemetrytest.NewReceiver(t)
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"unset", nil},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}},
		{"exporters none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}},
		{"headers alone", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-key=secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env)
			before := runtime.NumGoroutine()
			p, err := telemetry.FromEnv(context.Background(), telemetry.Config{ServiceName: "ledger-gateway"})
			require.NoError(t, err)
			require.False(t, p.Enabled())
			require.Nil(t, p.TracerProvider)
			require.Nil(t, p.MeterProvider)
			call(t, p)
			require.NoError(t, p.Shutdown(context.Background()))
			require.NotContains(t, goroutines(), "go.opentelemetry.io/otel/sdk", "an SDK goroutine was started")
			require.LessOrEqual(t, runtime.NumGoroutine(), before, "a goroutine was started")
			require.Empty(t, rcv.Paths())
		})
	}
}

// TestFromEnvRefuses: an exporter or a protocol the ledger does not have
// is an *EnvError naming the variable, not a silent export elsewhere.
func TestFromEnvRefuses(t *testing.T) {
	tests := []struct {
		env map[string]string
		v   string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"},
		{map[string]string{"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED"},
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			setEnv(t, tt.env)
			_, err := telemetry.FromEnv(context.Background(), telemetry.Config{ServiceName: "ledger-gateway"})
			var ee *telemetry.EnvError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tt.v, ee.Var)
			require.Contains(t, err.Error(), tt.v)
		})
	}
}

// goroutines is the stacks of every goroutine.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
