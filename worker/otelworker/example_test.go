package otelworker_test

import (
	"context"
	"fmt"
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// ExampleNew records a worker's metrics under the deployment's prefixes:
// the Telemetry wraps the receiver and is the worker's Hook.
func ExampleNew() {
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("invoices", sbqueue.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := q.Send(context.Background(), sbqueue.Message{MessageID: id}); err != nil {
			log.Fatal(err)
		}
	}
	reader := sdkmetric.NewManualReader()
	names := otelworker.PrefixedNames("invoiceworker", "invoice")
	tel, err := otelworker.New(otelworker.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Queue:         "invoices",
		Names:         names,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var w *worker.Worker
	w, err = worker.New(tel.Receiver(q.NewReceiver()), worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	}), nil, worker.Options{
		SummaryInterval: -1,
		Hook:            tel,
		Observe: func(worker.Report) {
			if w.Stats().Processed() == 2 {
				cancel()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == names.Deliveries {
				for _, dp := range sum.DataPoints {
					outcome, _ := dp.Attributes.Value(names.Outcome)
					fmt.Println(m.Name, names.Outcome, outcome.AsString(), dp.Value)
				}
			}
		}
	}
	// Output:
	// invoiceworker.deliveries invoice.outcome created 2
}
