// Package worker runs the PeekLock receive loop of an idempotent consumer
// on Azure Service Bus. Wire it from a receiver, a handler, a logger and
// options, and Run it until the context ends:
//
//	receiver, err := client.NewReceiverForQueue("invoices", nil) // PeekLock
//	if err != nil { ... }
//	consumer := idempotent.NewConsumer(InvoiceKind{}, store) // a worker.Handler
//	w, err := worker.New(receiver, consumer, logger, worker.Options{
//		Concurrency:  16,
//		LockDuration: time.Minute, // the queue's lockDuration
//		KeyAttr:      "invoice_id",
//	})
//	if err != nil { ... }
//	err = w.Run(ctx) // returns after a graceful drain once ctx ends
//
// One goroutine receives, a bounded number of handlers process messages
// concurrently, each under its own deadline and with its lock renewed from
// the message's LockedUntil while it runs, and every result is settled by
// one switch over what its outcome means
// (idempotent.Outcome.Settlement): complete, dead-letter or abandon, or,
// for a retry that can only succeed later, a scheduled copy. The loop
// imports neither OpenTelemetry nor a circuit breaker: those are options
// of their own that plug into two seams the worker defines and calls (see
// Options below).
//
// # Delivery contract
//
// Service Bus delivers at least once, so every message may be handled more
// than once, by this worker or another. The worker never relies on a
// settlement succeeding: when a complete, abandon or dead-letter fails (the
// lock was lost, the link dropped), the message comes back and the handler's
// idempotency turns the redelivery into a harmless duplicate.
//
// # Settlement
//
// An outcome is settled by what it means (idempotent.Outcome.Settlement):
// Complete (created, duplicate, applied, stale, ignored) completes the
// message, DeadLetter (mismatch, invalid) dead-letters it with the result's
// Reason and Description, and Abandon (transient, and any outcome the
// worker does not know, so a new outcome is retried rather than lost)
// abandons it after the retry backoff, or schedules a copy (see Delayed
// retries). Stats counts the deliveries by outcome, whatever the outcomes
// are, so a new outcome needs no edit to the worker.
//
// # Pipeline
//
// Each delivery passes through three stages; the bounds are per Worker, with
// c = Options.Concurrency:
//
//   - Receive. One goroutine calls ReceiveMessages, never concurrently (the
//     SDK forbids it). Before each call it takes a free handler slot, and as
//     many more as are free at that moment, and asks for exactly that many
//     messages: every message it receives has a handler that starts on it
//     as soon as the call returns. It never holds a message that no handler
//     can start on, since the broker locks, and counts the delivery of,
//     every message it sends on the call's link credit, whether or not a
//     handler ever sees it. (The SDK itself may keep the first message of a
//     call for up to its TimeAfterFirstMessage, 20 ms, while it waits for
//     more; with a backlog the call returns as soon as all have arrived.)
//     Receiving ahead of a free slot would take the receive's round trip
//     off a handler's cycle, but the message would wait, locked and
//     counted, as long as the running handlers take, and one still waiting
//     when the shutdown grace ends would be abandoned (or left to expire)
//     without a handler ever having seen it.
//   - Process: at most c messages. A handler slot is held from the receive
//     call to the end of the Process phase: Process under MessageTimeout,
//     the Gate's Record, and the retry backoff of a retried outcome.
//     The slot is then given back, before the settlement, so the next
//     receive's round trip overlaps this message's settlement.
//   - Settle: at most c settlements run at once. A handler takes a
//     settlement slot before it gives up its handler slot, so when
//     settlements are slow, processed messages wait holding their handler
//     slots and the loop receives no more: at most 2c messages are received
//     and not yet settled (c settling, c in their Process phase or waiting
//     for a settlement slot), and that wait is bounded because every
//     settlement ends within SettleTimeout.
//
// A message's lock is renewed from its receipt until its settlement begins:
// during the Process phase until MessageTimeout (a handler that ignores its
// deadline loses the lock rather than hold the message for good), and again
// while it waits for a settlement slot. The renewal stops when the
// settlement starts (a renewal racing a completion would report the lock of
// a completed message lost); by then the lock has about half of its
// duration left or more (see Lock renewal), more than the default
// SettleTimeout of 20 s for the default 60 s lock. A settlement that runs
// past the lock fails with a lost lock and the message comes back: a
// duplicate the handler's idempotency absorbs.
//
// One goroutine runs both phases of a message. It is a handler goroutine
// that stays for the next message rather than a new one per message (a
// fresh goroutine's small stack would be grown, by copying, several times
// on every message), so there are never more of them than messages in
// flight at once, and they end with Run; lock renewal uses a timer that
// starts a goroutine only when a renewal is due. Observe is called on the
// handler goroutine after the settlement attempt.
//
// # Lock renewal
//
// A handler's lock is renewed when half of the time left until the
// message's LockedUntil has passed (the SDK updates LockedUntil on every
// renewal), and at least every half of Options.LockDuration, so a queue whose
// lock is shorter than the configured one does not lose every long handler's
// lock. The first time the lock the broker grants disagrees with
// Options.LockDuration the worker logs a warning naming both.
//
// # Options: the Gate and the Hook
//
// Two seams keep the loop plain while a deployment adds what it needs:
//
//   - Options.Gate is asked before every receive (Admit) and told every
//     result (Record): package worker/breaker is a circuit breaker that
//     stops receiving while a dependency fails, and tells poison messages
//     from an outage with a probe.
//   - Options.Hook sees every delivery begin (Start, whose context the
//     handler, the settlement and the log line inherit) and end (End, with
//     the Report): package worker/otelworker records OpenTelemetry spans and
//     metrics through it, and wraps the Receiver for the receive,
//     settlement and renewal spans.
//
// A Gate or Hook that implements Summarizer adds its attributes to the
// summaries. Options.Observe is the simplest hook: a function called with
// every Report.
//
// # Delayed retries
//
// A Transient result with RetryAfter set (idempotent.Result) is a message
// that can only succeed later. With Options.Scheduler, a sender on the
// worker's own queue, its settlement schedules a copy first and then
// completes it, so the wait costs no deliveries: the copy, with
// MessageId RetryMessageID(original, since, attempt), the same body, subject and
// properties plus PropertyOriginalMessageID, PropertyRetryAttempt and
// PropertyRetrySince, is enqueued RetryAfter × 2^(attempt−1) later. The
// handler sees a copy under its original's MessageId. A failure between
// the two steps leaves two messages, never none: the redelivered original
// schedules the same copy id again, which duplicate detection drops at
// scheduling time, or the handler's idempotency absorbs the second copy. A
// failed scheduling abandons the message. Options.Retry bounds the copies
// (MaxAttempts) and their delay since the original was enqueued
// (MaxDelay); past a bound the message is abandoned, and the queue's
// MaxDeliveryCount ends it.
//
// A Gate's Admission may ask the same of a dependency failure
// (Admission.DependencyWait): a circuit breaker's trial does, so that a
// message that fails in a trial waits off the head of the queue and the
// next trial meets another one (package worker/breaker).
//
// The copy's MessageId includes its original's enqueue time, so that two
// messages with one MessageId alive at once (a producer's retry after the
// duplicate-detection window, an operator's resubmission, an id reused for
// other content) schedule different copies: with one id for both, duplicate
// detection would drop the second copy while its message is completed.
//
// # Shutdown
//
// When Run's context is cancelled the worker stops receiving and never
// starts another ReceiveMessages call: a receive issues link credit, and
// anything the broker sends on it is locked, and would have to be abandoned
// (which counts a delivery) or left to its lock's expiry (which counts one
// too) by a worker that no longer handles messages. The receive call in
// progress, whose credit was issued before shutdown began, may go on for
// Options.ReceiveDrain to collect what the broker sends on that credit; its
// messages are handled like any other (each has the handler slot taken
// before the call). After that window it is cancelled,
// and whatever the broker still sends on the credit left is given back by
// the SDK's background releaser with the AMQP released outcome, which
// Service Bus does not count as a delivery, until the caller closes the
// receiver. In-flight handlers finish and settle within
// Options.ShutdownGrace; the rest are cancelled, logged as cut off by
// shutdown and abandoned (each settlement bounded by Options.SettleTimeout,
// independently of the grace), and Run returns once every settlement
// attempt has ended and been reported: after the receive has stopped, at
// most ShutdownGrace, plus the time cancelled handlers take to return, plus
// two SettleTimeouts (the settlements in progress when the grace ends, then
// those that waited for their slots). Closing the Service Bus client is the
// caller's job, after Run returns.
//
// The residual: a message the broker sends on credit left on the link
// (by a receive cancelled on an idle queue, or one that returned fewer
// messages than it asked for) that the releaser has not released by the
// time Close stops it stays locked until its lock expires, and that expiry
// counts a delivery. The SDK v1.11.0 cannot drain credit, so no client can
// close that window entirely; it needs a message to become available in
// the last moments before Close.
//
// # Logs
//
// Every delivery is logged once with the keys message_id, delivery_count,
// outcome, duration_ms, the entity's key under Options.KeyAttr (default
// entity_key) when the result has one, and reason, description, error and
// Options.ResumedAttr (default effect_resumed) when set: at INFO with the
// message "processed" when it was completed, at INFO "scheduled for a
// delayed retry" (with retry_attempt and retry_delay_ms) when a copy was
// scheduled, at WARN "dead-lettered" for an invalid message, at ERROR
// "dead-lettered" for an id reused for other content (a mismatch), at WARN
// "abandoned for redelivery" for a retried outcome and at WARN "cut off by
// shutdown: abandoned" when the shutdown grace cancelled it. Durations are strings (grace, backoff) or integer
// milliseconds (keys ending in _ms), never nanoseconds.
//
// A summary is logged every Options.SummaryInterval with the totals (one
// key per outcome, under its name: created, duplicate, ...), the counts
// and rates of the interval (received_per_s, processed_per_s), the number
// in flight, lock renewals, what a Summarizer adds (a breaker's state),
// and, with
// Options.CacheStats, the cache's cumulative hits, misses and hit rate
// (cache.hits, cache.misses, cache.hit_rate). It is logged at
// INFO when the interval went well and at WARN when it saw retries,
// dead-letters, lost locks, failed renewals, settlements or receives, or
// trouble a Summarizer reports, so a WARN level still shows every interval
// in which something went wrong. The final summary uses the same rule over
// the whole run.
package worker
