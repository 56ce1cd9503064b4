package telemetry_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

func TestInjectExtract(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "send")
	defer span.End()
	want := span.SpanContext()
	prop := telemetry.Propagator()

	props := map[string]any{"other": 42}
	telemetry.Inject(ctx, prop, props)
	tp0, _ := props[telemetry.PropertyTraceParent].(string)
	if !strings.Contains(tp0, want.TraceID().String()) || props[telemetry.PropertyDiagnosticID] != tp0 {
		t.Fatalf("properties = %v: want traceparent with trace %s, and Diagnostic-Id equal to it", props, want.TraceID())
	}
	onlyDiagnostic := map[string]any{telemetry.PropertyDiagnosticID: tp0}

	tests := []struct {
		name  string
		props map[string]any
		valid bool
	}{
		{"traceparent", props, true},
		{"Diagnostic-Id only, as other Azure SDKs may send", onlyDiagnostic, true},
		{"none", nil, false},
		{"not a string", map[string]any{telemetry.PropertyTraceParent: 7}, false},
		{"garbage", map[string]any{telemetry.PropertyTraceParent: "00-zz"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), prop, tt.props))
			if got.IsValid() != tt.valid {
				t.Fatalf("extracted %v, valid %v; want valid %v", got, got.IsValid(), tt.valid)
			}
			if tt.valid && (got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsRemote()) {
				t.Errorf("extracted %v, want the remote %v", got, want)
			}
		})
	}
}

func TestDisabledRecordsNothing(t *testing.T) {
	p, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || p.MetricsHandler() != nil {
		t.Errorf("Enabled %v, MetricsHandler %v: want nothing without a setting", p.Enabled(), p.MetricsHandler())
	}
	if o := p.AzureClientOptions(); o.TracingProvider.NewTracer("azcosmos", "v1").Enabled() || len(o.PerRetryPolicies) != 0 {
		t.Errorf("AzureClientOptions = %+v, want the zero options", o)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		c       telemetry.Config
		wantErr []string
	}{
		{telemetry.Config{}, nil},
		{telemetry.Config{ServiceName: "w", OTLPEndpoint: "http://collector:4318"}, nil},
		{telemetry.Config{ServiceName: "w", OTLPEndpoint: "collector:4318"}, []string{"OTEL_EXPORTER_OTLP_ENDPOINT"}},
		{telemetry.Config{Prometheus: true}, []string{"OTEL_SERVICE_NAME"}},
		{telemetry.Config{OTLPEndpoint: "ftp://x"}, []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"}},
	}
	for _, tt := range tests {
		err := tt.c.Validate()
		if (err != nil) != (len(tt.wantErr) > 0) {
			t.Errorf("%+v: Validate = %v, want errors naming %v", tt.c, err, tt.wantErr)
			continue
		}
		for _, w := range tt.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q does not name %s", tt.c, err, w)
			}
		}
	}
}

// TestPrometheusNames serves the metrics as cmd/orderworker does with
// WORKER_METRICS_PROMETHEUS=true and checks the names a scrape shows, which
// the README lists.
func TestPrometheusNames(t *testing.T) {
	p, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "orderworker", Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	m := p.MeterProvider.Meter("t")
	c, _ := m.Int64Counter(telemetry.WorkerNames().Deliveries, metric.WithUnit("{delivery}"))
	c.Add(context.Background(), 2, metric.WithAttributes(telemetry.WorkerNames().Outcome.String("created")))
	h, _ := m.Float64Histogram(otelworker.MetricProcessDuration, metric.WithUnit("s"))
	h.Record(context.Background(), 0.2)
	r, _ := m.Float64Histogram(telemetry.RequestChargeMetric, metric.WithUnit("{request_unit}"))
	r.Record(context.Background(), 5.71)

	srv := httptest.NewServer(p.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`orderworker_deliveries_total{`, `order_outcome="created"`,
		`messaging_process_duration_seconds_bucket{`,
		`orderworker_cosmosdb_request_charge_sum{`,
		`service_name="orderworker"`,
	} {
		if !bytes.Contains(body, []byte(want)) || testing.Verbose() && false {
			t.Errorf("scrape does not contain %s:\n%s", want, body)
		}
	}
}

