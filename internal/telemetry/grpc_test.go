package telemetry_test

import (
	"context"
	"flag"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
)

// grpcCollector is an OTLP/gRPC collector in the test process: it records
// the names of the spans and metrics it receives, with the service.name of
// their resources, and answers as a collector that accepted everything.
type grpcCollector struct {
	colltrace.UnimplementedTraceServiceServer
	collmetrics.UnimplementedMetricsServiceServer

	mu      sync.Mutex
	spans   map[string]string // span name → service.name
	metrics map[string]string // metric name → service.name
}

func (c *grpcCollector) Export(_ context.Context, r *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range r.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans[s.GetName()] = serviceName(rs.GetResource())
			}
		}
	}
	return &colltrace.ExportTraceServiceResponse{}, nil
}

// metricsService adapts the collector to the metrics service, whose Export
// method has the same name as the trace service's.
type metricsService struct{ *grpcCollector }

func (m metricsService) Export(_ context.Context, r *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rm := range r.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				m.metrics[mt.GetName()] = serviceName(rm.GetResource())
			}
		}
	}
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

func serviceName(r *resourcepb.Resource) string {
	for _, kv := range r.GetAttributes() {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestOTLPExportGRPC exports through New's exporters with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, as the Azure Container Apps agent sets
// it, to a gRPC collector at an endpoint spelled as the agent injects it
// (http://host:port/), and checks that Shutdown flushes the span and the
// metric to it.
func TestOTLPExportGRPC(t *testing.T) {
	c, endpoint := startGRPCCollector(t)

	p, err := telemetry.New(context.Background(), telemetry.Config{
		ServiceName: "orderworker", OTLPEndpoint: endpoint, OTLPProtocol: telemetry.ProtocolGRPC,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("t").Start(context.Background(), "process orders")
	span.End()
	counter, _ := p.MeterProvider.Meter("t").Int64Counter(telemetry.WorkerNames().Deliveries, metric.WithUnit("{delivery}"))
	counter.Add(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := c.spans["process orders"]; got != "orderworker" {
		t.Errorf("the collector received spans %v: want \"process orders\" of service orderworker", c.spans)
	}
	if got := c.metrics[telemetry.WorkerNames().Deliveries]; got != "orderworker" {
		t.Errorf("the collector received metrics %v: want %s of service orderworker", c.metrics, telemetry.WorkerNames().Deliveries)
	}
}

// TestOTLPMetricsExporterNone exports with OTEL_METRICS_EXPORTER=none, as
// the Azure deployment sets it (its OpenTelemetry agent has no metrics
// destination): the span reaches the collector, no metric does.
func TestOTLPMetricsExporterNone(t *testing.T) {
	c, endpoint := startGRPCCollector(t)

	cfg := parseTelemetry(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_METRICS_EXPORTER":       "none",
	})
	p, err := telemetry.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("t").Start(context.Background(), "process orders")
	span.End()
	counter, _ := p.MeterProvider.Meter("t").Int64Counter(telemetry.WorkerNames().Deliveries, metric.WithUnit("{delivery}"))
	counter.Add(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.spans["process orders"]; !ok {
		t.Errorf("the collector received spans %v, want \"process orders\"", c.spans)
	}
	if len(c.metrics) != 0 {
		t.Errorf("the collector received metrics %v with OTEL_METRICS_EXPORTER=none", c.metrics)
	}
	if err := (&telemetry.Config{MetricsExporter: "prometheus"}).Validate(); err == nil || !strings.Contains(err.Error(), "OTEL_METRICS_EXPORTER") {
		t.Errorf("Validate(MetricsExporter prometheus) = %v, want an error naming OTEL_METRICS_EXPORTER", err)
	}
}

// TestOTLPProtocolSetting reads OTEL_EXPORTER_OTLP_PROTOCOL as the commands
// do: http/protobuf by default, grpc when set, and anything else refused
// with the variable named.
func TestOTLPProtocolSetting(t *testing.T) {
	tests := []struct {
		env     string
		want    string
		wantErr bool
	}{
		{"", telemetry.ProtocolHTTPProtobuf, false},
		{"grpc", telemetry.ProtocolGRPC, false},
		{"http/protobuf", telemetry.ProtocolHTTPProtobuf, false},
		{"http/json", "", true},
		{"GRPC", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			c := parseTelemetry(t, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": tt.env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel.service.k8se-apps:4317/"})
			err := c.Validate()
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
					t.Fatalf("Validate = %v, want an error naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
				}
				return
			}
			if err != nil || c.Protocol() != tt.want {
				t.Fatalf("Protocol() %q, Validate %v; want %q and no error", c.Protocol(), err, tt.want)
			}
		})
	}
}

// parseTelemetry defines the settings on a flag set and parses env.
func parseTelemetry(t *testing.T, env map[string]string) telemetry.Config {
	t.Helper()
	var c telemetry.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	e := cli.NewEnv(fs, func(k string) string { return env[k] })
	c.Define(e, "orderworker", "")
	if err := e.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// startGRPCCollector starts a gRPC collector of traces and metrics,
// stopped when the test ends, and returns it with its endpoint as the
// OpenTelemetry agent injects one.
func startGRPCCollector(t *testing.T) (*grpcCollector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &grpcCollector{spans: map[string]string{}, metrics: map[string]string{}}
	srv := grpc.NewServer()
	colltrace.RegisterTraceServiceServer(srv, c)
	collmetrics.RegisterMetricsServiceServer(srv, metricsService{c})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return c, "http://" + lis.Addr().String() + "/"
}
