package ledger

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentledger/ledger/internal/retry"
)

// SemconvVersion is the version of the OpenTelemetry semantic conventions
// whose GenAI conventions the middleware follows (docs/telemetry.md): the
// Go package go.opentelemetry.io/otel/semconv/v1.41.0. The GenAI
// conventions are in development.
const SemconvVersion = "1.41.0"

// WithTracerProvider sets where the middleware's spans go: a client span
// per call, named "{gen_ai.operation.name} {gen_ai.request.model}" ("chat
// claude-sonnet-4-5"), with a child per attempt, after the OpenTelemetry
// GenAI conventions (docs/telemetry.md). The default is otel's global
// provider (otel.GetTracerProvider), a no-op unless the program set one.
// A provider of go.opentelemetry.io/otel/trace/noop turns the spans off
// entirely. tp must not be nil.
func WithTracerProvider(tp trace.TracerProvider) MiddlewareOption {
	return func(o *middlewareOptions) error {
		if tp == nil {
			return invalid("WithTracerProvider", "provider must not be nil")
		}
		o.tracerProvider = tp
		return nil
	}
}

// WithMeterProvider sets where the middleware's metrics go: the GenAI
// histograms gen_ai.client.token.usage (every attempt's tokens: what was
// billed) and gen_ai.client.operation.duration (each call's, error.type
// on failure). The default is otel's global provider
// (otel.GetMeterProvider), a no-op unless the program set one. A provider
// of go.opentelemetry.io/otel/metric/noop turns them off entirely. mp
// must not be nil.
func WithMeterProvider(mp metric.MeterProvider) MiddlewareOption {
	return func(o *middlewareOptions) error {
		if mp == nil {
			return invalid("WithMeterProvider", "provider must not be nil")
		}
		o.meterProvider = mp
		return nil
	}
}

// WithOperation returns ctx naming the GenAI operation of the calls Do
// makes with it, for their spans and metrics (gen_ai.operation.name:
// "chat", "embeddings", "generate_content", "text_completion"). Without
// it a call is a "chat".
func WithOperation(ctx context.Context, operation string) context.Context {
	return retry.WithOperation(ctx, operation)
}
