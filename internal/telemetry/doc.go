// Package telemetry sets up the project's OpenTelemetry traces, metrics and
// logs: the providers a command's settings ask for (OTLP for traces, metrics
// and logs, over HTTP or gRPC as OTEL_EXPORTER_OTLP_PROTOCOL says; a
// Prometheus scrape handler for metrics; or nothing), the slog handler that
// bridges the command's logs to OpenTelemetry log records (LogHandler, the
// contrib otelslog bridge, correlated with the span of the context a line is
// logged with; OTEL_LOGS_EXPORTER=none turns it off), the W3C
// trace context carried in a Service Bus message's application properties,
// and the instrumentation of the Cosmos DB client (the SDK's own spans
// through azcore's tracing provider, and request units per request) and of
// the payments service's HTTP client and server (otelhttp, with the
// Idempotency-Key header on the span).
//
// Nothing is exported unless a setting asks for it: with no exporter
// configured, New returns no-op providers, and the worker, the producer and
// the Cosmos DB client record nothing; with no metrics reader (OTEL_METRICS_EXPORTER=none
// and no Prometheus) the meter provider is the no-op one.
//
// # Sampling
//
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose the sampler by the
// OpenTelemetry specification's names (parentbased_traceidratio with a
// ratio, say), read through the command's settings rather than by the SDK
// from the process environment. Whatever the sampler, KeptSampler
// keeps what the worker marks as kept: a redelivery's whole trace, and the
// process span of a delivery that was dead-lettered, abandoned or not
// settled, recorded at its end when the ratio had dropped its trace.
//
// # Trace context in messages
//
// The producer injects the context of its send span into each message's
// ApplicationProperties as traceparent and tracestate (W3C Trace Context)
// and Diagnostic-Id, the property the Azure SDKs for other languages write
// and read (the traceparent value); the worker extracts it, preferring
// traceparent and falling back to Diagnostic-Id, so that one trace runs
// from the producer through the worker to Cosmos DB and the payments
// service. The properties are plain strings: a message sent without them,
// or with values that do not parse, is processed in a trace of its own.
//
// Everything here is safe for concurrent use once built.
package telemetry
