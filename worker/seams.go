package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The seams through which a deployment adds what the loop does not need to
// be correct: a Gate before every receive (a circuit breaker, package
// worker/breaker) and a Hook around every delivery (traces and metrics,
// package worker/otelworker). The worker defines them, and calls them only
// when they are set.

// Gate decides when the receive loop may receive, from the results of the
// deliveries: a circuit breaker is one (package worker/breaker). The
// receive loop calls Admit from one goroutine; handlers call Record
// concurrently with it and with each other.
type Gate interface {
	// Admit blocks until the loop may receive, and returns the context of
	// that receive (derived from rx; the gate may cancel it to cut the
	// receive short) and the Admission. It returns ok false, at once or
	// when it ends its wait, once ctx has ended.
	Admit(ctx, rx context.Context) (rctx context.Context, a Admission, ok bool)
	// Record takes the decision of one delivery, at the end of its Process
	// phase and before its settlement.
	Record(d Decision)
}

// Admission is a Gate's answer to Admit.
type Admission struct {
	// Max bounds the messages of the receive, if positive and below what
	// the loop could take.
	Max int
	// Trial marks the receive's deliveries as trials (a half-open
	// breaker's): their Decision has Trial set.
	Trial bool
	// DependencyWait, if positive, moves a delivery of the receive that
	// fails by a dependency (idempotent.Result.DependencyFailed) off the
	// head of the queue: with a Scheduler, and within Options.Retry's
	// bounds, it is retried by a scheduled copy enqueued at least
	// DependencyWait later, and completed, instead of abandoned. A
	// breaker's trial sets it, so that the next trial meets another
	// message, not the same failing ones again. Without a Scheduler, or
	// past the bounds, the delivery is abandoned as before.
	DependencyWait time.Duration
	// Done, if set, is called once the receive has returned, with the
	// number of messages it returned.
	Done func(received int)
}

// Decision is what a Gate learns of one delivery.
type Decision struct {
	Result idempotent.Result
	// Trial reports that the delivery was received under an Admission
	// with Trial set.
	Trial bool
	// Telling is false when the result says nothing about the handler's
	// dependencies: the shutdown grace cut the handler off, or its lock
	// was lost.
	Telling bool
	// DeliveryCount is the message's delivery count (the broker's: its
	// deliveries to every receiver, this one included).
	DeliveryCount uint32
}

// Hook sees every delivery: tracing and metrics hang on it (package
// worker/otelworker). Its methods are called on the handler goroutines,
// concurrently.
type Hook interface {
	// Start is called when the handling of m begins. The context it
	// returns is the handler's, and, without its cancellation, the parent
	// of the settlement's and the delivery log line's.
	Start(ctx context.Context, m *azservicebus.ReceivedMessage) context.Context
	// End is called after the settlement attempt, with Start's context
	// and the delivery's report.
	End(ctx context.Context, rep Report)
}

// Summarizer is implemented by a Gate or Hook that adds to the worker's
// summary lines (see Logs in the package documentation).
type Summarizer interface {
	// Summary returns the attributes to add to a summary, and whether they
	// show trouble: since the previous call, or, when final is set, over
	// the whole run. It is called from one goroutine at a time.
	Summary(final bool) (attrs []slog.Attr, trouble bool)
}
