package telemetry_test

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

// A producer writes its span's context into the message; the consumer
// reads it back from the received message's application properties and
// starts its process span as a child.
func ExampleInject() {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	prop := telemetry.Propagator()

	id := "ord-1"
	m := &azservicebus.Message{MessageID: &id, ApplicationProperties: map[string]any{}}
	telemetry.Inject(ctx, prop, m.ApplicationProperties)
	fmt.Println(m.ApplicationProperties["traceparent"])
	fmt.Println(m.ApplicationProperties["Diagnostic-Id"])

	received := trace.SpanContextFromContext(telemetry.Extract(context.Background(), prop, m.ApplicationProperties))
	fmt.Println(received.TraceID(), received.IsRemote())
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// 4bf92f3577b34da6a3ce929d0e0e4736 true
}
