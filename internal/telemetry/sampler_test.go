package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// TestTracesSampler reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as
// the worker's deployment sets them and exports to a gRPC collector: at a
// ratio of 0 an ordinary span is dropped and a span the worker keeps
// (otelworker.AttrKept) arrives; with no sampler set, every span arrives.
func TestTracesSampler(t *testing.T) {
	for _, tt := range []struct {
		name        string
		env         map[string]string
		wantOrdinal bool
	}{
		{"ratio 0", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, false},
		{"always off", map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, false},
		{"ratio 1", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1"}, true},
		{"default", map[string]string{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, endpoint := startGRPCCollector(t)
			env := map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
				"OTEL_METRICS_EXPORTER":       "none",
			}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg := parseTelemetry(t, env)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			p, err := telemetry.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.MeterProvider.(metricnoop.MeterProvider); !ok {
				t.Errorf("MeterProvider %T with OTEL_METRICS_EXPORTER=none and no Prometheus: want the no-op one, which records nothing for no one", p.MeterProvider)
			}
			tr := p.TracerProvider.Tracer("t")
			_, span := tr.Start(context.Background(), "ordinary")
			span.End()
			_, span = tr.Start(context.Background(), "kept", trace.WithAttributes(otelworker.AttrKept.String(otelworker.KeptFailure)))
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if _, ok := c.spans["kept"]; !ok {
				t.Errorf("the collector received %v: want the kept span", c.spans)
			}
			if _, ok := c.spans["ordinary"]; ok != tt.wantOrdinal {
				t.Errorf("the collector received %v: ordinary span %v, want %v", c.spans, ok, tt.wantOrdinal)
			}
		})
	}
}

// TestTracesSamplerSetting refuses what the specification does not name,
// and a ratio outside 0 to 1, naming the variable.
func TestTracesSamplerSetting(t *testing.T) {
	for _, tt := range []struct {
		sampler, arg string
		wantErr      string
	}{
		{"parentbased_traceidratio", "0.1", ""},
		{"parentbased_always_on", "", ""},
		{"traceidratio", "", ""},
		{"parentbased_traceidratio", "1.5", "OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", "ten percent", "OTEL_TRACES_SAMPLER_ARG"},
		{"jaeger_remote", "", "OTEL_TRACES_SAMPLER"},
		{"AlwaysOn", "", "OTEL_TRACES_SAMPLER"},
	} {
		c := telemetry.Config{TracesSampler: tt.sampler, TracesSamplerArg: tt.arg}
		err := c.Validate()
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s %q: Validate = %v", tt.sampler, tt.arg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr+" ") {
			t.Errorf("%s %q: Validate = %v, want an error naming %s", tt.sampler, tt.arg, err, tt.wantErr)
		}
	}
}

// TestKeptSampler: spans without otelworker.AttrKept get the base
// sampler's decision, those with it are sampled.
func TestKeptSampler(t *testing.T) {
	for _, tt := range []struct {
		base sdktrace.Sampler
		kept bool
		want sdktrace.SamplingDecision
	}{
		{sdktrace.NeverSample(), false, sdktrace.Drop},
		{sdktrace.NeverSample(), true, sdktrace.RecordAndSample},
		{sdktrace.AlwaysSample(), false, sdktrace.RecordAndSample},
		{sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), true, sdktrace.RecordAndSample},
	} {
		p := sdktrace.SamplingParameters{ParentContext: context.Background(), Name: "process orders"}
		if tt.kept {
			p.Attributes = append(p.Attributes, otelworker.AttrKept.String(otelworker.KeptFailure))
		}
		if got := telemetry.KeptSampler(tt.base).ShouldSample(p).Decision; got != tt.want {
			t.Errorf("KeptSampler(%s), kept %v: %v, want %v", tt.base.Description(), tt.kept, got, tt.want)
		}
	}
}