// TestRequestChargePolicy runs the policy AzureClientOptions returns in an
// azcore pipeline whose transport answers like Cosmos DB, with a fractional
// x-ms-request-charge, and once without the header.
func TestRequestChargePolicy(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	p := &telemetry.Providers{
		TracerProvider: sdktrace.NewTracerProvider(),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Propagator:     telemetry.Propagator(),
	}
	o := p.AzureClientOptions()
	if !o.TracingProvider.NewTracer("azcosmos", "v1").Enabled() || len(o.PerRetryPolicies) != 1 {
		t.Fatalf("AzureClientOptions = %+v, want a tracing provider and the request-charge policy", o)
	}
	charges := []string{"5.71", "", "1"}
	i := 0
	o.Transport = doer(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		if c := charges[i]; c != "" {
			h.Set("x-ms-request-charge", c)
		}
		i++
		return &http.Response{StatusCode: 201, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	})
	o.Retry.MaxRetries = -1
	pl := runtime.NewPipeline("test", "v1", runtime.PipelineOptions{}, &o)
	for range charges {
		req, err := runtime.NewRequest(context.Background(), http.MethodPost, "http://cosmos.invalid/dbs/orders/colls/orders/docs")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := pl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	m := telemetrytest.Collect(t, reader)
	if n := m.Int(telemetry.RequestChargeMetric, attribute.Int("http.response.status_code", 201)); n != 2 {
		t.Errorf("%s counts %d requests, want the 2 that were charged", telemetry.RequestChargeMetric, n)
	}
}

type doer func(*http.Request) (*http.Response, error)

func (d doer) Do(r *http.Request) (*http.Response, error) { return d(r) }

var _ policy.Transporter = doer(nil)

// TestOTLPExport exports through New's OTLP/HTTP exporters to a fake
// collector and checks that Shutdown flushes traces to /v1/traces and
// metrics to /v1/metrics under the configured base URL.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	p, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "orderworker", OTLPEndpoint: collector.URL + "/otel"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || p.MetricsHandler() != nil {
		t.Fatalf("Enabled %v, MetricsHandler %v: want OTLP only", p.Enabled(), p.MetricsHandler())
	}
	_, span := p.TracerProvider.Tracer("t").Start(context.Background(), "process orders")
	span.End()
	c, _ := p.MeterProvider.Meter("t").Int64Counter(telemetry.WorkerNames().Deliveries)
	c.Add(context.Background(), 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if paths["POST /otel/v1/traces"] == 0 || paths["POST /otel/v1/metrics"] == 0 {
		t.Errorf("the collector saw %v, want POSTs to /otel/v1/traces and /otel/v1/metrics", paths)
	}
}

// TestEndpointCredentialsMasked: an OTLP endpoint that carries credentials
// (user information, a token in its query) is logged and refused with
// them masked, as the other secret settings are.
func TestEndpointCredentialsMasked(t *testing.T) {
	c := telemetry.Config{OTLPEndpoint: "https://otlp:LOGPASS@collector.example:4318/?token=LOGTOKEN"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("start", c.LogGroup())
	c.OTLPEndpoint = "ftp://otlp:ERRPASS@collector.example/?token=ERRTOKEN"
	if err := c.Validate(); err != nil {
		b.WriteString(err.Error())
	} else {
		t.Error("an ftp:// endpoint is accepted")
	}
	for _, secret := range []string{"LOGPASS", "LOGTOKEN", "ERRPASS", "ERRTOKEN"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("%s is printed:\n%s", secret, b.String())
		}
	}
	if !strings.Contains(b.String(), "collector.example") {
		t.Errorf("the endpoint's host is not printed:\n%s", b.String())
	}
}
