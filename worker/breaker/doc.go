// Package breaker is a circuit breaker for package worker: a worker.Gate
// that stops the receive loop while a dependency of the handler fails.
//
//	b, err := breaker.New(breaker.Options{
//		Threshold:  5,
//		Spread:     breaker.SpreadFor(8), // the worker's concurrency
//		TrialLimit: breaker.TrialLimitFor(8),
//		Probe:      store.Probe, // what the messages need: a read and a write
//	}, logger)
//	if err != nil { ... }
//	w, err := worker.New(receiver, handler, logger, worker.Options{Concurrency: 8, Gate: b, Scheduler: sender})
//	// a readiness probe: b.Paused()
//
// It is a package of its own, not part of the worker, because the loop
// needs no breaker to be correct (without one a failing dependency costs
// deliveries, never messages): a copy of the worker takes the loop alone,
// and a deployment adds the breaker through the worker's Gate seam, the one
// place where the loop asks before it receives and reports what it
// decided. The breaker imports only the worker and package idempotent.
//
// # The probe
//
// The probe must fail when the dependency fails the messages, not only
// when it answers nothing: a probe that proves only that something answers
// (a point read, a health endpoint) passes a store that refuses writes (a
// write-region outage, a role cut to Data Reader) and a downstream API
// whose calls fail while its health endpoint answers (an acquirer outage
// behind a payments service). Probe a Cosmos DB container with
// cosmosstore.Store.Probe (a point read and a delete of a missing item,
// which writes nothing), and a downstream API with a call shaped like the
// one the messages make (the example's payments service answers a
// zero-amount verification that goes to its acquirer as a capture does).
// What a probe still cannot see (one physical partition down: the probe
// uses one key) only the spread rule below sees.
//
// # What opens it
//
// Three rules, on the results the handlers record (Record):
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
//     that does not fail for a dependency closes it.
//   - Redelivery: with a probe, a dependency failure of a redelivered
//     message (DeliveryCount 2 or more: it failed before, on this worker
//     or another) asks the probe by itself, excused entity or not. On a
//     quiet queue shared by several workers, one message's deliveries are
//     split over their breakers, and none sees Threshold of them in a row
//     before the broker's MaxDeliveryCount; asked at once, each breaker
//     opens at the cost of one delivery, so an outage the probe sees costs
//     a message at most one delivery per worker, and one more. A poison
//     message costs a probe per redelivery.
//   - Spread: when Options.Spread distinct entities (Result.Key) are
//     failing again, each with its last three deliveries failed by a
//     dependency (or one at a DeliveryCount of Threshold or more: its
//     message has failed that often across the workers sharing its
//     queue), within the breaker's last Options.SpreadWindow (50)
//     deliveries, the breaker opens even if the probe succeeds. The rule
//     is off unless Spread is set; SpreadFor gives 5 for the worker's
//     default concurrency of 8. It sees the outages the probe cannot: one
//     physical partition down or throttled, and any failure a probe
//     misses. The successes of other entities do not reset it, so one
//     partition of four down amid the others' successes opens it too; a
//     failure that passes on a later delivery (a throttled call) is
//     noise, however many entities it strikes. Only deliveries can tell
//     when such an outage ends: after Options.TrialBackoff (10 min) the
//     breaker lets one message through at a time; the first success
//     closes it, and a failure lets the next message through until
//     Options.TrialLimit entities have failed (TrialLimitFor gives 7),
//     which opens it again for twice the wait, up to
//     Options.MaxTrialBackoff (40 min). A message that fails in a trial
//     waits off the head of the queue until after the next trial: the
//     trial's Admission sets worker.Admission.DependencyWait, and a worker
//     with a Scheduler retries it by a scheduled copy (which starts its
//     deliveries again) instead of abandoning it, so the next trial meets
//     other messages. Trials come 10, 30, 70 and 110 minutes into an
//     outage; without a Scheduler each costs the messages at the head of
//     the queue a delivery, and an hour's outage costs a message at most
//     five deliveries (three before the breaker opened, two trials) of the
//     queue's MaxDeliveryCount of 10.
//
// A quiet queue holding fewer than Spread entities that an outage the
// probe cannot see strikes (a key range down, on an inbox consumer's
// trickle) cannot be told from poison messages: the breaker stays closed
// and the broker dead-letters them as poison, at MaxDeliveryCount.
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
// first trial tells them apart: it gets past up to seven of them to a
// message that succeeds, which closes the breaker, and the entities it
// got past no longer count in the spread until they succeed, so the
// broker dead-letters them while the others flow; a trial that comes round
// to an entity again after fewer than Spread failed has met every failing
// message at the head, and closes it the same way. More poison entities
// at the head than a trial gets past keep it open, each trial moving them
// off the head (or, without a Scheduler, costing them a delivery), until
// the broker dead-letters them: with nothing else in the queue, they are
// dead-lettered a trial at a time, over hours instead of minutes. The
// cost of the rule is a pause of TrialBackoff when five poison entities
// fail at once.
// Without a probe the breaker cannot tell poison messages from an outage
// before a delivery succeeds: configure one.
package breaker
