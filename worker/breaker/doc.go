// Package breaker is a circuit breaker for package worker: a worker.Gate
// that stops the receive loop while a dependency of the handler fails.
//
//	b, err := breaker.New(breaker.Options{Threshold: 5, Probe: store.Ping}, logger)
//	if err != nil { ... }
//	w, err := worker.New(receiver, handler, logger, worker.Options{Gate: b})
//	// a readiness probe: b.Paused()
//
// It is a package of its own, not part of the worker, because the loop
// needs no breaker to be correct (without one a failing dependency costs
// deliveries, never messages): a copy of the worker takes the loop alone,
// and a deployment adds the breaker through the worker's Gate seam, the one
// place where the loop asks before it receives and reports what it
// decided. The breaker imports only the worker and package idempotent.
//
// # What opens it
//
// When Options.Threshold consecutive deliveries fail because a dependency
// failed (idempotent.Result.DependencyFailed: the store, a downstream
// API), the breaker asks Options.Probe whether the dependency answers,
// receiving nothing meanwhile. If the probe fails (or there is no probe),
// the breaker opens: it cancels the receive in progress and admits no more
// receives, so an outage costs the deliveries already in flight, never the
// backlog. After a backoff it calls the probe until it succeeds, or,
// without a probe, lets one message through (half-open); a delivery that
// does not fail for a dependency closes it. Paused, State and Opened report
// its state, and the worker's summaries carry it (breaker, breaker_opened).
//
// The breaker opens only on evidence that the dependency fails, never
// because the same few messages keep failing (poison messages: a document
// or a partition that always fails, which only their entity meets). If the
// probe succeeds when the threshold is reached, the failures are the
// messages' own: the breaker stays closed and the entities of those
// failures (idempotent.Result.Key) are excused, and so are the entities
// that failed while it was open once the probe or a delivery closes it. An
// excused entity's failures no longer count, until one of its deliveries
// succeeds; its messages are abandoned as before, and the broker
// dead-letters them at MaxDeliveryCount, while the others flow. Without a
// probe the breaker cannot tell poison messages from an outage before a
// delivery succeeds: configure one.
package breaker
