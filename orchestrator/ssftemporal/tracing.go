package ssftemporal

import (
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TracingInterceptor is Temporal's OpenTelemetry interceptor, for client.Options.Interceptors
// (a worker inherits its client's): it carries the trace from the code that starts a workflow
// through the workflow to its activities, whose SSF instances' spans it parents. It traces
// through the global tracer provider as it is when this is called: install the SDK first
// (internal/telemetry.Start). Without one it records nothing.
func TracingInterceptor() (interceptor.ClientInterceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{})
}
