package telemetry

import "github.com/idempotent-consumer/sbcosmos/worker/otelworker"

// The application properties that carry the trace context of a message;
// package worker/otelworker defines them, since its telemetry reads them.
const (
	PropertyTraceParent  = otelworker.PropertyTraceParent
	PropertyTraceState   = otelworker.PropertyTraceState
	PropertyDiagnosticID = otelworker.PropertyDiagnosticID
)

// MessageCarrier is otelworker.MessageCarrier.
type MessageCarrier = otelworker.MessageCarrier

// Inject is otelworker.InjectTraceContext: the producer's half of message trace
// context.
var Inject = otelworker.InjectTraceContext

// Extract is otelworker.ExtractTraceContext.
var Extract = otelworker.ExtractTraceContext

// Propagator is otelworker.Propagator.
var Propagator = otelworker.Propagator
