package otelworker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// reasonIDReused is a domain's reason for a Mismatch.
const reasonIDReused = "InvoiceIdReused"

// TestTelemetry runs a known mix of deliveries through a worker with
// in-memory exporters and checks every metric and the span tree of one
// delivery: a process span continuing the producer's trace, its settlement
// and lock renewals as children. Its metrics and attributes have the
// prefixes the deployment gave.
func TestTelemetry(t *testing.T) {
	n := otelworker.PrefixedNames("invoiceworker", "invoice")
	r := workertest.NewReceiver()
	// The producer's side: a span whose context travels in the message.
	producer := sdktrace.NewTracerProvider()
	pctx, send := producer.Tracer("test").Start(context.Background(), "send orders")
	send.End()
	add := func(id string, deliveryCount uint32) {
		props := map[string]any{}
		otelworker.InjectTraceContext(pctx, otelworker.Propagator(), props)
		r.Send(&azservicebus.ReceivedMessage{MessageID: id, Body: []byte(id), DeliveryCount: deliveryCount, ApplicationProperties: props})
	}
	add("created", 1)
	add("resent", 1)
	add("redelivered", 3)
	add("mismatch", 1)
	add("invalid", 1)
	add("transient", 1)
	add("complete-lost", 1)
	add("renewed", 1)
	r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
		if m.MessageID == "complete-lost" {
			return &azservicebus.Error{Code: azservicebus.CodeLockLost}
		}
		return nil
	}
	var renewals atomic.Int64
	r.RenewErr = func(m *azservicebus.ReceivedMessage) error {
		if renewals.Add(1) == 1 {
			return errors.New("connection reset") // failed, retried
		}
		return nil
	}
	renewedTwice := make(chan struct{})
	var inFlightDuring atomic.Int64
	// handled counts the handler calls and observed the deliveries whose
	// metrics are recorded (Observe runs after the process span ends): a
	// delivery leaves its handler slot before it settles, so with
	// Concurrency 1 the next one may start while the previous one is still
	// counted in flight. The "renewed" handler waits for the ones before it
	// to end, so that it reads the gauge with exactly itself in flight, on
	// any machine.
	var handled, observed atomic.Int64
	reader := sdkmetric.NewManualReader()
	done := workertest.SettledN(r, 8)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		before := handled.Add(1) - 1
		switch m.ID {
		case "resent":
			return idempotent.Result{Outcome: idempotent.Duplicate, Key: m.ID}
		case "redelivered":
			// The redelivery resumed a capture its earlier delivery held.
			return idempotent.Result{Outcome: idempotent.Duplicate, Key: m.ID, Resumed: true}
		case "mismatch":
			return idempotent.Result{Outcome: idempotent.Mismatch, Key: m.ID, Reason: reasonIDReused}
		case "invalid":
			return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage}
		case "transient":
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errors.New("503")}
		case "renewed":
			for observed.Load() < before && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			inFlightDuring.Store(telemetrytest.Collect(t, reader).Int(n.InFlight))
			select {
			case <-renewedTwice:
			case <-ctx.Done():
			}
		}
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var ru atomic.Int64
	tel, err := otelworker.New(otelworker.Options{TracerProvider: tp, MeterProvider: mp, Queue: "orders", Names: n,
		RequestCharge: func() float64 { return float64(ru.Add(1)) },
		CacheStats:    func() idempotent.CacheStats { return idempotent.CacheStats{Hits: 5, Misses: 2} },
	})
	if err != nil {
		t.Fatal(err)
	}
	// One dependency failure makes the breaker ask the probe, which
	// fails, so it opens; the next probe closes it.
	b, err := breaker.New(breaker.Options{Threshold: 1, Probe: probeFailsOnce(), MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		OnChange: func(s breaker.State) { tel.BreakerChanged(s.String(), s != breaker.Closed) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := workertest.NewWorker(t, tel.Receiver(r), h, worker.Options{
		Concurrency: 1, LockDuration: 2 * time.Second, MessageTimeout: 1900 * time.Millisecond,
		Gate:    b,
		Hook:    tel,
		Observe: func(worker.Report) { observed.Add(1) },
	})
	go func() {
		for renewals.Load() < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		close(renewedTwice)
	}()
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "eight settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	m := telemetrytest.Collect(t, reader)
	s := w.Stats()
	queue := semconv.MessagingDestinationName("orders")
	outcome := func(o string) attribute.KeyValue { return n.Outcome.String(o) }
	for _, c := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{otelworker.MetricConsumed, []attribute.KeyValue{queue, semconv.MessagingSystemServiceBus}, 8},
		{n.Deliveries, nil, 8},
		{n.Deliveries, []attribute.KeyValue{outcome("created")}, s.Outcomes[idempotent.Created]},
		{n.Deliveries, []attribute.KeyValue{outcome("created")}, 3},
		{n.Deliveries, []attribute.KeyValue{outcome("duplicate")}, 2},
		{n.Deliveries, []attribute.KeyValue{outcome("mismatch"), n.Reason.String(reasonIDReused)}, 1},
		{n.Deliveries, []attribute.KeyValue{outcome("invalid")}, 1},
		{n.Deliveries, []attribute.KeyValue{outcome("transient"), n.Reason.String(idempotent.ReasonStoreUnavailable)}, 1},
		{n.Duplicates, []attribute.KeyValue{n.DuplicateCause.String("resend")}, 1},
		{n.Duplicates, []attribute.KeyValue{n.DuplicateCause.String("redelivery")}, 1},
		{n.Mismatches, nil, 1},
		{n.DeadLetters, []attribute.KeyValue{n.Reason.String(reasonIDReused)}, 1},
		{n.DeadLetters, []attribute.KeyValue{n.Reason.String(idempotent.ReasonInvalidMessage)}, 1},
		{n.SettlementFailures, []attribute.KeyValue{semconv.MessagingServiceBusDispositionStatusComplete, semconv.ErrorTypeKey.String(string(azservicebus.CodeLockLost))}, 1},
		{n.SettlementFailures, nil, s.SettleFailed},
		{n.LockRenewals, []attribute.KeyValue{otelworker.AttrRenewalResult.String("failed")}, s.RenewFailed},
		{n.LockRenewals, []attribute.KeyValue{otelworker.AttrRenewalResult.String("failed")}, 1},
		{n.LockRenewals, []attribute.KeyValue{otelworker.AttrRenewalResult.String("ok")}, s.Renewed},
		{n.BreakerTransitions, []attribute.KeyValue{otelworker.AttrBreakerState.String("open")}, 1},
		{n.BreakerTransitions, []attribute.KeyValue{otelworker.AttrBreakerState.String("closed")}, 1},
		{n.BreakerOpen, nil, 0},
		{n.InFlight, nil, 0},
		{otelworker.MetricProcessDuration, []attribute.KeyValue{outcome("duplicate")}, 2},
		{n.CacheHits, []attribute.KeyValue{queue}, 5},
		{n.CacheMisses, []attribute.KeyValue{queue}, 2},
		{n.Resumed, []attribute.KeyValue{queue}, 1},
	} {
		if got := m.Int(c.name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.attrs, got, c.want)
		}
	}
	if got := inFlightDuring.Load(); got != 1 {
		t.Errorf("%s = %d while a delivery was handled, want 1", n.InFlight, got)
	}
	if s.Renewed < 1 {
		t.Errorf("stats = %+v: want a successful renewal", s)
	}
	if v, _ := m.Value(n.RequestUnits); v < 1 {
		t.Errorf("%s = %v, want the RequestCharge observed", n.RequestUnits, v)
	}

	// The span tree of the renewed delivery.
	var process sdktrace.ReadOnlySpan
	for _, sp := range telemetrytest.Spans(spans, "process orders") {
		if v, _ := telemetrytest.Attr(sp, semconv.MessagingMessageIDKey); v.AsString() == "renewed" {
			process = sp
		}
	}
	if process == nil {
		t.Fatalf("no process span of message renewed among %d spans", len(spans.Ended()))
	}
	for _, sp := range telemetrytest.Spans(spans, "process orders") {
		id, _ := telemetrytest.Attr(sp, semconv.MessagingMessageIDKey)
		took, ok := telemetrytest.Attr(sp, "invoice.effect_resumed")
		if want := id.AsString() == "redelivered"; ok != want || ok && !took.AsBool() {
			t.Errorf("process span of %s: invoice.effect_resumed %v (set %v), want set %v", id.AsString(), took.Emit(), ok, want)
		}
	}
	if process.Parent().SpanID() != send.SpanContext().SpanID() || process.SpanContext().TraceID() != send.SpanContext().TraceID() {
		t.Errorf("process span's parent = %v, want the producer's send span %v", process.Parent(), send.SpanContext())
	}
	if process.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("process span kind %v, want consumer", process.SpanKind())
	}
	if n.Deliveries != "invoiceworker.deliveries" || n.Key != "invoice.key" {
		t.Errorf("PrefixedNames = %+v: want the prefixes given", n)
	}
	for key, want := range map[attribute.Key]string{
		semconv.MessagingSystemKey:          "servicebus",
		semconv.MessagingOperationTypeKey:   "process",
		semconv.MessagingDestinationNameKey: "orders",
		n.Outcome:                           "created",
		n.Key:                               "renewed",
	} {
		if v, _ := telemetrytest.Attr(process, key); v.Emit() != want {
			t.Errorf("process span %s = %q, want %q", key, v.Emit(), want)
		}
	}
	if v, _ := telemetrytest.Attr(process, semconv.MessagingServiceBusMessageDeliveryCountKey); v.AsInt64() != 1 {
		t.Errorf("process span delivery count = %v, want 1", v.Emit())
	}
	children := map[string]int{}
	for _, sp := range spans.Ended() {
		if sp.Parent().SpanID() == process.SpanContext().SpanID() {
			children[sp.Name()]++
		}
	}
	if children["complete orders"] != 1 || children["renew_message_lock orders"] < 2 {
		t.Errorf("children of the process span = %v, want one complete and at least two lock renewals", children)
	}
	for _, sp := range telemetrytest.Spans(spans, "dead_letter orders") {
		if v, _ := telemetrytest.Attr(sp, semconv.MessagingServiceBusDispositionStatusKey); v.AsString() != "dead_letter" {
			t.Errorf("dead-letter span disposition = %q", v.AsString())
		}
	}
	if n := len(telemetrytest.Spans(spans, "dead_letter orders")); n != 2 {
		t.Errorf("%d dead_letter spans, want 2", n)
	}
	receives := telemetrytest.Spans(spans, "receive orders")
	links := 0
	for _, sp := range receives {
		links += len(sp.Links())
	}
	if links != 8 {
		t.Errorf("receive spans link %d messages' creation contexts, want 8", links)
	}
}

// TestReceiverUnwraps: the telemetry's receiver says what it wraps, so that
// the worker's defaults (the drain window of the SDK's receiver) see
// through it.
func TestReceiverUnwraps(t *testing.T) {
	tel, err := otelworker.New(otelworker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inner := workertest.NewReceiver()
	u, ok := tel.Receiver(inner).(interface{ Unwrap() worker.Receiver })
	if !ok || u.Unwrap() != worker.Receiver(inner) {
		t.Errorf("Telemetry.Receiver(r) does not unwrap to r")
	}
}
