package retry

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentledger/ledger/api"
	"github.com/agentledger/ledger/internal/events"
)

// The OpenTelemetry GenAI instrumentation of the middleware (docs/telemetry.md).
// It follows the GenAI semantic conventions of semantic-conventions v1.41.0,
// the last release whose Go package (go.opentelemetry.io/otel/semconv/v1.41.0)
// carries them; they are in development, and gen_ai.provider.name replaced
// gen_ai.system.
const (
	// InstrumentationName is the scope of the middleware's tracer and meter.
	InstrumentationName = "github.com/agentledger/ledger"
	// SemconvVersion is the version of the semantic conventions followed.
	SemconvVersion = "1.41.0"
	// DefaultOperation is gen_ai.operation.name of a call whose context
	// names none (WithOperation).
	DefaultOperation = "chat"
)

// The attributes of the ledger's own, outside the conventions. Both
// spans carry the call's request_id.
const AttrRequestID = attribute.Key("ledger.request_id")

// The attributes of an attempt's span: its number and event, its outcome,
// and why it was retried (its error kind, the wait) or why the call
// stopped after it.
const (
	AttrAttempt     = attribute.Key("ledger.attempt")
	AttrEventID     = attribute.Key("ledger.event_id")
	AttrOutcome     = attribute.Key("ledger.outcome")
	AttrRetryable   = attribute.Key("ledger.retryable")
	AttrRetryReason = attribute.Key("ledger.retry_reason")
)

// More attributes of an attempt's span (the provider's request-id) and
// of the call's: its number of attempts, what every attempt billed
// (gen_ai.usage.* is the usage: the successful attempt's) and why it
// stopped.
const (
	AttrRetryDelay        = attribute.Key("ledger.retry_delay") // seconds
	AttrProviderRequestID = attribute.Key("ledger.provider_request_id")
	AttrAttempts          = attribute.Key("ledger.attempts")
	AttrBilledInput       = attribute.Key("ledger.billed.input_tokens")
	AttrBilledOutput      = attribute.Key("ledger.billed.output_tokens")
)

// AttrStopReason says why a failed call stopped (StopReason), on the
// call's span and its last attempt's.
const AttrStopReason = attribute.Key("ledger.stop_reason")

// AttrLabelPrefix prefixes the key of each of the call's labels on its
// span (ledger.label.team).
const AttrLabelPrefix = "ledger.label."

// The bucket boundaries the conventions advise for the two histograms.
var (
	TokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

type operationKey struct{}

// WithOperation returns ctx naming the GenAI operation of the calls made
// with it (gen_ai.operation.name: "chat", "embeddings",
// "generate_content", "text_completion", ...). Without it a call is
// DefaultOperation. It matters only with telemetry on.
func WithOperation(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, operationKey{}, op)
}

func operation(ctx context.Context) string {
	if op, ok := ctx.Value(operationKey{}).(string); ok && op != "" {
		return op
	}
	return DefaultOperation
}

// ProviderName is gen_ai.provider.name for a provider of the ledger: the
// conventions' name where it differs from the ledger's ("gemini" is
// "gcp.gemini", "mistral" "mistral_ai", "xai" "x_ai"), else the ledger's.
func ProviderName(provider string) string {
	switch provider {
	case "gemini":
		return string(genaiconv.ProviderNameGCPGemini)
	case "mistral":
		return string(genaiconv.ProviderNameMistralAI)
	case "xai":
		return string(genaiconv.ProviderNameXAI)
	}
	return provider
}

// LibraryProviders are the providers a library's middleware records
// through (package ledger's and package gateway's): tp and mp when set,
// else otel's global ones, which are no-ops until the program sets its
// own; a provider of trace/noop or metric/noop is nil, so that the
// middleware does nothing at all for it.
func LibraryProviders(tp trace.TracerProvider, mp metric.MeterProvider) (trace.TracerProvider, metric.MeterProvider) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if _, ok := tp.(tracenoop.TracerProvider); ok {
		tp = nil
	}
	if _, ok := mp.(metricnoop.MeterProvider); ok {
		mp = nil
	}
	return tp, mp
}

// telemetry holds the instruments of a middleware with telemetry on.
type telemetry struct {
	tracer   trace.Tracer // nil: metrics only
	tokens   genaiconv.ClientTokenUsage
	duration genaiconv.ClientOperationDuration
	// timestamps: the clock is not the system's, so spans take their
	// times from it (a test's fake clock); with the system clock the SDK
	// reads the same time itself, without the options' allocations.
	timestamps bool

	mu    sync.RWMutex
	names map[spanKey]spanNames
}

type spanKey struct{ op, model string }

type spanNames struct{ call, attempt string }

var clientKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// newTelemetry returns the instruments of tp and mp, or nil when both are
// nil (telemetry off: the middleware does nothing more than a nil check).
func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider, clock Clock) (*telemetry, error) {
	if tp == nil && mp == nil {
		return nil, nil
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	t := &telemetry{timestamps: clock != SystemClock, names: make(map[spanKey]spanNames)}
	if tp != nil {
		t.tracer = tp.Tracer(InstrumentationName, trace.WithSchemaURL(semconv.SchemaURL))
	}
	meter := mp.Meter(InstrumentationName, metric.WithSchemaURL(semconv.SchemaURL))
	var err error
	if t.tokens, err = genaiconv.NewClientTokenUsage(meter, metric.WithExplicitBucketBoundaries(TokenBuckets...)); err != nil {
		return nil, &OptionsError{Field: "MeterProvider", Rule: "could not make gen_ai.client.token.usage", Err: err}
	}
	if t.duration, err = genaiconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		return nil, &OptionsError{Field: "MeterProvider", Rule: "could not make gen_ai.client.operation.duration", Err: err}
	}
	return t, nil
}

// spanNames returns the names of the spans of a call of op to model:
// "{gen_ai.operation.name} {gen_ai.request.model}" for the call, and the
// same followed by " attempt" for its attempts. They are made once.
func (t *telemetry) spanNames(op, model string) spanNames {
	k := spanKey{op, model}
	t.mu.RLock()
	n, ok := t.names[k]
	t.mu.RUnlock()
	if ok {
		return n
	}
	n = spanNames{call: op + " " + model, attempt: op + " " + model + " attempt"}
	t.mu.Lock()
	if len(t.names) < maxSpanNames {
		t.names[k] = n
	}
	t.mu.Unlock()
	return n
}

// maxSpanNames bounds the cache of span names; past it names are made
// for each call.
const maxSpanNames = 4096

// callTelemetry is the telemetry state of one call (part of its run).
type callTelemetry struct {
	op     string
	names  spanNames
	ctx    context.Context // the caller's with the call's span: the attempts' parent
	span   trace.Span      // the call's; nil with telemetry off
	att    trace.Span      // the attempt under way's; nil when none
	attCtx context.Context // ctx with att
	billed events.Usage    // every attempt's usage
	stop   StopReason      // why the call ended, when it failed
	wait   time.Duration   // the wait after the attempt just failed
	opts   [2]trace.SpanStartOption
}

// startOptions are the options of a span starting at ts.
func (c *callTelemetry) startOptions(t *telemetry, ts time.Time) []trace.SpanStartOption {
	if !t.timestamps {
		return clientKind
	}
	c.opts = [2]trace.SpanStartOption{clientKind[0], trace.WithTimestamp(ts)}
	return c.opts[:]
}

func endOptions(t *telemetry, ts time.Time) []trace.SpanEndOption {
	if !t.timestamps {
		return nil
	}
	return []trace.SpanEndOption{trace.WithTimestamp(ts)}
}

// parent is the context the attempt under way runs in: the caller's, with
// the attempt's span when there is one.
func (r *run) parent() context.Context {
	switch {
	case r.tc.attCtx != nil:
		return r.tc.attCtx
	case r.tc.ctx != nil:
		return r.tc.ctx
	}
	return r.ctx
}

// startCall starts the call's span, when there is a tracer.
func (r *run) startCall(t *telemetry) {
	c := &r.tc
	c.op = operation(r.ctx)
	if t.tracer == nil {
		return
	}
	c.names = t.spanNames(c.op, r.call.Model)
	c.ctx, c.span = t.tracer.Start(r.ctx, c.names.call, c.startOptions(t, r.tl.start)...)
	if !c.span.IsRecording() {
		return
	}
	c.span.SetAttributes(r.commonAttrs()...)
	for k, v := range r.call.Labels {
		c.span.SetAttributes(attribute.String(AttrLabelPrefix+k, v))
	}
}

// commonAttrs are the attributes of the call's span and of its attempts'.
func (r *run) commonAttrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIOperationNameKey.String(r.tc.op),
		semconv.GenAIProviderNameKey.String(ProviderName(r.call.Provider)),
		semconv.GenAIRequestModel(r.call.Model),
		semconv.GenAIConversationID(r.call.SessionID),
		AttrRequestID.String(r.call.RequestID),
	}
}

// startAttempt starts the span of the attempt under way, under a call's
// span that records.
func (r *run) startAttempt(t *telemetry, number int, eventID string, started time.Time) {
	c := &r.tc
	if c.span == nil || !c.span.IsRecording() {
		return
	}
	c.attCtx, c.att = t.tracer.Start(c.ctx, c.names.attempt, c.startOptions(t, started)...)
	c.att.SetAttributes(append(r.commonAttrs(), AttrAttempt.Int(number), AttrEventID.String(eventID))...)
}

