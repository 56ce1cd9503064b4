package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// BenchmarkDeployedDelivery measures one new order through the worker as
// orderworker composes it (worker.Worker at concurrency 16, its JSON log
// line to io.Discard, order.Processor with its fact cache, cosmosstore
// against an in-process transport that accepts every batch): with
// telemetry off (none), and with the deployed traces (a 1 % trace-id
// ratio under KeptSampler, batched to an exporter that discards, no
// metrics, the worker's hook and the Azure SDK's spans), with the Store's
// untraced twin (deployed) and without it (deployed-no-twin). One op is
// one message received, stored and completed; the fake receiver and
// transport cost allocations of their own, alike in every variant.
func BenchmarkDeployedDelivery(b *testing.B) {
	for _, bc := range []struct {
		name   string
		traces bool
		twin   bool
	}{{"none", false, false}, {"deployed-no-twin", true, false}, {"deployed", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			p := telemetry.Disabled()
			if bc.traces {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
					sdktrace.WithSampler(telemetry.KeptSampler(sdktrace.TraceIDRatioBased(0.01))))
				defer tp.Shutdown(context.Background())
				p = &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: telemetry.Propagator()}
			}
			o := &cosmosstore.ClientOptions{}
			o.ClientOptions.ClientOptions = p.AzureClientOptions()
			if bc.twin {
				o.Untraced = p.AzureUntraced()
			}
			o.Transport = batchTransport{}
			o.Retry = policy.RetryOptions{MaxRetries: -1}
			c, err := cosmosstore.NewClientWithKey("https://fake.documents.azure.com:443/", "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==", o)
			if err != nil {
				b.Fatal(err)
			}
			store, err := cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath)
			if err != nil {
				b.Fatal(err)
			}
			h := order.NewProcessor(store, nil, order.WithDocuments(store), order.WithFactCache(order.DefaultFactCacheSize))

			gen := ordergen.New(1, "ord")
			r := workertest.NewReceiverSize(b.N)
			sent := time.Now()
			for i := range b.N {
				r.Send(&azservicebus.ReceivedMessage{MessageID: gen.ID(i), Body: ordergen.Body(gen.Order(i), sent, ""), DeliveryCount: 1})
			}
			var mu sync.Mutex
			n := 0
			done := make(chan struct{})
			wo := worker.Options{Concurrency: 16, RetryBackoff: -1, ReceiveDrain: -1, SummaryInterval: -1,
				KeyAttr: telemetry.WorkerKeyAttr, ResumedAttr: telemetry.WorkerResumedAttr,
				Observe: func(rep worker.Report) {
					mu.Lock()
					defer mu.Unlock()
					if rep.Result.Outcome != idempotent.Created {
						b.Errorf("%s: %v (%v), want created", rep.MessageID, rep.Result.Outcome, rep.Result.Err)
					}
					if n++; n == b.N {
						close(done)
					}
				}}
			var rcv worker.Receiver = completeOnly{r}
			if bc.traces {
				tel, err := otelworker.New(otelworker.Options{TracerProvider: p.TracerProvider, MeterProvider: p.MeterProvider,
					Propagator: p.Propagator, Queue: "orders", Names: telemetry.WorkerNames()})
				if err != nil {
					b.Fatal(err)
				}
				rcv, wo.Hook = tel.Receiver(rcv), tel
			}
			w, err := worker.New(rcv, h, slog.New(slog.NewJSONHandler(io.Discard, nil)), wo)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { ran <- w.Run(ctx) }()
			<-done
			b.StopTimer()
			cancel()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// completeOnly completes without recording the settlement.
type completeOnly struct{ *workertest.Receiver }

func (completeOnly) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return nil
}
