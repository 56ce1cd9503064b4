package telemetry

import "github.com/idempotent-consumer/sbcosmos/worker"

// The application properties that carry the trace context of a message;
// package worker defines them, since the worker reads them.
const (
	PropertyTraceParent  = worker.PropertyTraceParent
	PropertyTraceState   = worker.PropertyTraceState
	PropertyDiagnosticID = worker.PropertyDiagnosticID
)

// MessageCarrier is worker.MessageCarrier.
type MessageCarrier = worker.MessageCarrier

// Inject is worker.InjectTraceContext: the producer's half of message trace
// context.
var Inject = worker.InjectTraceContext

// Extract is worker.ExtractTraceContext.
var Extract = worker.ExtractTraceContext

// Propagator is worker.Propagator.
var Propagator = worker.Propagator
