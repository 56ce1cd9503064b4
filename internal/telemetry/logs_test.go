package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
)

// With an OTLP endpoint the logs of the logger startup builds reach the
// collector as OpenTelemetry log records, beside the console: at the
// console's level, with their attributes and groups, and a record logged
// with a span's context carries its trace and span ids. OTEL_LOGS_EXPORTER
// =none and no endpoint export none, and then the logger is the console's
// alone.
func TestLogsReachTheCollectorWithTheTraceID(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	ctx := context.Background()
	p, err := telemetry.New(ctx, telemetry.Config{ServiceName: "svc", OTLPEndpoint: col.URL})
	if err != nil {
		t.Fatal(err)
	}
	if p.LogHandler() == nil {
		t.Fatal("no log handler with an OTLP endpoint")
	}
	var console bytes.Buffer
	proc, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "info"}, &console, startup.Options{Flush: p, LogHandler: p.LogHandler()})
	if err != nil {
		t.Fatal(err)
	}
	sctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(ctx, "process")
	proc.Logger.With("service", "a").WithGroup("g").InfoContext(sctx, "processed", "order_id", "ord-1")
	span.End()
	proc.Logger.Debug("below the level")
	proc.Logger.Warn("no span")
	proc.Close() // flushes

	if !strings.Contains(console.String(), `"msg":"processed"`) {
		t.Errorf("the console lost the line:\n%s", console.String())
	}
	recs := col.Logs("processed")
	if len(recs) != 1 {
		t.Fatalf("%d records \"processed\" of %d, want 1", len(recs), len(col.Logs("")))
	}
	r := recs[0]
	if got, want := hex.EncodeToString(r.GetTraceId()), span.SpanContext().TraceID().String(); got != want {
		t.Errorf("trace id %s, want the span's %s", got, want)
	}
	if got, want := hex.EncodeToString(r.GetSpanId()), span.SpanContext().SpanID().String(); got != want {
		t.Errorf("span id %s, want the span's %s", got, want)
	}
	if r.GetSeverityText() != "INFO" {
		t.Errorf("severity %q", r.GetSeverityText())
	}
	if v, ok := telemetrytest.LogAttr(r, "service"); !ok || v != "a" {
		t.Errorf("attribute service = %q, %v", v, ok)
	}
	if _, ok := telemetrytest.LogAttr(r, "g"); !ok {
		t.Errorf("group g missing: %v", r.GetAttributes())
	}
	if n := len(col.Logs("below the level")); n != 0 {
		t.Errorf("a debug line below LOG_LEVEL=info was exported %d times", n)
	}
	if w := col.Logs("no span"); len(w) != 1 || len(w[0].GetTraceId()) != 0 {
		t.Errorf("the line without a span: %v, want one record without a trace id", w)
	}

	for _, c := range []telemetry.Config{
		{ServiceName: "svc", OTLPEndpoint: col.URL, LogsExporter: telemetry.LogsNone},
		{ServiceName: "svc", Prometheus: true},
		{ServiceName: "svc"},
	} {
		p, err := telemetry.New(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if p.LogHandler() != nil {
			t.Errorf("%+v: a log handler, want none", c)
		}
		proc, err := startup.Start(ctx, cli.Logging{Format: "json", Level: "info"}, &console, startup.Options{LogHandler: p.LogHandler()})
		if err != nil {
			t.Fatal(err)
		}
		if _, multi := proc.Logger.Handler().(*slog.MultiHandler); multi {
			t.Errorf("%+v: the logger fans out with no logs exported", c)
		}
		_ = p.Shutdown(ctx)
	}
}

// OTEL_LOGS_EXPORTER takes otlp (with an endpoint) or none.
func TestLogsExporterSetting(t *testing.T) {
	for _, tt := range []struct {
		c    telemetry.Config
		want string // in the error; "" for none
	}{
		{telemetry.Config{ServiceName: "s", OTLPEndpoint: "http://localhost:4318", LogsExporter: "otlp"}, ""},
		{telemetry.Config{ServiceName: "s", LogsExporter: "none"}, ""},
		{telemetry.Config{ServiceName: "s", LogsExporter: "otlp"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{telemetry.Config{ServiceName: "s", OTLPEndpoint: "http://localhost:4318", LogsExporter: "console"}, `OTEL_LOGS_EXPORTER (-otel-logs-exporter) "console"`},
	} {
		err := tt.c.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: Validate = %v, want %q", tt.c, err, tt.want)
		}
	}
}
