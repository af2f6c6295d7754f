package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Config says who the command is, for the resource of what it exports.
type Config struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME (or
	// OTEL_RESOURCE_ATTRIBUTES) does not name one. Required.
	ServiceName string
	// Version is service.version, when set.
	Version string
	// Logger, when set, is told (at WARN) the errors of the exporters,
	// which the OpenTelemetry SDK otherwise prints to stderr: it becomes
	// otel's global error handler. It is told once, at INFO, what is
	// exported.
	Logger *slog.Logger
}

// Providers are a command's OpenTelemetry providers, built from the
// environment by FromEnv. A signal that is off has a nil provider, which
// the retry middleware takes as off.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	shutdown []func(context.Context) error
}

// Enabled reports whether a signal is exported.
func (p *Providers) Enabled() bool {
	return p != nil && (p.TracerProvider != nil || p.MeterProvider != nil)
}

// Shutdown exports what the providers hold (the spans in the batch, the
// metrics since the last export) and stops them; their goroutines are
// gone when it returns. ctx bounds the wait for the collector. It does
// nothing for providers that are off, and is safe to call more than once.
func (p *Providers) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	var errs []error
	for _, f := range p.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	p.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// EnvError is FromEnv's error for an environment variable it cannot
// follow: the variable, its value and the rule.
type EnvError struct {
	Var, Value, Rule string
}

func (e *EnvError) Error() string {
	return "telemetry: " + e.Var + "=" + strconv.Quote(e.Value) + ": " + e.Rule
}

// signal is what the environment says of one signal.
type signal struct {
	name     string // "traces", "metrics"
	exporter string // OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER
	endpoint string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, ..._METRICS_ENDPOINT
	protocol string // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, ..._METRICS_PROTOCOL
}

var (
	tracesSignal  = signal{"traces", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"}
	metricsSignal = signal{"metrics", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"}
)

// on reports whether the environment asks for the signal: its exporter is
// "otlp", or it names none and an OTLP endpoint is set (the signal's or
// the common OTEL_EXPORTER_OTLP_ENDPOINT). "none" turns it off; another
// exporter, or a protocol other than http/protobuf, is an *EnvError.
func (s signal) on() (bool, error) {
	exp := strings.TrimSpace(os.Getenv(s.exporter))
	var on bool
	switch exp {
	case "otlp":
		on = true
	case "none":
		return false, nil
	case "":
		on = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv(s.endpoint) != ""
	default:
		return false, &EnvError{Var: s.exporter, Value: exp, Rule: "the exporters are otlp (over HTTP) and none"}
	}
	if !on {
		return false, nil
	}
	for _, v := range []string{s.protocol, "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(os.Getenv(v)); p != "" {
			if p != "http/protobuf" {
				return false, &EnvError{Var: v, Value: p, Rule: "the ledger exports OTLP over HTTP with protobuf only (http/protobuf)"}
			}
			break // the signal's wins
		}
	}
	return true, nil
}

// FromEnv builds the providers the standard OpenTelemetry environment
// asks for (see the package documentation): nothing, and nil providers,
// when it asks for none. The exporters read the rest of the OTLP
// environment themselves (headers, timeout, compression, certificates),
// the tracer provider the sampler's and the batch's, the meter provider
// the export interval. The caller owns the providers: Shutdown flushes
// and stops them.
func FromEnv(ctx context.Context, cfg Config) (*Providers, error) {
	if cfg.ServiceName == "" {
		return nil, errors.New("telemetry: Config.ServiceName is empty; it is required")
	}
	p := &Providers{}
	if v := strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return nil, &EnvError{Var: "OTEL_SDK_DISABLED", Value: v, Rule: "must be true or false"}
		}
		if disabled {
			return p, nil
		}
	}
	traces, err := tracesSignal.on()
	if err != nil {
		return nil, err
	}
	metrics, err := metricsSignal.on()
	if err != nil {
		return nil, err
	}
	if !traces && !metrics {
		return p, nil
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if traces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: the OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		p.TracerProvider = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
	}
	if metrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			_ = p.Shutdown(ctx)
			return nil, fmt.Errorf("telemetry: the OTLP metric exporter: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		p.MeterProvider = mp
		p.shutdown = append(p.shutdown, mp.Shutdown)
	}
	if l := cfg.Logger; l != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			l.Warn("telemetry: OpenTelemetry export failed", slog.Any("error", err))
		}))
		l.Info("telemetry: exporting OpenTelemetry over OTLP/HTTP", slog.Bool("traces", traces), slog.Bool("metrics", metrics))
	}
	return p, nil
}

// newResource is the resource of cfg, which the environment
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) overrides.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(cfg.ServiceName))}
	if cfg.Version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.Version)))
	}
	attrs = append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())
	res, err := resource.New(ctx, attrs...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: the resource: %w", err)
	}
	return res, nil
}
