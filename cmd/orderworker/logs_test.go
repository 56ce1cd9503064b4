package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
)

// TestRunExportsLogsWithTheTraceID runs the command with
// OTEL_EXPORTER_OTLP_ENDPOINT set, against the test broker and cosmium, on
// one message carrying a producer's trace context: the delivery's log line
// ("processed") reaches the collector as an OpenTelemetry log record in the
// producer's trace, under the delivery's process span, with the order id;
// the console still has it. With OTEL_LOGS_EXPORTER=none no record arrives.
func TestRunExportsLogsWithTheTraceID(t *testing.T) {
	for _, logs := range []string{"", telemetry.LogsNone} {
		t.Run("OTEL_LOGS_EXPORTER="+logs, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			col := telemetrytest.StartCollector(t)
			ns := sbqueue.NewNamespace(sbqueue.RealClock())
			q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			broker := sbbroker.New(ns, sbbroker.Options{})
			if err := broker.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer broker.Close()
			cosmos := cosmiumtest.Start(t)

			pctx, send := sdktrace.NewTracerProvider().Tracer("producer").Start(ctx, "send orders")
			send.End()
			props := map[string]any{}
			telemetry.Inject(pctx, telemetry.Propagator(), props)
			o := ordergen.New(1, "ord-logs").Order(0)
			sb, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close(context.Background())
			sender, err := sb.NewSender("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &o.OrderID, Body: ordergen.Body(o, time.Now(), "t"), ApplicationProperties: props}, nil); err != nil {
				t.Fatal(err)
			}

			env := map[string]string{
				"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders", "SERVICEBUS_LOCK_DURATION": "5s",
				"COSMOS_ENDPOINT": cosmos.Endpoint, "COSMOS_KEY": cosmos.Key, "COSMOS_CREATE_CONTAINER": "true",
				"LOG_FORMAT": "json", "OTEL_EXPORTER_OTLP_ENDPOINT": col.URL, "OTEL_LOGS_EXPORTER": logs,
			}
			runCtx, stop := context.WithCancel(ctx)
			var stderr syncBuffer
			ran := make(chan error, 1)
			go func() { ran <- run(runCtx, nil, envOf(env), io.Discard, &stderr) }()
			for q.Snapshot().Counters.Completed < 1 {
				select {
				case err := <-ran:
					t.Fatalf("run returned early: %v\n%s", err, stderr.String())
				case <-ctx.Done():
					t.Fatalf("the message was not completed: %v\n%s", ctx.Err(), stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
			}
			stop()
			if err := <-ran; err != nil { // flushes the logs
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			if !bytes.Contains([]byte(stderr.String()), []byte(`"msg":"processed"`)) {
				t.Errorf("the console has no processed line:\n%s", stderr.String())
			}
			recs := col.Logs("processed")
			if logs == telemetry.LogsNone {
				if n := len(col.Logs("")); n != 0 {
					t.Errorf("%d log records exported with OTEL_LOGS_EXPORTER=none", n)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d processed records among %d, want 1", len(recs), len(col.Logs("")))
			}
			r := recs[0]
			traceID := send.SpanContext().TraceID()
			if !bytes.Equal(r.GetTraceId(), traceID[:]) {
				t.Errorf("processed record's trace id %x, want the producer's %s", r.GetTraceId(), traceID)
			}
			var process bool
			for _, s := range col.Spans() {
				if s.Name == "process orders" && bytes.Equal(s.SpanId, r.GetSpanId()) {
					process = true
				}
			}
			if !process {
				t.Errorf("processed record's span id %x is not the process span's", r.GetSpanId())
			}
			if v, ok := telemetrytest.LogAttr(r, "order_id"); !ok || v != o.OrderID {
				t.Errorf("order_id = %q, %v; want %s", v, ok, o.OrderID)
			}
		})
	}
}
