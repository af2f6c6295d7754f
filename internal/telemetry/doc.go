// Package telemetry owns the OpenTelemetry providers of the ledger's
// commands (gateway run): FromEnv builds a tracer and a meter provider
// that export over OTLP/HTTP as the standard environment says, and
// Providers.Shutdown flushes what they hold and stops them. What is
// recorded through them is the retry middleware's (internal/retry,
// telemetry.go); docs/telemetry.md describes both.
//
// It is off unless configured. A signal (traces, metrics) is exported
// when OTEL_{TRACES,METRICS}_EXPORTER is "otlp", or when it is unset and
// OTEL_EXPORTER_OTLP_ENDPOINT or the signal's own
// OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT is set. "none" turns a
// signal off, and OTEL_SDK_DISABLED=true both. Any other exporter, or an
// OTEL_EXPORTER_OTLP_PROTOCOL other than http/protobuf, is refused with
// an *EnvError naming the variable and the rule, rather than exporting
// somewhere the operator did not mean. OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override the command's service name. The rest
// of the environment is the SDK's own: the exporters read the OTLP
// headers, timeout, compression and certificates, the tracer provider
// OTEL_TRACES_SAMPLER and OTEL_BSP_*, the meter provider
// OTEL_METRIC_EXPORT_INTERVAL.
//
// Off, nothing is built: no provider, no goroutine, no connection, and
// the middleware's instrumentation is a nil check. On, the batch span
// processor and the periodic reader each own a goroutine until Shutdown.
package telemetry
