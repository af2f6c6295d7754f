package retry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger/internal/breaker"
	"github.com/agentledger/ledger/internal/events"
)

// instantClock is the real clock without the waits, for benchmarks of the
// retry path.
type instantClock struct{}

func (instantClock) Now() time.Time                             { return time.Now() }
func (instantClock) Monotonic() time.Duration                   { return SystemClock.Monotonic() }
func (instantClock) Sleep(context.Context, time.Duration) error { return nil }

func benchMiddleware(b *testing.B, mod func(*Options)) (*Middleware, *MemorySink) {
	b.Helper()
	sink := NewMemorySink()
	opts := Options{Classifier: Chain{sdkClassifier}, Sink: sink}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	return m, sink
}

var benchUsage = Report{Usage: events.Usage{InputTokens: 1200, OutputTokens: 300}, ProviderRequestID: "req_bench"}

func noopFn(context.Context, Attempt) (int, Report, error) { return 1, benchUsage, nil }

// runDo runs b.N calls, emptying the sink now and then so that memory stays
// flat; the sink keeps its buffer, so appends do not allocate.
func runDo(b *testing.B, ctx context.Context, m *Middleware, sink *MemorySink, fn func(context.Context, Attempt) (int, Report, error)) {
	b.Helper()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Do(ctx, m, testCall, fn); err != nil {
			b.Fatal(err)
		}
		if i++; i&1023 == 0 {
			sink.Reset()
		}
	}
}

// BenchmarkDo is the middleware's overhead for a call that succeeds at the
// first attempt: validation, a generated request_id and event_id, the
// breaker, the clock, and one event into a MemorySink.
func BenchmarkDo(b *testing.B) {
	b.Run("background", func(b *testing.B) {
		m, sink := benchMiddleware(b, nil)
		runDo(b, context.Background(), m, sink, noopFn)
	})
	b.Run("cancelable_ctx", func(b *testing.B) {
		m, sink := benchMiddleware(b, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runDo(b, ctx, m, sink, noopFn)
	})
	b.Run("caller_request_id", func(b *testing.B) {
		m, sink := benchMiddleware(b, nil)
		call := testCall
		call.RequestID = "req-from-caller-0001"
		call.Upstream = "anthropic/claude-test"
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := Do(context.Background(), m, call, noopFn); err != nil {
				b.Fatal(err)
			}
			if i++; i&1023 == 0 {
				sink.Reset()
			}
		}
	})
	b.Run("attempt_timeout", func(b *testing.B) {
		m, sink := benchMiddleware(b, func(o *Options) { o.Policy = DefaultPolicy(); o.Policy.AttemptTimeout = time.Minute })
		runDo(b, context.Background(), m, sink, noopFn)
	})
	b.Run("parallel", func(b *testing.B) {
		m, sink := benchMiddleware(b, nil)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := Do(context.Background(), m, testCall, noopFn); err != nil {
					b.Error(err)
					return
				}
				if i++; i&1023 == 0 {
					sink.Reset()
				}
			}
		})
	})
}

// BenchmarkDoRetry is a call whose first attempt fails with a retryable
// provider error and whose second succeeds, on a clock that does not wait:
// classification, the backoff, two events. ns/attempt and allocs/attempt
// halve the per-call figures.
func BenchmarkDoRetry(b *testing.B) {
	m, sink := benchMiddleware(b, func(o *Options) {
		o.Clock = instantClock{}
		o.Breakers = mustBenchGroup(b)
	})
	failure := statusErr(503, 0)
	fn := func(_ context.Context, a Attempt) (int, Report, error) {
		if a.Number == 0 {
			return 0, benchUsage, failure
		}
		return 1, benchUsage, nil
	}
	runDo(b, context.Background(), m, sink, fn)
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/2, "ns/attempt")
}

// BenchmarkDoRetryTelemetry is BenchmarkDoRetry with the OpenTelemetry
// instrumentation on: global_noop with otel's global providers as a
// program that never set them has them (the public middleware's
// default), sdk with the SDK's providers recording every span (dropped
// at its end: no exporter) and aggregating both histograms. The
// off case is BenchmarkDoRetry.
func BenchmarkDoRetryTelemetry(b *testing.B) {
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
		mp   metric.MeterProvider
	}{
		{"global_noop", otel.GetTracerProvider(), otel.GetMeterProvider()},
		{"sdk", sdktrace.NewTracerProvider(), sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, sink := benchMiddleware(b, func(o *Options) {
				o.Clock = instantClock{}
				o.Breakers = mustBenchGroup(b)
				o.TracerProvider, o.MeterProvider = bc.tp, bc.mp
			})
			failure := statusErr(503, 0)
			runDo(b, context.Background(), m, sink, func(_ context.Context, a Attempt) (int, Report, error) {
				if a.Number == 0 {
					return 0, benchUsage, failure
				}
				return 1, benchUsage, nil
			})
		})
	}
}

// mustBenchGroup is a breaker group that never opens: the benchmark fails
// every other attempt.
func mustBenchGroup(b *testing.B) *breaker.Group {
	b.Helper()
	g, err := breaker.NewGroup(breaker.Config{FailureThreshold: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// TestDoAllocations pins the allocation budget of the hot path (the
// target is under 15 per attempt) so that a regression fails the tests,
// not only the benchmark report.
func TestDoAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counting")
	}
	sink := NewMemorySink()
	m, err := New(Options{Sink: sink, Classifier: Chain{sdkClassifier}, Clock: instantClock{}, Breakers: mustGroup(t, breaker.Config{FailureThreshold: 1 << 30})})
	if err != nil {
		t.Fatal(err)
	}
	failure := statusErr(503, 0)
	tests := []struct {
		name  string
		fn    func(context.Context, Attempt) (int, Report, error)
		limit float64
	}{
		// Each attempt's context takes 7 of them: the attemptCtx with its
		// HTTP trace (the struct, the trace's value and its two hooks) and
		// its timeouts (the cancelable context, the timer and its func).
		{"success", noopFn, 10},
		{"retry then success", func(_ context.Context, a Attempt) (int, Report, error) {
			if a.Number == 0 {
				return 0, benchUsage, failure
			}
			return 1, benchUsage, nil
		}, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			allocs := testing.AllocsPerRun(500, func() {
				if _, err := Do(context.Background(), m, testCall, tt.fn); err != nil {
					t.Fatal(err)
				}
				if i++; i&63 == 0 {
					sink.Reset()
				}
			})
			if allocs > tt.limit {
				t.Errorf("%v allocations per call, want at most %v", allocs, tt.limit)
			}
			t.Logf("%v allocations per call", allocs)
		})
	}
}
