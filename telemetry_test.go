package ledger_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentledger/ledger"
	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
)

// The middleware's spans go to the tracer provider given (here the SDK's,
// with an in-memory exporter; in production one exporting over OTLP): a
// span per call and one per attempt.
func ExampleWithTracerProvider() {
	srv := startServer()
	defer srv.Shutdown()
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	mw, closePub := busyMiddleware(ctx, srv, ledger.WithTracerProvider(tp)) // Example's wiring
	defer closePub()

	call := ledger.Call{SessionID: "sess-1", Provider: "anthropic", Model: "claude-sonnet-4-5"}
	_, err := ledger.Do(ctx, mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		if a.Number == 0 {
			return "", ledger.Report{}, errBusy
		}
		return "hello", ledger.Report{Usage: ledger.Usage{InputTokens: 500, OutputTokens: 12}}, nil
	})
	fmt.Println(err)
	for _, s := range spans.GetSpans() {
		attrs := attribute.NewSet(s.Attributes...)
		attempt, _ := attrs.Value("ledger.attempt")
		outcome, _ := attrs.Value("ledger.outcome")
		provider, _ := attrs.Value("gen_ai.provider.name")
		fmt.Printf("%s: %s %s attempt=%s\n", s.Name, provider.Emit(), outcome.Emit(), attempt.Emit())
	}
	// Output:
	// <nil>
	// chat claude-sonnet-4-5 attempt: anthropic error attempt=0
	// chat claude-sonnet-4-5 attempt: anthropic success attempt=1
	// chat claude-sonnet-4-5: anthropic success attempt=
}

// TestMiddlewareTelemetry: through the public API, a call retried once is
// a call span over two attempt spans that carry the session, the request
// ID, the labels and the operation WithOperation named, and the token and
// duration histograms reach the meter provider given.
func TestMiddlewareTelemetry(t *testing.T) {
	ctx := t.Context()
	pub := testPublisher(t)
	k := telemetrytest.New(t)
	mw, err := ledger.NewMiddleware(pub, ledger.WithTracerProvider(k.TracerProvider), ledger.WithMeterProvider(k.MeterProvider),
		ledger.WithPolicy(ledger.Policy{MaxRetries: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, HintCap: time.Second}),
		ledger.WithClassifiers(ledger.ClassifierFunc(func(err error, now time.Time) (ledger.Classification, bool) {
			return ledger.Classification{Kind: ledger.KindOverloaded, Status: 529, Retryable: true}, true
		})))
	require.NoError(t, err)

	call := ledger.Call{SessionID: "sess-otel", RequestID: "req-otel", Provider: "gemini", Model: "gemini-2.5-pro", Labels: map[string]string{"team": "search"}}
	_, err = ledger.Do(ledger.WithOperation(ctx, "generate_content"), mw, call, func(ctx context.Context, a ledger.Attempt) (string, ledger.Report, error) {
		if a.Number == 0 {
			return "", ledger.Report{Usage: ledger.Usage{InputTokens: 7}}, errBusy
		}
		return "hi", ledger.Report{Usage: ledger.Usage{InputTokens: 7, OutputTokens: 3}}, nil
	})
	require.NoError(t, err)

	callSpans := k.Named("generate_content gemini-2.5-pro")
	require.Len(t, callSpans, 1)
	attempts := k.Named("generate_content gemini-2.5-pro attempt")
	require.Len(t, attempts, 2)
	var numbers []int64
	for _, a := range attempts {
		require.Equal(t, callSpans[0].SpanContext().SpanID(), a.Parent().SpanID())
		attrs := telemetrytest.Attrs(a)
		numbers = append(numbers, attrs["ledger.attempt"].AsInt64())
		require.Equal(t, "sess-otel", attrs["gen_ai.conversation.id"].AsString())
		require.Equal(t, "req-otel", attrs["ledger.request_id"].AsString())
		require.Equal(t, "gcp.gemini", attrs["gen_ai.provider.name"].AsString())
		require.Equal(t, "generate_content", attrs["gen_ai.operation.name"].AsString())
	}
	sort.Slice(numbers, func(i, j int) bool { return numbers[i] < numbers[j] })
	require.Equal(t, []int64{0, 1}, numbers)
	ca := telemetrytest.Attrs(callSpans[0])
	require.Equal(t, "search", ca["ledger.label.team"].AsString())
	require.Equal(t, int64(14), ca["ledger.billed.input_tokens"].AsInt64())
	require.Equal(t, int64(7), ca["gen_ai.usage.input_tokens"].AsInt64())

	tokens := k.Histogram(t, "gen_ai.client.token.usage")
	var input float64
	for _, p := range telemetrytest.Select(tokens, attribute.String("gen_ai.token.type", "input")) {
		input += p.Sum
	}
	require.Equal(t, 14.0, input)
	require.Len(t, k.Histogram(t, "gen_ai.client.operation.duration"), 1)
	require.Equal(t, "https://opentelemetry.io/schemas/"+ledger.SemconvVersion, semconv.SchemaURL, "the version the docs name")
}

// TestMiddlewareUsesTheGlobalProviders: without the options the
// middleware records through otel's global providers, once the program
// sets them (here after NewMiddleware: the global provider delegates);
// a no-op provider turns it off.
func TestMiddlewareUsesTheGlobalProviders(t *testing.T) {
	pub := testPublisher(t)
	mw, err := ledger.NewMiddleware(pub, ledger.WithClassifiers(ledger.ClassifierFunc(func(error, time.Time) (ledger.Classification, bool) {
		return ledger.Classification{}, false
	})))
	require.NoError(t, err)
	k := telemetrytest.New(t)
	otel.SetTracerProvider(k.TracerProvider)
	otel.SetMeterProvider(k.MeterProvider)
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})
	call := ledger.Call{SessionID: "sess-global", Provider: "openai", Model: "gpt-4.1"}
	ok := func(context.Context, ledger.Attempt) (int, ledger.Report, error) {
		return 1, ledger.Report{Usage: ledger.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}
	_, err = ledger.Do(t.Context(), mw, call, ok)
	require.NoError(t, err)
	require.Len(t, k.Named("chat gpt-4.1"), 1)
	require.Len(t, k.Histogram(t, "gen_ai.client.operation.duration"), 1)

	off, err := ledger.NewMiddleware(pub, ledger.WithTracerProvider(tracenoop.NewTracerProvider()), ledger.WithClassifiers(ledger.ClassifierFunc(func(error, time.Time) (ledger.Classification, bool) {
		return ledger.Classification{}, false
	})))
	require.NoError(t, err)
	_, err = ledger.Do(t.Context(), off, call, ok)
	require.NoError(t, err)
	require.Len(t, k.Named("chat gpt-4.1"), 1, "no span through the no-op provider")
}
