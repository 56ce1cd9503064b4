package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/payments"
)

// TestRunTracesRequests runs the service with OTEL_EXPORTER_OTLP_ENDPOINT
// set and a client instrumented as the worker's is, and checks that the
// collector receives the server span of the capture as the child of the
// client's span, with the Idempotency-Key.
func TestRunTracesRequests(t *testing.T) {
	var mu sync.Mutex
	var spans []*tracepb.Span
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" {
			return // metrics
		}
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}))
	defer collector.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdoutR, stdoutW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-log-format", "json"}, env(map[string]string{"PAYMENTS_ADDR": "127.0.0.1:0", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}), stdoutW, &stderr)
		stdoutW.Close()
	}()
	out := bufio.NewScanner(stdoutR)
	if !out.Scan() {
		t.Fatalf("no output; run returned %v; stderr:\n%s", <-done, stderr.String())
	}
	base, _ := strings.CutPrefix(out.Text(), "paymentservice listening on ")
	go io.Copy(io.Discard, stdoutR)

	clientSpans := sdktrace.NewTracerProvider()
	tel := &telemetry.Providers{TracerProvider: clientSpans, MeterProvider: telemetry.Disabled().MeterProvider, Propagator: telemetry.Propagator()}
	client, err := payments.NewClient(base, &payments.ClientOptions{HTTPClient: &http.Client{Transport: tel.HTTPTransport(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, parent := clientSpans.Tracer("t").Start(ctx, "process orders")
	if _, err := client.Capture(pctx, payments.KeyFor("ord-1"), payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 100, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return within a minute of the cancellation")
	}

	mu.Lock()
	defer mu.Unlock()
	traceID := parent.SpanContext().TraceID()
	var found bool
	for _, s := range spans {
		if s.Kind != tracepb.Span_SPAN_KIND_SERVER || !bytes.Equal(s.TraceId, traceID[:]) {
			continue
		}
		found = true
		var key string
		for _, a := range s.Attributes {
			if a.Key == "http.request.header.idempotency-key" {
				if v := a.Value.GetArrayValue().GetValues(); len(v) == 1 {
					key = v[0].GetStringValue()
				}
			}
		}
		if key != payments.KeyFor("ord-1") {
			t.Errorf("server span %q shows Idempotency-Key %q, want %q", s.Name, key, payments.KeyFor("ord-1"))
		}
		if sid := parent.SpanContext().SpanID(); len(s.ParentSpanId) != 8 || bytes.Equal(s.ParentSpanId, sid[:]) {
			t.Errorf("server span's parent %x: want the client's HTTP span, a child of %s", s.ParentSpanId, sid)
		}
	}
	if !found {
		t.Errorf("no server span in the caller's trace %s among %d spans", traceID, len(spans))
	}
}
