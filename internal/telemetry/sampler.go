package telemetry

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// KeptSampler returns a sampler that samples every span whose start
// attributes carry otelworker.AttrKept (a redelivery's process span, and
// the span the worker's telemetry records for a failed delivery whose
// trace was dropped) and leaves every other span to base, such as
// sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1)). New gives it to
// the tracer provider over the sampler OTEL_TRACES_SAMPLER names.
func KeptSampler(base sdktrace.Sampler) sdktrace.Sampler { return keptSampler{base} }

type keptSampler struct{ base sdktrace.Sampler }

func (s keptSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, a := range p.Attributes {
		if a.Key == otelworker.AttrKept {
			return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
		}
	}
	return s.base.ShouldSample(p)
}

func (s keptSampler) Description() string { return "KeptOr{" + s.base.Description() + "}" }
