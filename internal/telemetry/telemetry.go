// Package telemetry installs OpenTelemetry's SDK from the standard environment, so the
// runtime's spans and counters (orchestrator/ssf) reach the collector an operator names:
//
//	OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT, ..._METRICS_ENDPOINT)  where to send; unset: no export
//	OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL, ..._METRICS_PROTOCOL)  http/protobuf (default) or grpc
//	OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT, ..._INSECURE, ...                  as the OTLP exporters read them
//	OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER                                 otlp (default with an endpoint) or none
//	OTEL_METRIC_EXPORT_INTERVAL                                                 as the SDK reads it (60 s)
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
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Start installs a tracer provider and a meter provider exporting over OTLP for each signal
// whose endpoint the environment names, and W3C trace-context propagation either way; service
// is the service.name unless OTEL_SERVICE_NAME says otherwise. shutdown flushes what is
// buffered: call it before exiting. A setting that cannot be honoured is an error, not a
// silent lack of telemetry.
func Start(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	none := func(context.Context) error { return nil }
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return none, nil
	}
	traces, err := signal("TRACES")
	if err != nil {
		return nil, err
	}
	metrics, err := signal("METRICS")
	if err != nil {
		return nil, err
	}
	if traces == "" && metrics == "" {
		return none, nil
	}
	// Later detectors win: the environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over the default name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	var stops []func(context.Context) error
	if traces != "" {
		client := otlptracehttp.NewClient()
		if traces == "grpc" {
			client = otlptracegrpc.NewClient()
		}
		exp, err := otlptrace.New(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		stops = append(stops, tp.Shutdown)
	}
	if metrics != "" {
		var exp sdkmetric.Exporter
		if metrics == "grpc" {
			exp, err = otlpmetricgrpc.New(ctx)
		} else {
			exp, err = otlpmetrichttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP metric exporter: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		otel.SetMeterProvider(mp)
		stops = append(stops, mp.Shutdown)
	}
	return func(ctx context.Context) error {
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

// Flush exports what the installed providers buffer, now: a Lambda sandbox may be frozen as
// soon as an invocation returns, and the batch would wait for the next one, or be lost.
func Flush(ctx context.Context) error {
	var errs []error
	if tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		errs = append(errs, tp.ForceFlush(ctx))
	}
	if mp, ok := otel.GetMeterProvider().(*sdkmetric.MeterProvider); ok {
		errs = append(errs, mp.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// signal reads whether and how one signal (TRACES, METRICS) is exported: "" for not, else
// its OTLP protocol.
func signal(name string) (protocol string, err error) {
	endpoint := firstSet("OTEL_EXPORTER_OTLP_"+name+"_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exporter := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_" + name + "_EXPORTER"))); exporter {
	case "none":
		return "", nil
	case "", "otlp":
		if endpoint == "" {
			if exporter == "otlp" {
				return "", fmt.Errorf("telemetry: OTEL_%s_EXPORTER=otlp needs OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_%s_ENDPOINT", name, name)
			}
			return "", nil
		}
	default:
		return "", fmt.Errorf("telemetry: OTEL_%s_EXPORTER=%q: ssfkit exports with otlp, or none", name, exporter)
	}
	switch protocol := firstSet("OTEL_EXPORTER_OTLP_"+name+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); protocol {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	default:
		return "", fmt.Errorf("telemetry: OTLP protocol %q for %s: want http/protobuf or grpc", protocol, strings.ToLower(name))
	}
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
