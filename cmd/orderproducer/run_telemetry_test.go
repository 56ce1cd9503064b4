package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestRunExportsSendSpans runs the command with OTEL_EXPORTER_OTLP_ENDPOINT
// set against the test broker and checks that every message it sent
// carries, in traceparent and Diagnostic-Id, the context of a "send orders"
// span the collector received.
func TestRunExportsSendSpans(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]string{} // span id -> message id
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					for _, a := range s.Attributes {
						if s.Name == "send orders" && a.Key == "messaging.message.id" {
							sent[hex.EncodeToString(s.TraceId)+"-"+hex.EncodeToString(s.SpanId)] = a.Value.GetStringValue()
						}
					}
				}
			}
		}
	}))
	defer collector.Close()
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := map[string]string{"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}
	if err := run(ctx, []string{"-count", "3", "-progress", "never", "-log-level", "warn"}, func(k string) string { return env[k] }, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}

	sb, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	rcv, err := sb.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*azservicebus.ReceivedMessage
	for len(msgs) < 3 {
		got, err := rcv.ReceiveMessages(ctx, 3-len(msgs), nil)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got...)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range msgs {
		tp, _ := m.ApplicationProperties[telemetry.PropertyTraceParent].(string)
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || m.ApplicationProperties[telemetry.PropertyDiagnosticID] != tp {
			t.Errorf("message %s: traceparent %q, Diagnostic-Id %v", m.MessageID, tp, m.ApplicationProperties[telemetry.PropertyDiagnosticID])
			continue
		}
		if id := sent[parts[1]+"-"+parts[2]]; id != m.MessageID {
			t.Errorf("message %s: its traceparent %s names no exported send span of it (%q)", m.MessageID, tp, id)
		}
	}
}
