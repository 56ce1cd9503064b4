package otelworker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// oneMessageReceiver returns its one message on every receive and records
// no settlement: the telemetry's own cost, without a receiver's.
type oneMessageReceiver struct {
	workertest.Receiver
	msgs []*azservicebus.ReceivedMessage
}

func (r *oneMessageReceiver) ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	return r.msgs, nil
}

func (r *oneMessageReceiver) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return nil
}

// droppedTelemetry returns a Telemetry whose every ordinary trace the
// sampler drops, as deployed (a trace-id ratio under the kept sampler; a
// ratio of 0 here, so that the count is exact), with no metrics, and the
// receiver it wraps.
func droppedTelemetry(tb testing.TB) (*otelworker.Telemetry, worker.Receiver, *azservicebus.ReceivedMessage) {
	tb.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}),
		sdktrace.WithSampler(keptSampler{sdktrace.TraceIDRatioBased(0)}))
	tel, err := otelworker.New(otelworker.Options{TracerProvider: tp, Queue: "orders"})
	if err != nil {
		tb.Fatal(err)
	}
	m := &azservicebus.ReceivedMessage{MessageID: "ord-1", Body: []byte("{}"), DeliveryCount: 1}
	return tel, tel.Receiver(&oneMessageReceiver{msgs: []*azservicebus.ReceivedMessage{m}}), m
}

// deliver is what the worker asks of its Telemetry for one delivery that
// completes: the receive call that returned it, the hook's Start and End
// around it, and its settlement.
func deliver(ctx context.Context, tel *otelworker.Telemetry, r worker.Receiver) {
	msgs, _ := r.ReceiveMessages(ctx, 1, nil)
	m := msgs[0]
	dctx := tel.Start(ctx, m)
	_ = r.CompleteMessage(dctx, m, nil)
	tel.End(dctx, worker.Report{MessageID: m.MessageID, DeliveryCount: m.DeliveryCount,
		Result: idempotent.Result{Outcome: idempotent.Created, Key: m.MessageID}, Duration: time.Millisecond})
}

// BenchmarkDeliveryDropped measures the telemetry of one delivery whose
// trace the sampler dropped: what nearly every delivery of the deployed
// worker costs it.
// With traceparent, the message carries its producer's trace context, as
// the deployed producer's do, which the sampler (a trace-id ratio, not
// parent-based) drops all the same.
func BenchmarkDeliveryDropped(b *testing.B) {
	for _, traceparent := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		b.Run(fmt.Sprintf("traceparent=%v", traceparent != ""), func(b *testing.B) {
			tel, r, m := droppedTelemetry(b)
			if traceparent != "" {
				m.ApplicationProperties = map[string]any{otelworker.PropertyTraceParent: traceparent, otelworker.PropertyDiagnosticID: traceparent}
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				deliver(ctx, tel, r)
			}
		})
	}
}

// TestDeliveryDroppedAllocations pins what the telemetry of a delivery
// whose trace the sampler dropped allocates: the SDK's non-recording span
// and the context that carries it, once for the receive span and once for
// the process span; nothing of the telemetry's own (names, attributes,
// options), and no settlement span. A change that allocates more per
// delivery fails here.
func TestDeliveryDroppedAllocations(t *testing.T) {
	tel, r, _ := droppedTelemetry(t)
	ctx := context.Background()
	if got := testing.AllocsPerRun(1000, func() { deliver(ctx, tel, r) }); got != 4 {
		t.Errorf("a delivery with a dropped trace allocates %v times in the telemetry, want 4", got)
	}
}

// TestProcessSpanAttributes: a recorded process span carries its own
// message's attributes, set once it records, and AttrKept, given to the
// sampler, only on a redelivery.
func TestProcessSpanAttributes(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := otelworker.New(otelworker.Options{TracerProvider: tp, Queue: "orders", Subscription: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		m := &azservicebus.ReceivedMessage{MessageID: fmt.Sprint("ord-", i), DeliveryCount: uint32(1 + i%3)}
		ctx := tel.Start(context.Background(), m)
		tel.End(ctx, worker.Report{MessageID: m.MessageID, DeliveryCount: m.DeliveryCount, Result: idempotent.Result{Outcome: idempotent.Created}})
	}
	ended := spans.Ended()
	if len(ended) != 20 {
		t.Fatalf("%d spans ended, want 20", len(ended))
	}
	for i, sp := range ended {
		if sp.Name() != "process orders" {
			t.Errorf("span %d is named %q, want %q", i, sp.Name(), "process orders")
		}
		count := 1 + i%3
		want := map[attribute.Key]attribute.Value{
			semconv.MessagingSystemKey:                         semconv.MessagingSystemServiceBus.Value,
			semconv.MessagingDestinationNameKey:                attribute.StringValue("orders"),
			semconv.MessagingDestinationSubscriptionNameKey:    attribute.StringValue("sub"),
			semconv.MessagingMessageIDKey:                      attribute.StringValue(fmt.Sprint("ord-", i)),
			semconv.MessagingServiceBusMessageDeliveryCountKey: attribute.IntValue(count),
			semconv.MessagingOperationTypeKey:                  semconv.MessagingOperationTypeProcess.Value,
			semconv.MessagingOperationNameKey:                  attribute.StringValue("process"),
		}
		if count > 1 {
			want[otelworker.AttrKept] = attribute.StringValue(otelworker.KeptRedelivery)
		}
		got := map[attribute.Key]attribute.Value{}
		for _, a := range sp.Attributes() {
			if _, ok := want[a.Key]; ok {
				got[a.Key] = a.Value
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d: %s = %v, want %v", i, k, got[k].Emit(), v.Emit())
			}
		}
		if _, kept := got[otelworker.AttrKept]; kept && count == 1 {
			t.Errorf("span %d of a first delivery carries %s", i, otelworker.AttrKept)
		}
	}
}
