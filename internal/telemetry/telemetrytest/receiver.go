package telemetrytest

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	collmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP collector for tests: it decodes the protobuf
// ExportTraceServiceRequest and ExportMetricsServiceRequest posted to
// it (at a path ending in "traces" or "metrics", /v1/traces and
// /v1/metrics by default) and keeps them. The test's cleanup closes it.
type Receiver struct {
	URL string

	mu      sync.Mutex
	traces  []*colltracepb.ExportTraceServiceRequest
	metrics []*collmetricpb.ExportMetricsServiceRequest
	paths   []string
}

// NewReceiver starts a Receiver on a loopback port.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a POST of application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, 16<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in, out proto.Message
	switch {
	case strings.HasSuffix(req.URL.Path, "traces"):
		in, out = &colltracepb.ExportTraceServiceRequest{}, &colltracepb.ExportTraceServiceResponse{}
	case strings.HasSuffix(req.URL.Path, "metrics"):
		in, out = &collmetricpb.ExportMetricsServiceRequest{}, &collmetricpb.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, req)
		return
	}
	if err := proto.Unmarshal(data, in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	switch m := in.(type) {
	case *colltracepb.ExportTraceServiceRequest:
		r.traces = append(r.traces, m)
	case *collmetricpb.ExportMetricsServiceRequest:
		r.metrics = append(r.metrics, m)
	}
	r.mu.Unlock()
	resp, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// Paths returns the paths of the requests received, in order.
func (r *Receiver) Paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// Span is a span received, with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// Spans returns every span received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, req := range r.traces {
		for _, rs := range req.ResourceSpans {
			res := stringAttrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, Span{Span: s, Resource: res})
				}
			}
		}
	}
	return out
}

// Metrics returns every metric received, by name (the last received of
// each name), with its resource's attributes.
func (r *Receiver) Metrics() (map[string]*metricpb.Metric, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*metricpb.Metric)
	var res map[string]string
	for _, req := range r.metrics {
		for _, rm := range req.ResourceMetrics {
			res = stringAttrs(rm.GetResource().GetAttributes())
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					out[m.Name] = m
				}
			}
		}
	}
	return out, res
}

// StringAttrs returns the attributes of kvs by key as text.
func StringAttrs(kvs []*commonpb.KeyValue) map[string]string { return stringAttrs(kvs) }

func stringAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = strconv.FormatBool(v.BoolValue)
		default:
			m[kv.Key] = kv.GetValue().String()
		}
	}
	return m
}
