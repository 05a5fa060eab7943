// Package telemetry installs OpenTelemetry's SDK from the standard environment, so the
// runtime's spans (orchestrator/ssf) reach the collector an operator names:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)  where to send; unset: no export
//	OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL)                 http/protobuf (default) or grpc
//	OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT, ..._INSECURE, ...            as the OTLP exporters read them
//	OTEL_TRACES_EXPORTER                                                  otlp (default with an endpoint) or none
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER[_ARG], OTEL_SDK_DISABLED
//
// Imports (docs/architecture.md): nothing of the module; the commands and hosts call Start.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Start installs a tracer provider exporting over OTLP when the environment names an endpoint,
// and W3C trace-context propagation either way; service is the service.name unless
// OTEL_SERVICE_NAME says otherwise. shutdown flushes what is buffered: call it before exiting.
// A setting that cannot be honoured is an error, not a silent lack of traces.
func Start(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	none := func(context.Context) error { return nil }
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return none, nil
	}
	endpoint := firstSet("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exporter := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exporter {
	case "none":
		return none, nil
	case "", "otlp":
		if endpoint == "" {
			if exporter == "otlp" {
				return nil, errors.New("telemetry: OTEL_TRACES_EXPORTER=otlp needs OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
			}
			return none, nil
		}
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: ssfkit exports traces with otlp, or none", exporter)
	}
	var client otlptrace.Client
	switch protocol := firstSet("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); protocol {
	case "", "http/protobuf":
		client = otlptracehttp.NewClient()
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q: want http/protobuf or grpc", protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter for %s: %w", endpoint, err)
	}
	// Later detectors win: the environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over the default name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
