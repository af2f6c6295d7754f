// Package telemetrytest is the in-memory OpenTelemetry of the tests: a
// tracer provider whose ended spans a test reads, a meter provider read
// on demand (a ManualReader), and helpers to find spans, attributes and
// histogram points; and Receiver, a real OTLP/HTTP collector that
// decodes what the exporters post.
package telemetrytest
