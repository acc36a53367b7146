package worker

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// OrderIDKey is the span attribute naming an order (a decimal string, like
// every id on the wire), on every span of seckill's traces that concerns
// one order, so a trace viewer finds an order's traces by its id.
const OrderIDKey = attribute.Key("order.id")

// workflowIDTag is the attribute with which Temporal's tracing interceptor
// names a span's workflow.
const workflowIDTag = "temporalWorkflowID"

// tracing is Temporal's OpenTelemetry interceptor on tp. Its spans go on the
// trace whose context the Temporal headers carry: the client puts the
// caller's span there (the relay's start of an order, an api's pay or
// cancel), and the worker starts RunWorkflow, StartActivity and
// RunActivity spans under it, local activities included.
func tracing(tp trace.TracerProvider) interceptor.Interceptor {
	it, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{
		Tracer: tp.Tracer("go.temporal.io/sdk"),
		SpanStarter: func(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
			_, span := t.Start(ctx, name, opts...)
			return orderSpan{span}
		},
	})
	if err != nil {
		panic(err) // NewTracingInterceptor has no failing path (contrib/opentelemetry v0.8.1)
	}
	return it
}

// ClientTracing is the client side of Temporal's tracing interceptor, for
// client.Options.Interceptors: starts, updates and signals carry the
// caller's trace context to the workflow. It leaves workers alone (a full
// interceptor on a client also intercepts the workers created from it);
// they trace through Options.Tracing.
func ClientTracing(tp trace.TracerProvider) interceptor.ClientInterceptor {
	return clientOnly{tracing(tp)}
}

type clientOnly struct{ interceptor.ClientInterceptor }

// orderSpan adds order.id to the spans Temporal's interceptor names an order
// workflow on ("order-<id>").
type orderSpan struct{ trace.Span }

func (s orderSpan) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		if a.Key == workflowIDTag {
			if id, ok := strings.CutPrefix(a.Value.AsString(), "order-"); ok {
				kv = append(kv, OrderIDKey.String(id))
			}
			break
		}
	}
	s.Span.SetAttributes(kv...)
}