// endAttempt records the attempt whose event is ev (c nil for a success):
// its tokens and its span, made now for an attempt that was not made (a
// rejection).
func (r *run) endAttempt(t *telemetry, ev *events.Attempt, c *Classification, final bool) {
	tc := &r.tc
	tc.billed = tc.billed.Add(ev.Usage)
	if ctx := r.parent(); (ev.Usage.InputTokens > 0 || ev.Usage.OutputTokens > 0 || c == nil) && t.tokens.Enabled(ctx) {
		var buf [2]attribute.KeyValue
		attrs := append(buf[:0], semconv.GenAIRequestModel(r.call.Model))
		if c != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(string(c.Kind)))
		}
		op, prov := genaiconv.OperationNameAttr(tc.op), genaiconv.ProviderNameAttr(ProviderName(r.call.Provider))
		t.tokens.Record(ctx, ev.Usage.InputTokens, op, prov, genaiconv.TokenTypeInput, attrs...)
		t.tokens.Record(ctx, ev.Usage.OutputTokens, op, prov, genaiconv.TokenTypeOutput, attrs...)
	}
	if tc.att == nil {
		if tc.span == nil || !tc.span.IsRecording() {
			return
		}
		r.startAttempt(t, ev.Attempt, ev.EventID, ev.StartedAt) // an attempt not made
	}
	span := tc.att
	tc.att, tc.attCtx = nil, nil
	span.SetAttributes(
		semconv.GenAIUsageInputTokens(int(ev.Usage.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(ev.Usage.OutputTokens)),
		AttrOutcome.String(string(ev.Outcome)),
	)
	if ev.ProviderRequestID != "" {
		span.SetAttributes(AttrProviderRequestID.String(ev.ProviderRequestID))
	}
	if c != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(string(c.Kind)), AttrRetryable.Bool(c.Retryable))
		if c.Status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(c.Status))
		}
		if final {
			if tc.stop != "" {
				span.SetAttributes(AttrStopReason.String(string(tc.stop)))
			}
		} else {
			span.SetAttributes(AttrRetryReason.String(string(c.Kind)), AttrRetryDelay.Float64(tc.wait.Seconds()))
		}
		span.SetStatus(codes.Error, statusText(c))
	}
	span.End(endOptions(t, ev.FinishedAt)...)
}

// statusText describes a failure for a span's status: its kind and
// status, never its message (which may quote what the upstream said).
func statusText(c *Classification) string {
	if c.Status == 0 {
		return string(c.Kind)
	}
	return string(c.Kind) + " (" + strconv.Itoa(c.Status) + ")"
}

// endCall records the call's duration and ends its span; ev is the
// call's last event.
func (r *run) endCall(t *telemetry, ev *events.Attempt) {
	tc := &r.tc
	if tc.att != nil { // an attempt abandoned without its event
		tc.att.End()
	}
	failed := ev.Outcome != events.OutcomeSuccess
	var kind api.ErrorKind
	if failed && ev.Error != nil {
		kind = ev.Error.Kind
	}
	end := ev.FinishedAt
	if end.IsZero() {
		end = r.tl.now()
	}
	if ctx := r.parent(); t.duration.Enabled(ctx) {
		var buf [2]attribute.KeyValue
		attrs := append(buf[:0], semconv.GenAIRequestModel(r.call.Model))
		if failed {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(kind)))
		}
		t.duration.Record(ctx, end.Sub(r.tl.start).Seconds(), genaiconv.OperationNameAttr(tc.op),
			genaiconv.ProviderNameAttr(ProviderName(r.call.Provider)), attrs...)
	}
	span := tc.span
	if span == nil {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(AttrAttempts.Int(r.attempts), AttrOutcome.String(string(ev.Outcome)),
		AttrBilledInput.Int64(tc.billed.InputTokens), AttrBilledOutput.Int64(tc.billed.OutputTokens))
	if !failed {
		span.SetAttributes(semconv.GenAIUsageInputTokens(int(ev.Usage.InputTokens)),
			semconv.GenAIUsageOutputTokens(int(ev.Usage.OutputTokens)))
	} else {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(kind)))
		if tc.stop != "" {
			span.SetAttributes(AttrStopReason.String(string(tc.stop)))
		}
		msg := errorType(kind)
		if tc.stop != "" {
			msg += ": " + string(tc.stop)
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End(endOptions(t, end)...)
}

// errorType is error.type of a failure of kind.
func errorType(kind api.ErrorKind) string {
	if kind == "" {
		return string(genaiconv.ErrorTypeOther)
	}
	return string(kind)
}
