package otelworker

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// The application properties that carry the trace context of a message
// from its producer to the worker.
const (
	PropertyTraceParent  = "traceparent"
	PropertyTraceState   = "tracestate"
	PropertyDiagnosticID = "Diagnostic-Id" // the Azure SDKs' name for the traceparent value
)

// Propagator returns the propagator of message trace context: W3C Trace
// Context and Baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// MessageCarrier adapts a Service Bus message's ApplicationProperties to
// propagation.TextMapCarrier. Get returns only string values; Set stores
// strings. A nil MessageCarrier reads as empty and must not be Set.
type MessageCarrier map[string]any

var _ propagation.TextMapCarrier = MessageCarrier(nil)

// Get returns the string value of key, or "".
func (c MessageCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

// Set stores value under key.
func (c MessageCarrier) Set(key, value string) { c[key] = value }

// Keys returns the keys of the properties.
func (c MessageCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectTraceContext writes the trace context of ctx into props, which must
// not be nil, as traceparent, tracestate and Diagnostic-Id, so that both
// this worker and the Azure SDKs of other languages find it. It writes
// nothing when ctx carries no valid span context. A producer calls it on
// the message's ApplicationProperties before sending.
func InjectTraceContext(ctx context.Context, p propagation.TextMapPropagator, props map[string]any) {
	c := MessageCarrier(props)
	p.Inject(ctx, c)
	if tp := c.Get(PropertyTraceParent); tp != "" {
		c.Set(PropertyDiagnosticID, tp)
	}
}

// ExtractTraceContext returns ctx with the remote span context read from
// props: traceparent and tracestate, or, without a traceparent,
// Diagnostic-Id. props may be nil.
func ExtractTraceContext(ctx context.Context, p propagation.TextMapPropagator, props map[string]any) context.Context {
	c := MessageCarrier(props)
	if c.Get(PropertyTraceParent) == "" && c.Get(PropertyDiagnosticID) != "" {
		c = MessageCarrier{PropertyTraceParent: c.Get(PropertyDiagnosticID)}
	}
	return p.Extract(ctx, c)
}
