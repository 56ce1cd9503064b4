// Package otelworker records OpenTelemetry traces and metrics of a
// worker.Worker: its Telemetry is the worker's Hook and wraps its Receiver.
//
//	tel, err := otelworker.New(otelworker.Options{
//		TracerProvider: tp, MeterProvider: mp, Queue: "invoices",
//		Names: otelworker.PrefixedNames("invoiceworker", "invoice"),
//	})
//	if err != nil { ... }
//	w, err := worker.New(tel.Receiver(receiver), handler, logger, worker.Options{Hook: tel})
//
// With a circuit breaker (package worker/breaker), its state changes are
// metrics too: breaker.Options{OnChange: func(s breaker.State) {
// tel.BreakerChanged(s.String(), s != breaker.Closed) }}.
//
// It is a package of its own, not part of the worker, so that the loop
// imports no OpenTelemetry: a copy of the worker takes the loop alone,
// and a deployment that exports traces and metrics adds this package
// through the two seams the worker offers for it, a Receiver decorator
// (the receive, settlement and renewal spans and their metrics) and the
// worker.Hook (the process span around the handler, its context passed
// to the handler, the settlement and the log line, and the delivery
// metrics).
//
// The names of its metrics and attributes are the deployment's (Names): a
// prefix it sets (PrefixedNames), with any name changed after, so that
// dashboards and alerts keep reading what they read. The semantic
// conventions' names (MetricConsumed, MetricProcessDuration, the messaging
// attributes) are fixed.
//
// Sampling is the deployment's (its TracerProvider's sampler): a sampler
// that keeps the spans marked with AttrKept over its ratio keeps every
// redelivery's trace and a span of every delivery that did not complete,
// which head sampling alone cannot know at a delivery's start.
//
// The trace context of a message travels in its application properties
// (traceparent, tracestate, and the Azure SDKs' Diagnostic-Id):
// InjectTraceContext writes it at the producer, ExtractTraceContext reads
// it at the worker.
package otelworker
