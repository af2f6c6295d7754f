package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Kit holds the providers of a test and what they recorded.
type Kit struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	spans          *tracetest.SpanRecorder
	reader         *sdkmetric.ManualReader
}

// New returns a Kit that samples every span; the test's cleanup shuts
// its providers down.
func New(t testing.TB) *Kit {
	t.Helper()
	k := &Kit{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	k.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(k.spans))
	k.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	t.Cleanup(func() {
		_ = k.TracerProvider.Shutdown(context.Background())
		_ = k.MeterProvider.Shutdown(context.Background())
	})
	return k
}

// Spans returns the spans ended so far, in the order they ended.
func (k *Kit) Spans() []sdktrace.ReadOnlySpan { return k.spans.Ended() }

// Named returns the ended spans called name.
func (k *Kit) Named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range k.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attrs returns the attributes of s by key.
func Attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := make(map[string]attribute.Value)
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// Collect reads the meter provider's metrics now.
func (k *Kit) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return rm
}

// Point is a histogram's data point, whatever its number type.
type Point struct {
	Attrs        attribute.Set
	Count        uint64
	Sum          float64
	Bounds       []float64
	BucketCounts []uint64
}

// Histogram returns the points of the histogram called name, or nil when
// the provider has none.
func (k *Kit) Histogram(t testing.TB, name string) []Point {
	t.Helper()
	return HistogramPoints(k.Collect(t), name)
}

// HistogramPoints returns the points of the histogram called name in rm.
func HistogramPoints(rm metricdata.ResourceMetrics, name string) []Point {
	var out []Point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Attrs: p.Attributes, Count: p.Count, Sum: float64(p.Sum), Bounds: p.Bounds, BucketCounts: p.BucketCounts})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, Point{Attrs: p.Attributes, Count: p.Count, Sum: p.Sum, Bounds: p.Bounds, BucketCounts: p.BucketCounts})
				}
			}
		}
	}
	return out
}

// Select returns the points that carry every attribute of want.
func Select(points []Point, want ...attribute.KeyValue) []Point {
	var out []Point
next:
	for _, p := range points {
		for _, kv := range want {
			if v, ok := p.Attrs.Value(kv.Key); !ok || v != kv.Value {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}
