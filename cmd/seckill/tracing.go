package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill/internal/redact"
)

// setupTracing sets up OpenTelemetry tracing for the process from the
// standard OTEL_* environment variables, which the SDK and the exporter read
// themselves (endpoint, headers, protocol, timeout, sampler, batching,
// resource attributes). Spans are exported over OTLP only when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// (and OTEL_SDK_DISABLED is not true); otherwise the provider is nil and
// nothing is traced: no handler is wrapped, no span started. service names
// the process (service.name; OTEL_SERVICE_NAME overrides it). stop flushes
// the spans not yet exported.
func setupTracing(ctx context.Context, service string) (tp trace.TracerProvider, stop func(), err error) {
	if !tracingConfigured() {
		return nil, func() {}, nil
	}
	// An endpoint may carry credentials (https://user:pass@collector); the
	// exporter's errors quote it.
	endpoint := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	exporter, err := traceExporter(ctx)
	if err != nil {
		return nil, nil, redact.Error(fmt.Errorf("opentelemetry exporter: %w", err), endpoint)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), // after: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil {
		slog.Warn("opentelemetry resource", "err", err) // partial: still usable
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		slog.Warn("opentelemetry", "err", redact.Error(err, endpoint)) // an unreachable collector, mostly
	}))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	slog.Info("tracing on", "service", service, "endpoint", redact.URL(endpoint))
	return sdk, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sdk.Shutdown(sctx); err != nil {
			slog.Warn("flush traces", "err", err)
		}
	}, nil
}

func tracingConfigured() bool {
	if off, _ := strconv.ParseBool(os.Getenv("OTEL_SDK_DISABLED")); off {
		return false
	}
	return firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// traceExporter is the OTLP exporter of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL:
// http/protobuf (the default, port 4318) or grpc (port 4317).
func traceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch p := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: use http/protobuf or grpc", p)
	}
}

// firstEnv is the first of the variables that is set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
