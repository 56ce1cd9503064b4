// Package telemetrytest reads what in-memory OpenTelemetry exporters
// recorded, for tests: the sums of counters and the counts of histograms
// from an sdk/metric ManualReader, filtered by attributes, and the spans
// of a tracetest.SpanRecorder by name; and Collector, an in-process
// OTLP/HTTP collector that keeps the spans, metric names and log records a
// command exports.
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Metrics is one collection of a ManualReader.
type Metrics struct{ rm metricdata.ResourceMetrics }

// Collect collects r now; the test fails if that fails.
func Collect(tb testing.TB, r *sdkmetric.ManualReader) Metrics {
	tb.Helper()
	var m Metrics
	if err := r.Collect(context.Background(), &m.rm); err != nil {
		tb.Fatalf("collecting metrics: %v", err)
	}
	return m
}

// Value returns the sum of the data points of the metric name whose
// attributes include every one of attrs: the sum of a counter, the last
// value of a gauge, or the count of a histogram. found is false when no
// metric of that name was recorded at all.
func (m Metrics) Value(name string, attrs ...attribute.KeyValue) (v float64, found bool) {
	for _, sm := range m.rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			found = true
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += float64(p.Value)
					}
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += p.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += float64(p.Value)
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += float64(p.Count)
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes, attrs) {
						v += float64(p.Count)
					}
				}
			}
		}
	}
	return v, found
}

// Int returns Value as an int64, 0 when nothing matched.
func (m Metrics) Int(name string, attrs ...attribute.KeyValue) int64 {
	v, _ := m.Value(name, attrs...)
	return int64(v)
}

// Names returns the names of every metric collected.
func (m Metrics) Names() []string {
	var names []string
	for _, sm := range m.rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			names = append(names, mt.Name)
		}
	}
	return names
}

func match(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// Spans returns the ended spans of r named name (all of them for "").
func Spans(r *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Ended() {
		if name == "" || s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attr returns the value of span s's attribute key, and whether it is set.
func Attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}
