package bench_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	colllogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// otlpCollector is an OTLP/gRPC collector in the benchmark's process, the
// stand-in for the Container Apps managed OpenTelemetry agent: it accepts
// every export and counts what arrived (spans, log records, metric data
// points), so that a benchmark can say what a consumer still sends.
type otlpCollector struct {
	addr string
	srv  *grpc.Server

	spans, logs, points atomic.Int64
}

// otlpCounts is what an otlpCollector had received at one moment.
type otlpCounts struct{ spans, logs, points int64 }

func (c *otlpCollector) counts() otlpCounts {
	return otlpCounts{c.spans.Load(), c.logs.Load(), c.points.Load()}
}

// startOTLPCollector starts a collector on a loopback port until the test
// ends.
func startOTLPCollector(tb testing.TB) *otlpCollector {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c := &otlpCollector{addr: lis.Addr().String(), srv: grpc.NewServer()}
	colltrace.RegisterTraceServiceServer(c.srv, traceService{c: c})
	collmetrics.RegisterMetricsServiceServer(c.srv, metricsService{c: c})
	colllogs.RegisterLogsServiceServer(c.srv, logsService{c: c})
	go c.srv.Serve(lis)
	tb.Cleanup(c.srv.Stop)
	return c
}

// endpoint is the collector as the agent injects its address: a URL
// whose host and port the gRPC exporters take.
func (c *otlpCollector) endpoint() string { return "http://" + c.addr + "/" }

type traceService struct {
	colltrace.UnimplementedTraceServiceServer
	c *otlpCollector
}

func (s traceService) Export(_ context.Context, r *colltrace.ExportTraceServiceRequest) (*colltrace.ExportTraceServiceResponse, error) {
	n := 0
	for _, rs := range r.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	s.c.spans.Add(int64(n))
	return &colltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	collmetrics.UnimplementedMetricsServiceServer
	c *otlpCollector
}

func (s metricsService) Export(_ context.Context, r *collmetrics.ExportMetricsServiceRequest) (*collmetrics.ExportMetricsServiceResponse, error) {
	n := 0
	for _, rm := range r.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				n += len(m.GetSum().GetDataPoints()) + len(m.GetGauge().GetDataPoints()) + len(m.GetHistogram().GetDataPoints())
			}
		}
	}
	s.c.points.Add(int64(n))
	return &collmetrics.ExportMetricsServiceResponse{}, nil
}

type logsService struct {
	colllogs.UnimplementedLogsServiceServer
	c *otlpCollector
}

func (s logsService) Export(_ context.Context, r *colllogs.ExportLogsServiceRequest) (*colllogs.ExportLogsServiceResponse, error) {
	n := 0
	for _, rl := range r.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			n += len(sl.GetLogRecords())
		}
	}
	s.c.logs.Add(int64(n))
	return &colllogs.ExportLogsServiceResponse{}, nil
}
