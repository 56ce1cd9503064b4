package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// TestTraceAcrossProducerWorkerStoreAndPayments sends a known mix of
// messages with the producer's send path to the test broker, runs the
// worker on them against cosmium and the payments service, all instrumented
// as cmd/orderworker and test/paymentservice/cmd/paymentservice instrument them, with in-memory
// exporters, and checks that each created order is one trace (producer send
// → worker process → Cosmos DB spans and payments client → payments server)
// and that the metrics count the mix.
func TestTraceAcrossProducerWorkerStoreAndPayments(t *testing.T) {
	n := telemetry.WorkerNames() // orderworker's
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel := &telemetry.Providers{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Propagator:     telemetry.Propagator(),
	}

	const lock = 5 * time.Second
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: lock}); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	cosmos := cosmiumtest.Start(t)

	// The payments service as test/paymentservice/cmd/paymentservice serves it.
	svc := paymentservice.NewService(nil)
	paySrv := httptest.NewServer(tel.HTTPHandler(svc, "payments", payments.HeaderIdempotencyKey))
	t.Cleanup(paySrv.Close)

	// The store and the handler as cmd/orderworker builds them.
	copts := &cosmosstore.ClientOptions{}
	copts.ClientOptions.ClientOptions = tel.AzureClientOptions()
	client, err := cosmosstore.NewClientWithKey(cosmos.Endpoint, cosmos.Key, copts)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := payments.NewClient(paySrv.URL, &payments.ClientOptions{HTTPClient: &http.Client{Transport: tel.HTTPTransport(nil, payments.HeaderIdempotencyKey)}})
	if err != nil {
		t.Fatal(err)
	}
	h := order.NewProcessor(store, nil, order.WithDocuments(store), order.WithPaymentOptions(order.PaymentOptions{
		Gateway: payments.Gateway{Client: pc}, Lease: lock, Owner: "w1", KeyRetention: payments.DefaultKeyRetention}))

	sb, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	receiver, err := sb.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reports []worker.Report
	settled := make(chan struct{}, 100)
	wt, err := otelworker.New(otelworker.Options{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider, Propagator: tel.Propagator, Queue: "orders",
		Names: n, RequestCharge: store.RequestCharge})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(wt.Receiver(receiver), h, nil, worker.Options{
		LockDuration: lock, SummaryInterval: -1, RequestCharge: store.RequestCharge, Hook: wt,
		Observe: func(r worker.Report) {
			mu.Lock()
			reports = append(reports, r)
			mu.Unlock()
			settled <- struct{}{}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	// The mix: three orders and a malformed message, then, once they are
	// settled, a byte-for-byte resend of the first and the second's id
	// with other content.
	now := time.Now().UTC()
	g := ordergen.New(1, "ord-tel")
	var first []outgoing
	var orders []order.Order
	for i := range 3 {
		o := g.Order(i)
		orders = append(orders, o)
		first = append(first, outgoing{id: o.OrderID, body: ordergen.Body(o, now, "t"), kind: original})
	}
	first = append(first, outgoing{id: "ord-tel-bad", body: ordergen.Malformed("ord-tel-bad", 1), kind: malformed})
	second := []outgoing{
		{id: orders[0].OrderID, body: first[0].body, kind: duplicate},
		{id: orders[1].OrderID, body: ordergen.Body(ordergen.Changed(orders[1]), now, "reused"), kind: reused},
	}
	sender, err := sb.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := newSendTracing(tel, "orders")
	waitSettled := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-settled:
			case <-ctx.Done():
				t.Fatalf("waiting for %d settlements: %v", n, ctx.Err())
			}
		}
	}
	if _, err := sendAll(ctx, sbSender{sender}, tr, first, 100, func(int) {}); err != nil {
		t.Fatal(err)
	}
	waitSettled(len(first))
	if _, err := sendAll(ctx, sbSender{sender}, tr, second, 100, func(int) {}); err != nil {
		t.Fatal(err)
	}
	waitSettled(len(second))
	stopWorker()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	sender.Close(ctx)
	receiver.Close(ctx)

	for _, r := range reports {
		if r.SettleErr != nil || r.LockLost {
			t.Errorf("report %+v: want every delivery settled", r)
		}
	}

	// The span tree of the first order: one trace from the producer's send.
	ended := spans.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ended {
		byID[s.SpanContext().SpanID()] = s
	}
	descends := func(s sdktrace.ReadOnlySpan, ancestor trace.SpanID) bool {
		for p := s.Parent().SpanID(); p.IsValid(); {
			if p == ancestor {
				return true
			}
			next, ok := byID[p]
			if !ok {
				return false
			}
			p = next.Parent().SpanID()
		}
		return false
	}
	withMessage := func(name, id string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range telemetrytest.Spans(spans, name) {
			if v, _ := telemetrytest.Attr(s, semconv.MessagingMessageIDKey); v.AsString() == id {
				out = append(out, s)
			}
		}
		return out
	}
	for i, o := range orders {
		sends := withMessage("send orders", o.OrderID)
		wantSends := 1
		if i < 2 {
			wantSends = 2 // the resend and the reused id
		}
		if len(sends) != wantSends {
			t.Fatalf("order %s: %d send spans, want %d", o.OrderID, len(sends), wantSends)
		}
		send := sends[0]
		if send.SpanKind() != trace.SpanKindProducer || send.Parent().IsValid() {
			t.Errorf("send span kind %v, parent %v: want a producer span starting the trace", send.SpanKind(), send.Parent())
		}
		var process sdktrace.ReadOnlySpan
		for _, p := range withMessage("process orders", o.OrderID) {
			if p.Parent().SpanID() == send.SpanContext().SpanID() {
				process = p
			}
		}
		if process == nil {
			t.Fatalf("order %s: no process span whose parent is the first send span", o.OrderID)
		}
		if v, _ := telemetrytest.Attr(process, n.Outcome); v.AsString() != "created" {
			t.Errorf("order %s: the first delivery's outcome %q, want created", o.OrderID, v.AsString())
		}
		traceID := send.SpanContext().TraceID()
		var cosmosSpans, payClient, payServer, complete int
		for _, s := range ended {
			if s.SpanContext().TraceID() != traceID || !descends(s, process.SpanContext().SpanID()) {
				continue
			}
			if v, _ := telemetrytest.Attr(s, "db.system"); v.AsString() == "cosmosdb" {
				cosmosSpans++
			}
			key, hasKey := telemetrytest.Attr(s, "http.request.header.idempotency-key")
			if hasKey && (len(key.AsStringSlice()) != 1 || key.AsStringSlice()[0] != order.PaymentKey(o.OrderID)) {
				t.Errorf("order %s: span %q shows Idempotency-Key %v, want %s", o.OrderID, s.Name(), key.AsStringSlice(), order.PaymentKey(o.OrderID))
			}
			switch {
			case hasKey && s.SpanKind() == trace.SpanKindClient:
				payClient++
			case hasKey && s.SpanKind() == trace.SpanKindServer:
				payServer++
				if parent, ok := byID[s.Parent().SpanID()]; !ok || parent.SpanKind() != trace.SpanKindClient {
					t.Errorf("order %s: the payments server span's parent is not the client span", o.OrderID)
				}
			case s.Name() == "complete orders":
				complete++
			}
		}
		if cosmosSpans == 0 || payClient != 1 || payServer != 1 || complete != 1 {
			names := []string{}
			for _, s := range ended {
				if s.SpanContext().TraceID() == traceID {
					names = append(names, fmt.Sprintf("%s(%v)", s.Name(), s.SpanKind()))
				}
			}
			t.Errorf("order %s: under the process span %d Cosmos DB spans, %d payments client and %d server spans, %d completes; want some, 1, 1, 1; trace: %s",
				o.OrderID, cosmosSpans, payClient, payServer, complete, strings.Join(names, " "))
		}
	}

	m := telemetrytest.Collect(t, reader)
	outcome := func(o string) attribute.KeyValue { return n.Outcome.String(o) }
	for _, c := range []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{otelworker.MetricConsumed, nil, 6},
		{n.Deliveries, nil, 6},
		{n.Deliveries, []attribute.KeyValue{outcome("created")}, 3},
		{n.Deliveries, []attribute.KeyValue{outcome("duplicate")}, 1},
		{n.Deliveries, []attribute.KeyValue{outcome("mismatch"), n.Reason.String(order.ReasonOrderIDReused)}, 1},
		{n.Deliveries, []attribute.KeyValue{outcome("invalid"), n.Reason.String(idempotent.ReasonInvalidMessage)}, 1},
		{n.Duplicates, []attribute.KeyValue{n.DuplicateCause.String("resend")}, 1},
		{n.Duplicates, []attribute.KeyValue{n.DuplicateCause.String("redelivery")}, 0},
		{n.Mismatches, nil, 1},
		{n.DeadLetters, nil, 2},
		{n.DeadLetters, []attribute.KeyValue{n.Reason.String(order.ReasonOrderIDReused)}, 1},
		{n.SettlementFailures, nil, 0},
		{otelworker.MetricProcessDuration, nil, 6},
		{n.InFlight, nil, 0},
	} {
		if got := m.Int(c.name, c.attrs...); got != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.attrs, got, c.want)
		}
	}
	// cosmium sends no x-ms-request-charge header, so the request-charge
	// metrics stay empty here (internal/telemetry's tests feed the policy
	// real charges); the store's total is still observed.
	if _, found := m.Value(n.RequestUnits); !found {
		t.Errorf("%s not observed", n.RequestUnits)
	}
	for _, name := range []string{"http.client.request.duration", "http.server.request.duration"} {
		if n := m.Int(name); n < 3 {
			t.Errorf("%s counts %d requests, want at least the 3 captures", name, n)
		}
	}
}
