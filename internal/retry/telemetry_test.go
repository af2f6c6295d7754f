package retry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
	"github.com/agentledger/ledger/internal/telemetry/telemetrytest"
)

func withKit(k *telemetrytest.Kit) func(*Options) {
	return func(o *Options) { o.TracerProvider, o.MeterProvider = k.TracerProvider, k.MeterProvider }
}

// TestTelemetryRetriedCall: a call whose first attempt fails with a 500
// that billed input, and whose second succeeds, is one call span with two
// attempt spans under it, carrying the GenAI and the ledger's attributes,
// with the fake clock's times; the token histogram has every attempt's
// tokens, the duration histogram the call's.
func TestTelemetryRetriedCall(t *testing.T) {
	k := telemetrytest.New(t)
	h := newHarness(t, withKit(k))
	s := &scripted{clock: h.clock, steps: []step{
		{err: statusErr(500, 0), report: Report{Usage: events.Usage{InputTokens: 100}}, advance: 2 * time.Second},
		{report: Report{Usage: events.Usage{InputTokens: 120, OutputTokens: 30}, ProviderRequestID: "req_up_2"}, advance: 3 * time.Second},
	}}
	call := testCall
	call.RequestID = "req-otel-1"
	call.Labels = api.Labels{"team": "search"}
	_, err := Do(WithOperation(context.Background(), "chat"), h.m, call, s.fn)
	require.NoError(t, err)
	wait := h.clock.Sleeps()[0]

	calls := k.Named("chat claude-test")
	require.Len(t, calls, 1)
	cs := calls[0]
	attempts := k.Named("chat claude-test attempt")
	require.Len(t, attempts, 2)
	for i, a := range attempts {
		require.Equal(t, cs.SpanContext().TraceID(), a.SpanContext().TraceID(), "attempt %d", i)
		require.Equal(t, cs.SpanContext().SpanID(), a.Parent().SpanID(), "attempt %d is not under the call", i)
	}
	require.Equal(t, "client", cs.SpanKind().String())

	common := map[string]any{
		"gen_ai.operation.name":  "chat",
		"gen_ai.provider.name":   "anthropic",
		"gen_ai.request.model":   "claude-test",
		"gen_ai.conversation.id": "sess-1",
		"ledger.request_id":      "req-otel-1",
	}
	requireAttrs(t, cs, common)
	requireAttrs(t, cs, map[string]any{
		"ledger.outcome": "success", "ledger.attempts": int64(2), "ledger.label.team": "search",
		"gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(30),
		"ledger.billed.input_tokens": int64(220), "ledger.billed.output_tokens": int64(30),
	})
	require.NotContains(t, telemetrytest.Attrs(cs), "gen_ai.system", "the old attribute")
	require.Equal(t, codes.Unset, cs.Status().Code)
	require.Equal(t, 5*time.Second+wait, cs.EndTime().Sub(cs.StartTime()), "the call's span on the fake clock")

	a0, a1 := attempts[0], attempts[1]
	requireAttrs(t, a0, common)
	requireAttrs(t, a0, map[string]any{
		"ledger.attempt": int64(0), "ledger.outcome": "error", "error.type": "server",
		"ledger.retryable": true, "ledger.retry_reason": "server", "ledger.retry_delay": wait.Seconds(),
		"http.response.status_code": int64(500), "gen_ai.usage.input_tokens": int64(100),
	})
	require.Equal(t, codes.Error, a0.Status().Code)
	require.Equal(t, "server (500)", a0.Status().Description)
	require.Equal(t, 2*time.Second, a0.EndTime().Sub(a0.StartTime()))
	requireAttrs(t, a1, map[string]any{
		"ledger.attempt": int64(1), "ledger.outcome": "success", "ledger.provider_request_id": "req_up_2",
		"gen_ai.usage.input_tokens": int64(120), "gen_ai.usage.output_tokens": int64(30),
	})
	require.NotContains(t, telemetrytest.Attrs(a1), "error.type")
	require.Equal(t, 3*time.Second, a1.EndTime().Sub(a1.StartTime()))
	require.False(t, a1.StartTime().Before(a0.EndTime().Add(wait)), "the second attempt starts after the wait")
	evs := h.sink.Events()
	require.Equal(t, evs[0].EventID, telemetrytest.Attrs(a0)["ledger.event_id"].AsString())
	require.Equal(t, evs[1].EventID, telemetrytest.Attrs(a1)["ledger.event_id"].AsString())

	tokens := k.Histogram(t, "gen_ai.client.token.usage")
	in := telemetrytest.Select(tokens, attribute.String("gen_ai.token.type", "input"))
	require.Len(t, in, 2, "a point for the failed attempt (error.type) and one for the success")
	ok := telemetrytest.Select(in, attribute.String("gen_ai.provider.name", "anthropic"), attribute.String("gen_ai.request.model", "claude-test"))
	require.Len(t, ok, 2)
	failed := telemetrytest.Select(in, attribute.String("error.type", "server"))
	require.Len(t, failed, 1)
	require.Equal(t, uint64(1), failed[0].Count)
	require.Equal(t, 100.0, failed[0].Sum)
	var sum float64
	for _, p := range in {
		sum += p.Sum
	}
	require.Equal(t, 220.0, sum, "every billed input token")
	require.Equal(t, TokenBuckets, in[0].Bounds, "the conventions' buckets")
	out := telemetrytest.Select(tokens, attribute.String("gen_ai.token.type", "output"))
	sum = 0
	for _, p := range out {
		sum += p.Sum
	}
	require.Equal(t, 30.0, sum)

	dur := k.Histogram(t, "gen_ai.client.operation.duration")
	require.Len(t, dur, 1)
	require.Equal(t, uint64(1), dur[0].Count)
	require.InDelta(t, (5*time.Second + wait).Seconds(), dur[0].Sum, 1e-9)
	require.Equal(t, DurationBuckets, dur[0].Bounds)
	_, hasErr := dur[0].Attrs.Value("error.type")
	require.False(t, hasErr, "a successful call has no error.type")
	op, _ := dur[0].Attrs.Value("gen_ai.operation.name")
	require.Equal(t, "chat", op.AsString())
}