// TestAzureSpansFollowTheSampler: the Cosmos DB SDK starts no span under a
// dropped parent (the sampler would drop it too), and starts its spans as
// before under a sampled parent or none; with no metrics read, no
// request-charge policy runs.
func TestAzureSpansFollowTheSampler(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	// A sampler that ignores the parent, so that a span the SDK starts is
	// recorded whatever its parent: what is recorded is what was started.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: telemetry.Propagator()}
	o := p.AzureClientOptions()
	if len(o.PerRetryPolicies) != 0 {
		t.Errorf("PerRetryPolicies = %v with no metrics read, want none", o.PerRetryPolicies)
	}
	azTracer := o.TracingProvider.NewTracer("azcosmos", "v1")
	droppedCtx, sampledCtx := parents(t, tp)
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"under a dropped parent: not started", droppedCtx, false},
		{"under a sampled parent", sampledCtx, true},
		{"without a parent", context.Background(), true},
	} {
		before := len(spans.Ended())
		_, span := azTracer.Start(tt.ctx, "execute_batch orders", nil)
		span.End()
		if got := len(spans.Ended()) > before; got != tt.want {
			t.Errorf("%s: the SDK's span recorded %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestAzureTracingDisabled: AZURE_TRACING_DISABLED=true leaves the Azure
// SDK clients without a tracing provider, while the worker's own spans are
// exported as before.
func TestAzureTracingDisabled(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  bool // a tracing provider for the SDK
	}{{"", true}, {"false", true}, {"true", false}} {
		cfg := parseTelemetry(t, map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1/", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_METRICS_EXPORTER": "none", "AZURE_TRACING_DISABLED": tt.value,
		})
		p, err := telemetry.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Enabled() {
			t.Errorf("AZURE_TRACING_DISABLED=%q: providers disabled, want the worker's traces", tt.value)
		}
		o := p.AzureClientOptions()
		if got := o.TracingProvider.NewTracer("azcosmos", "v1").Enabled(); got != tt.want {
			t.Errorf("AZURE_TRACING_DISABLED=%q: the SDK's tracer enabled %v, want %v", tt.value, got, tt.want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = p.Shutdown(ctx)
		cancel()
	}
}

// TestAzureUntraced: the function a Store's untraced twin is chosen by
// reports exactly the contexts under which the SDK's tracing provider
// starts no span (a dropped parent), and there is none when the SDK gets
// no tracing provider.
func TestAzureUntraced(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: telemetry.Propagator()}
	untraced := p.AzureUntraced()
	if untraced == nil {
		t.Fatal("AzureUntraced = nil with a tracer provider")
	}
	droppedCtx, sampledCtx := parents(t, tp)
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"under a dropped parent", droppedCtx, true},
		{"under a sampled parent", sampledCtx, false},
		{"without a parent", context.Background(), false},
	} {
		if got := untraced(tt.ctx); got != tt.want {
			t.Errorf("%s: untraced %v, want %v", tt.name, got, tt.want)
		}
	}
	if f := telemetry.Disabled().AzureUntraced(); f != nil {
		t.Error("Disabled().AzureUntraced() is not nil")
	}
	cfg := parseTelemetry(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1/", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_METRICS_EXPORTER": "none", "AZURE_TRACING_DISABLED": "true",
	})
	q, err := telemetry.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Shutdown(context.Background())
	if f := q.AzureUntraced(); f != nil {
		t.Error("AzureUntraced is not nil with AZURE_TRACING_DISABLED=true")
	}
}

// parents returns the contexts of a span that a sampler dropped and of one
// that tp sampled, both ended when the test ends.
func parents(t *testing.T, tp *sdktrace.TracerProvider) (dropped, sampled context.Context) {
	t.Helper()
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	dropped, d := never.Tracer("t").Start(context.Background(), "process orders")
	t.Cleanup(func() { d.End() })
	sampled, s := tp.Tracer("t").Start(context.Background(), "process orders")
	t.Cleanup(func() { s.End() })
	return dropped, sampled
}
