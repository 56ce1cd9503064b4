package telemetry

import (
	"context"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/tracing"
	"github.com/Azure/azure-sdk-for-go/sdk/tracing/azotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// RequestChargeMetric is the histogram of the request units that each
// Cosmos DB request (each attempt, retries included) was charged, read from
// its x-ms-request-charge header. It is a float histogram because request
// charges are fractional; the semantic conventions' int histogram
// azure.cosmosdb.client.operation.request_charge would round them.
const RequestChargeMetric = "orderworker.cosmosdb.request_charge"

// AzureClientOptions returns the azcore options that instrument an Azure
// SDK client, such as azcosmos's: the SDK's own spans through azotel's
// tracing provider (none under a parent span the sampler dropped; none at
// all with AZURE_TRACING_DISABLED), and,
// for Cosmos DB when metrics are read, the request-charge histogram (a
// per-retry policy). Copy its fields into the client's options. With
// disabled providers it returns the zero options, which cost nothing.
func (p *Providers) AzureClientOptions() azcore.ClientOptions {
	if !p.Enabled() {
		return azcore.ClientOptions{}
	}
	var o azcore.ClientOptions
	if !p.noAzureSpans {
		o.TracingProvider = sampledOnly(azotel.NewTracingProvider(p.TracerProvider, nil))
	}
	if _, noMetrics := p.MeterProvider.(metricnoop.MeterProvider); noMetrics {
		return o // nothing would read the request charges
	}
	if pol, err := newRequestChargePolicy(p.MeterProvider); err == nil {
		o.PerRetryPolicies = []policy.Policy{pol}
	}
	return o
}

// AzureUntraced returns what cosmosstore.ClientOptions.Untraced takes: a
// function that reports a context whose span the sampler dropped, under
// which the tracing provider of AzureClientOptions starts no span anyway,
// so that a Store sends such calls through a client without one and skips
// the SDK's span set-up. It returns nil when AzureClientOptions gives no
// tracing provider.
func (p *Providers) AzureUntraced() func(context.Context) bool {
	if !p.Enabled() || p.noAzureSpans {
		return nil
	}
	return droppedParent
}

// droppedParent reports whether ctx carries a span the sampler dropped.
func droppedParent(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsSampled()
}

// sampledOnly wraps an azcore tracing provider so that the SDK starts no
// span under a parent span that was not sampled: the sampler would drop it
// anyway (a parent-based sampler follows the parent; a trace-id ratio
// decides the same for the whole trace), but the SDK's spans cost their
// conversion to OpenTelemetry and the span's set-up on every call. With a
// sampled parent, or none, the provider starts its spans as before.
func sampledOnly(p tracing.Provider) tracing.Provider {
	return tracing.NewProvider(func(name, version string) tracing.Tracer {
		t := p.NewTracer(name, version)
		return tracing.NewTracer(func(ctx context.Context, spanName string, o *tracing.SpanOptions) (context.Context, tracing.Span) {
			if droppedParent(ctx) {
				return ctx, tracing.Span{} // a span that records nothing
			}
			return t.Start(ctx, spanName, o)
		}, &tracing.TracerOptions{SpanFromContext: t.SpanFromContext})
	}, nil)
}

// requestChargePolicy records the request charge of every Cosmos DB
// response.
type requestChargePolicy struct{ h metric.Float64Histogram }

func newRequestChargePolicy(mp metric.MeterProvider) (*requestChargePolicy, error) {
	h, err := mp.Meter(scope).Float64Histogram(RequestChargeMetric,
		metric.WithUnit("{request_unit}"),
		metric.WithDescription("Request units charged per Cosmos DB request attempt."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
	if err != nil {
		return nil, err
	}
	return &requestChargePolicy{h: h}, nil
}

func (p *requestChargePolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if resp == nil {
		return resp, err
	}
	if v, perr := strconv.ParseFloat(resp.Header.Get("x-ms-request-charge"), 64); perr == nil {
		p.h.Record(req.Raw().Context(), v, metric.WithAttributes(
			attribute.String("http.request.method", req.Raw().Method),
			attribute.Int("http.response.status_code", resp.StatusCode)))
	}
	return resp, err
}

// scope is the instrumentation scope of the project's own instruments.
const scope = "github.com/idempotent-consumer/sbcosmos"