// TestTelemetryFailedCalls: a call that fails carries error.type on its
// span and its duration, with the reason it stopped; an attempt the
// breaker did not admit still gets its span, as it gets its event.
func TestTelemetryFailedCalls(t *testing.T) {
	tests := []struct {
		name      string
		mod       func(*Options)
		steps     []step
		spans     int
		errorType string
		stop      StopReason
	}{
		{"not retryable", nil, []step{{err: statusErr(400, 0), advance: time.Second}}, 1, "client", StopNonRetryable},
		{"retries exhausted", func(o *Options) { o.Policy.MaxRetries = 1 }, []step{{err: statusErr(500, 0), advance: time.Second}}, 2, "server", StopExhausted},
		{"circuit open", func(o *Options) {
			g, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1, Cooldown: time.Hour})
			require.NoError(t, err)
			b := g.Get("anthropic/claude-test")
			p, err := b.Allow()
			require.NoError(t, err)
			b.Done(p, breaker.Failure)
			o.Breakers = g
		}, []step{{}}, 1, "circuit_open", StopCircuitOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := telemetrytest.New(t)
			h := newHarness(t, func(o *Options) {
				withKit(k)(o)
				if tt.mod != nil {
					tt.mod(o)
				}
			})
			s := &scripted{clock: h.clock, steps: tt.steps}
			_, err := Do(WithOperation(context.Background(), "embeddings"), h.m, testCall, s.fn)
			require.Error(t, err)
			cs := k.Named("embeddings claude-test")
			require.Len(t, cs, 1)
			requireAttrs(t, cs[0], map[string]any{"error.type": tt.errorType, "ledger.stop_reason": string(tt.stop), "ledger.outcome": "error"})
			require.Equal(t, codes.Error, cs[0].Status().Code)
			as := k.Named("embeddings claude-test attempt")
			require.Len(t, as, tt.spans)
			requireAttrs(t, as[len(as)-1], map[string]any{"error.type": tt.errorType, "ledger.stop_reason": string(tt.stop)})
			dur := k.Histogram(t, "gen_ai.client.operation.duration")
			require.Len(t, dur, 1)
			et, ok := dur[0].Attrs.Value("error.type")
			require.True(t, ok)
			require.Equal(t, tt.errorType, et.AsString())
		})
	}
}

// TestTelemetryOffIsNil: without providers the middleware holds no
// instruments, so the calls' only cost is a nil check.
func TestTelemetryOffIsNil(t *testing.T) {
	h := newHarness(t, nil)
	require.Nil(t, h.m.tel)
}

func requireAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	got := telemetrytest.Attrs(s)
	for k, v := range want {
		g, ok := got[k]
		require.True(t, ok, "span %q has no %s", s.Name(), k)
		require.Equal(t, v, g.AsInterface(), "span %q: %s", s.Name(), k)
	}
}

// TestTelemetryMetricsOnly: a meter provider without a tracer provider
// records the histograms and starts no span.
func TestTelemetryMetricsOnly(t *testing.T) {
	k := telemetrytest.New(t)
	h := newHarness(t, func(o *Options) { o.MeterProvider = k.MeterProvider })
	s := &scripted{clock: h.clock, steps: []step{{err: statusErr(500, 0), advance: time.Second}, {report: Report{Usage: events.Usage{InputTokens: 5, OutputTokens: 2}}, advance: time.Second}}}
	_, err := Do(context.Background(), h.m, testCall, s.fn)
	require.NoError(t, err)
	require.Empty(t, k.Spans())
	dur := k.Histogram(t, "gen_ai.client.operation.duration")
	require.Len(t, dur, 1)
	require.InDelta(t, (2*time.Second + h.clock.Sleeps()[0]).Seconds(), dur[0].Sum, 1e-9)
	require.Len(t, telemetrytest.Select(k.Histogram(t, "gen_ai.client.token.usage"), attribute.String("gen_ai.token.type", "output")), 1)
}
