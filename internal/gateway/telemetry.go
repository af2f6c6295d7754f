package gateway

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/agentledger/ledger/internal/retry"
)

// genAIOperation is gen_ai.operation.name of a call to a route's
// endpoint (provider.Route.Endpoint): "embeddings", Gemini's
// "generate_content", a legacy completion's "text_completion", and
// "chat" for the rest (Anthropic's messages, OpenAI's chat completions
// and responses).
func genAIOperation(endpoint string) string {
	switch endpoint {
	case "embeddings":
		return "embeddings"
	case "generate":
		return "generate_content"
	case "completions", "complete":
		return "text_completion"
	}
	return "chat"
}

// traceContext reads a client's W3C trace context (traceparent,
// tracestate), so that a call's spans join the agent's trace.
var traceContext = propagation.TraceContext{}

// telemetryContext is the context of a call's middleware, with telemetry
// on: its operation, and the client's trace as the parent of its span.
// Off, it is ctx.
func (g *Gateway) telemetryContext(ctx context.Context, r *http.Request, endpoint string) context.Context {
	if g.cfg.Retry.TracerProvider == nil && g.cfg.Retry.MeterProvider == nil {
		return ctx
	}
	if r.Header.Get("traceparent") != "" {
		ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	return retry.WithOperation(ctx, genAIOperation(endpoint))
}
