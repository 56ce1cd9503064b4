package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

// FuzzExtract feeds arbitrary application properties, as any producer may
// send, to Extract: it must never panic, and a span context it returns must
// be valid, remote, and carry the trace id written in the traceparent (or
// the Diagnostic-Id) it came from.
func FuzzExtract(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "congo=t61rcWkgMzE")
	f.Add("", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	f.Add("00-zz", "|abc.1.", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "")
	f.Fuzz(func(t *testing.T, traceparent, diagnosticID, tracestate string) {
		props := map[string]any{"tracestate": tracestate}
		if traceparent != "" {
			props[telemetry.PropertyTraceParent] = traceparent
		}
		if diagnosticID != "" {
			props[telemetry.PropertyDiagnosticID] = diagnosticID
		}
		sc := trace.SpanContextFromContext(telemetry.Extract(context.Background(), telemetry.Propagator(), props))
		if !sc.IsValid() {
			return
		}
		src := traceparent
		if src == "" {
			src = diagnosticID
		}
		if !sc.IsRemote() || !strings.Contains(strings.ToLower(src), sc.TraceID().String()) {
			t.Errorf("extracted %v from traceparent %q, Diagnostic-Id %q", sc, traceparent, diagnosticID)
		}
	})
}
