package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// otlpCollector is a fake OTLP/HTTP collector that keeps what it receives.
type otlpCollector struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics map[string]bool // metric names received
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
	case "/v1/metrics":
		var req collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					c.metrics[m.Name] = true
				}
			}
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestRunExportsTelemetry runs the command itself with
// OTEL_EXPORTER_OTLP_ENDPOINT set, against the test broker, cosmium and a
// payments service, on one message carrying a producer's trace context, and
// checks what reaches the collector when run returns: the process spans in
// the producer's trace, the Cosmos DB SDK's spans and the payments client's
// span beneath it, and the worker's metrics. A second copy of the message,
// handled after the first (WORKER_CONCURRENCY=1), is answered by the fact
// cache: the cache's metrics are exported, and the final summary counts one
// miss and one hit.
func TestRunExportsTelemetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	col := &otlpCollector{metrics: map[string]bool{}}
	collector := httptest.NewServer(col)
	defer collector.Close()

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
	pay := httptest.NewServer(paymentservice.NewService(nil))
	defer pay.Close()

	// A producer's span, its context in the message.
	pctx, send := sdktrace.NewTracerProvider().Tracer("producer").Start(ctx, "send orders")
	send.End()
	props := map[string]any{}
	telemetry.Inject(pctx, telemetry.Propagator(), props)
	o := ordergen.New(1, "ord-run").Order(0)
	sb, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	sender, err := sb.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // two copies: the queue has no duplicate detection
		if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &o.OrderID, Body: ordergen.Body(o, time.Now(), "t"), ApplicationProperties: props}, nil); err != nil {
			t.Fatal(err)
		}
	}

	env := map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders", "SERVICEBUS_LOCK_DURATION": "5s",
		"COSMOS_ENDPOINT": cosmos.Endpoint, "COSMOS_KEY": cosmos.Key, "COSMOS_CREATE_CONTAINER": "true",
		"PAYMENTS_URL": pay.URL, "LOG_FORMAT": "json", "LOG_LEVEL": "info", "WORKER_CONCURRENCY": "1",
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL,
	}
	runCtx, stop := context.WithCancel(ctx)
	var stderr syncBuffer
	ran := make(chan error, 1)
	go func() { ran <- run(runCtx, nil, envOf(env), io.Discard, &stderr) }()
	for q.Snapshot().Counters.Completed < 2 {
		select {
		case err := <-ran:
			t.Fatalf("run returned early: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("the message was not completed: %v\n%s", ctx.Err(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}

	var final struct {
		Duplicate int64 `json:"duplicate"`
		Cache     *struct {
			Hits, Misses uint64
		} `json:"cache"`
	}
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, `"msg":"final summary"`) {
			if err := json.Unmarshal([]byte(line), &final); err != nil {
				t.Fatalf("final summary %s: %v", line, err)
			}
		}
	}
	if final.Cache == nil || final.Cache.Hits != 1 || final.Cache.Misses != 1 || final.Duplicate != 1 {
		t.Errorf("final summary: %d duplicate, cache %+v; want the second copy a duplicate the cache answered (1 hit, 1 miss)\n%s", final.Duplicate, final.Cache, stderr.String())
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	traceID := send.SpanContext().TraceID()
	byID := map[string]*tracepb.Span{}
	process := map[*tracepb.Span]bool{} // both copies' process spans
	for _, s := range col.spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		if s.Name == "process orders" && bytes.Equal(s.TraceId, traceID[:]) {
			process[s] = true
		}
	}
	if len(process) != 2 {
		t.Fatalf("%d process spans in the producer's trace %s among %d spans, want one per copy", len(process), traceID, len(col.spans))
	}
	for p := range process {
		if sid := send.SpanContext().SpanID(); !bytes.Equal(p.ParentSpanId, sid[:]) {
			t.Errorf("process span's parent %x, want the producer's span %s", p.ParentSpanId, sid)
		}
	}
	under := func(s *tracepb.Span) bool {
		for p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil; p = byID[hex.EncodeToString(p.ParentSpanId)] {
			if process[p] {
				return true
			}
		}
		return false
	}
	var cosmosSpans, payClient int
	for _, s := range col.spans {
		if !under(s) {
			continue
		}
		for _, a := range s.Attributes {
			switch {
			case a.Key == "db.system" && a.Value.GetStringValue() == "cosmosdb":
				cosmosSpans++
			case a.Key == "http.request.header.idempotency-key":
				payClient++
			}
		}
	}
	if cosmosSpans == 0 || payClient != 1 {
		t.Errorf("under the process spans: %d Cosmos DB spans and %d payments client spans, want some and 1 (the second copy calls neither)", cosmosSpans, payClient)
	}
	for _, name := range []string{"orderworker.deliveries", "messaging.process.duration", "messaging.client.consumed.messages",
		"orderworker.cosmosdb.request_units", "http.client.request.duration", "orderworker.cache.hits", "orderworker.cache.misses"} {
		if !col.metrics[name] {
			t.Errorf("the collector received no %s; it received %v", name, keys(col.metrics))
		}
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, " ")
}
