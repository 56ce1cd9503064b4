package otelworker_test

import (
	"context"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// BenchmarkTelemetry measures one delivery through the worker (receive,
// handle, complete) against the fake receiver, with telemetry off (no
// Telemetry: the worker alone), with the SDK's providers recording
// every span and metric in memory, and with every trace dropped by the
// sampler (the metrics still recorded).
func BenchmarkTelemetry(b *testing.B) {
	for _, bc := range []struct {
		name string
		tel  func() *otelworker.Options
	}{
		{"off", func() *otelworker.Options { return nil }},
		{"sdk", func() *otelworker.Options {
			return &otelworker.Options{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{})),
				MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				Queue:          "orders",
			}
		}},
		// A ratio of 0: every trace dropped at its start, as 99 in 100
		// are at the deployment's ratio of 0.01; the metrics recorded.
		{"sdk-dropped", func() *otelworker.Options {
			return &otelworker.Options{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}),
					sdktrace.WithSampler(keptSampler{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))})),
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				Queue:         "orders",
			}
		}},
		// As deployed: nine in ten traces dropped, and no metrics (no
		// MeterProvider: the deployment exports none).
		{"sdk-dropped-nometrics", func() *otelworker.Options {
			return &otelworker.Options{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}),
					sdktrace.WithSampler(keptSampler{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))})),
				Queue: "orders",
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := workertest.NewReceiverSize(b.N)
			for range b.N {
				r.Send(&azservicebus.ReceivedMessage{MessageID: "m", Body: []byte("m"), DeliveryCount: 1})
			}
			done := make(chan struct{})
			n := 0
			h := worker.HandlerFunc(func(context.Context, idempotent.Message) idempotent.Result {
				return idempotent.Result{Outcome: idempotent.Created, Key: "m"}
			})
			var rcv worker.Receiver = telemetryBenchReceiver{r}
			o := worker.Options{Concurrency: 8, RetryBackoff: -1, ReceiveDrain: -1, SummaryInterval: -1,
				Observe: func(worker.Report) {
					benchMu.Lock()
					n++
					if n == b.N {
						close(done)
					}
					benchMu.Unlock()
				}}
			if to := bc.tel(); to != nil {
				tel, err := otelworker.New(*to)
				if err != nil {
					b.Fatal(err)
				}
				rcv, o.Hook = tel.Receiver(rcv), tel
			}
			w, err := worker.New(rcv, h, nil, o)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			<-done
			b.StopTimer()
			cancel()
			<-ran
		})
	}
}

// telemetryBenchReceiver completes without recording, so that the benchmark
// measures the worker.
type telemetryBenchReceiver struct{ *workertest.Receiver }

var benchMu sync.Mutex

func (telemetryBenchReceiver) CompleteMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.CompleteMessageOptions) error {
	return nil
}

type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
