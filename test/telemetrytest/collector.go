package telemetrytest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an in-process OTLP/HTTP collector (http/protobuf): it keeps
// the spans, the names of the metrics and the log records it receives on
// /v1/traces, /v1/metrics and /v1/logs. Point OTEL_EXPORTER_OTLP_ENDPOINT at
// URL. It is safe for concurrent use.
type Collector struct {
	// URL is the collector's base URL, such as http://127.0.0.1:41234.
	URL string

	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics map[string]bool
	logs    []*logspb.LogRecord
}

// StartCollector starts a Collector on a loopback port; it stops when the
// test ends.
func StartCollector(tb testing.TB) *Collector {
	tb.Helper()
	c := &Collector{metrics: map[string]bool{}}
	srv := httptest.NewServer(c)
	tb.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// ServeHTTP receives one OTLP/HTTP export request.
func (c *Collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg proto.Message
	switch r.URL.Path {
	case "/v1/traces":
		msg = &colltrace.ExportTraceServiceRequest{}
	case "/v1/metrics":
		msg = &collmetrics.ExportMetricsServiceRequest{}
	case "/v1/logs":
		msg = &collogs.ExportLogsServiceRequest{}
	default:
		http.NotFound(w, r)
		return
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	switch req := msg.(type) {
	case *colltrace.ExportTraceServiceRequest:
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
	case *collmetrics.ExportMetricsServiceRequest:
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					c.metrics[m.Name] = true
				}
			}
		}
	case *collogs.ExportLogsServiceRequest:
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				c.logs = append(c.logs, sl.LogRecords...)
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// MetricNames returns the names of the metrics received so far.
func (c *Collector) MetricNames() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.metrics))
	for k := range c.metrics {
		out[k] = true
	}
	return out
}

// Logs returns the log records received so far whose body is the string
// body (all of them for "").
func (c *Collector) Logs(body string) []*logspb.LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*logspb.LogRecord
	for _, l := range c.logs {
		if body == "" || l.GetBody().GetStringValue() == body {
			out = append(out, l)
		}
	}
	return out
}

// LogAttr returns the string form of the attribute key of log record l, and
// whether it is set.
func LogAttr(l *logspb.LogRecord, key string) (string, bool) {
	for _, kv := range l.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			if _, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
				return v.GetStringValue(), true
			}
			return v.String(), true
		}
	}
	return "", false
}
