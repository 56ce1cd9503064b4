// Package breaker is a circuit breaker for package worker: a worker.Gate
// that stops the receive loop while a dependency of the handler fails.
//
//	b, err := breaker.New(breaker.Options{
//		Threshold: 5,
//		Spread:    breaker.SpreadFor(8), // the worker's concurrency
//		Probe:     store.Ping,
//	}, logger)
//	if err != nil { ... }
//	w, err := worker.New(receiver, handler, logger, worker.Options{Concurrency: 8, Gate: b})
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
// Two rules, on the results the handlers record (Record):
//
//   - Depth: when Options.Threshold (5) consecutive deliveries fail because
//     a dependency failed (idempotent.Result.DependencyFailed: the store, a
//     downstream API), the breaker asks Options.Probe whether the
//     dependency answers, receiving nothing meanwhile. If the probe fails
//     (or there is no probe), the breaker opens: it cancels the receive in
//     progress and admits no more receives, so an outage costs the
//     deliveries already in flight, never the backlog. After a backoff
//     (1 s doubling to 1 min) it calls the probe until it succeeds, or,
//     without a probe, lets one message through (half-open); a delivery
//     that does not fail for a dependency closes it. With a probe, one
//     dependency failure of a message whose DeliveryCount has reached
//     Threshold asks the probe too: that message has failed Threshold
//     deliveries across the workers sharing its queue, and on a quiet
//     queue no one worker's breaker sees Threshold of them in a row
//     before the broker's MaxDeliveryCount (three workers and one message
//     waiting through a store outage: each sees three or four). A poison
//     message costs one such probe, after which its entity is excused.
//   - Spread: when Options.Spread distinct entities (Result.Key) are
//     failing again, each with its last three deliveries failed by a
//     dependency (or one at a DeliveryCount of Threshold or more: its
//     message has failed that often across the workers sharing its
//     queue), within the breaker's last Options.SpreadWindow (50)
//     deliveries, the breaker opens even if the probe succeeds. The rule
//     is off unless Spread is set; SpreadFor gives 5 for the worker's
//     default concurrency of 8. The probes prove only that something
//     answers (a point read, a health endpoint); this rule sees the
//     outages they cannot: a store that refuses writes (a write-region
//     outage, a role cut to Data Reader, a storage quota), one physical
//     partition down or throttled, a downstream API whose calls fail
//     while its health endpoint answers. The successes of other
//     entities do not reset it, so one partition of four down amid the
//     others' successes opens it too; a failure that passes on a later
//     delivery (a throttled call) is noise, however many entities it
//     strikes. Only deliveries can tell when such an outage ends: after
//     Options.TrialBackoff (10 min) the breaker lets one message through
//     at a time; the first success closes it, and a failure lets the next
//     message through until Options.TrialLimit entities have failed
//     (TrialLimitFor gives 7, the concurrency less one), or one of them
//     twice, which opens it again for twice the wait, up to
//     Options.MaxTrialBackoff (40 min). Trials come 10, 30, 70 and 110
//     minutes into an outage, each costing the messages at the head of
//     the queue a delivery: an hour's outage costs a message at most five
//     deliveries (three before the breaker opened, two trials) of the
//     queue's MaxDeliveryCount of 10, and dead-letters nothing.
//
// Paused, State and Opened report its state, and the worker's summaries
// carry it (breaker, breaker_opened).
//
// # Poison messages
//
// The breaker opens only on evidence that the dependency fails, never
// because the same few messages keep failing (poison messages: a document
// or a partition that always fails, which only their entity meets). If the
// probe succeeds when the depth rule's threshold is reached, the failures
// are the messages' own: the breaker stays closed and the entities of those
// failures (idempotent.Result.Key) are excused, and so are the entities
// that failed while it was open once the probe or a delivery closes it. An
// excused entity's failures no longer count towards the depth rule, until
// one of its deliveries succeeds; its messages are abandoned as before,
// and the broker dead-letters them at MaxDeliveryCount, while the others
// flow. So one poison entity, however many of its messages fail (the poison
// tests' eight messages of one entity), and up to four poison entities
// failing at once never open it while the probe answers; five or more
// failing again within 50 deliveries open it as an outage would. With
// Concurrency 8 that cannot be told apart: abandoned messages return to
// the head of the queue and hold their handler slots through the retry
// backoff, so a worker whose slots all hold failing messages sees no
// other message before the first of them is dead-lettered, and five
// entities failing at the head look like an outage's first five. The
// first trial tells them apart: it gets past up to six of them to a
// message that succeeds, which closes the breaker, and the entities it
// got past no longer count in the spread until they succeed, so the
// broker dead-letters them while the others flow. Seven or more poison
// entities at the head keep it open, each trial costing them a delivery,
// until the broker dead-letters them. The cost of the rule is a pause of
// TrialBackoff when five poison entities fail at once.
// Without a probe the breaker cannot tell poison messages from an outage
// before a delivery succeeds: configure one.
package breaker
