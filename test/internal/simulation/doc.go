// Package simulation proves, by fault injection, that the idempotent consumer
// produces exactly one effect per message under every delivery fault of an
// at-least-once queue. It is also the project's embedded default: the whole
// pipeline in one process, with no Azure and no Docker
// (`go run ./test/simulate`).
//
// # What runs
//
// Run drives the real code: package worker's receive loop, unchanged and
// configured as cmd/orderworker configures it (the queue's lock duration,
// the default message timeout, settle timeout and retry backoff, the
// shutdown grace, the return of prefetched messages at shutdown), with
// several competing workers, each running the consumer (order.Processor by
// default, which also applies status changes and captures each order's
// payment, with the worker's message timeout as the claim's lease, as
// cmd/orderworker passes it) against an in-memory Cosmos DB (package
// memstore), receiving from an in-process Service Bus queue (package
// sbqueue) with PeekLock, lock expiry, MaxDeliveryCount, a dead-letter
// queue, duplicate detection and the SDK's link credit.
//
// Everything runs on real time: time.Now and Go's timers. The queues' locks
// lapse, the workers back off, renew locks, hit their message deadlines and
// shutdown grace, the store's TTLs pass and the payments service forgets
// keys, each on its own timer; nothing moves a clock, and a crashed
// delivery's lock simply lapses. The tests run every seeded run inside a
// testing/synctest bubble, where those timers run on the bubble's virtual
// clock: a run that spans hours of queue time takes milliseconds. `go run
// ./test/simulate` runs the same Run on the wall clock at a compressed time scale
// (Config.CompressedTimeScale), which its report states.
//
// Payments go through the project's payments.Client (with cmd/orderworker's
// options: per-attempt timeouts, retries with jittered backoff) and
// payments.Gateway to the reference payments service (paymentservice.Service),
// in process: the client's transport hands each request to the service's
// handler, with no socket. The service forgets a key KeyRetention after its
// charge; a request with a forgotten key is a new charge. Some orders get
// status changes (versions 2 to 4), sent in order or shuffled, some before
// the order itself (Config.OrderDelay holds such an order back). A change
// that arrives before its order is retried by a copy the worker schedules
// on the queue model (worker.Options.Scheduler, as cmd/orderworker sets
// it), not by abandons that spend its deliveries; the checks follow every
// copy back to its change.
//
// The outbox runs too: two instances of package relay, unchanged, with the
// options cmd/orderrelay gives it (lease duration, poll interval and call
// timeout on their real timers: Config.RelayLeaseDuration and the others),
// read memstore's change feed of the run's store (four feed ranges), keep
// their leases in the same store and publish every OrderAccepted event to
// a topic of the queue model (sbqueue.Topic: duplicate detection at the
// topic, fan-out to each subscription). Two inbox consumers
// (order.InboxConsumer, "loyalty" and "audit") receive the events from
// subscriptions of their own, each with delivery and store faults of its
// own, writing to the same store; their markers expire after MarkerTTL, by
// default the minimum retention order.RedeliveryHorizon computes for the
// queues' settings. A killed or stopped relay instance is replaced by a new
// one, as a process supervisor does; the run drains only once the relay has
// checkpointed past every stored event, and at its end the relays get
// SIGTERM and the subscriptions drain what a paused instance published
// last.
//
// # Faults
//
// Faults are injected by wrappers around the real components, never by
// changing them, and each goes through the real behaviour it stands for:
// the producer retries sends inside and just after the duplicate-detection
// window, reuses ids for other content and sends malformed bodies; a
// receiver wrapper makes locks lapse while handlers run, loses settlements
// (reported as lock lost) and crashes workers between their write and
// their settlement, leaving the lock to lapse; a store wrapper fails calls
// with throttling or unavailability before they write, reports committed
// writes as timeouts, fails the write that marks a payment record
// completed once, makes some charged orders' payment records unwritable
// until the queues drain (so their messages are dead-lettered with the claim
// in progress, for a resubmission after the key retention to find),
// takes some orders' storage down for good, and makes some orders' own
// document unusable, undecodable or failing every call (poison: each of
// their status changes fails while the store answers the breaker's probe,
// see poison.go); the
// payments service fails capture requests with 5xx or 429 before charging,
// or charges and then drops the connection; the client's transport loses
// answers after the charge, as a client timeout does; a worker dies between
// a capture call and the write that marks the payment completed, leaving
// the record in progress and the message locked until its lock lapses; and
// an operator resubmits dead-lettered order messages (DESIGN.md §5: receive
// from the dead-letter queue, send a copy with the same MessageId, complete
// the dead-lettered message), once soon after the queues drained and once
// after the payments service's key retention has passed; and an order
// writer is shut down mid-run as on SIGTERM (its context cancelled, its
// handlers given the shutdown grace, its receiver closed, with whatever
// link credit it left) and replaced by a new worker. The relay is SIGKILLed
// after the topic accepted a batch and before its checkpoint (every later
// call of the instance fails and reaches nothing, its leases stay until
// they expire, another instance takes the range over and republishes the
// page); gets SIGTERM while sending (it finishes the page, checkpoints and
// releases, and another instance takes the range over at once); freezes
// after reading a page for a lease duration plus the duplicate-detection
// window (another instance takes the range over after the expiry; the
// frozen one then publishes its page past the window, so the subscribers
// get it again, and its checkpoint is refused with 412); and loses the
// answer to a batch the topic accepted (it sends the page again and the
// topic drops the copies).
//
// Some faults strike before success, where only the order in which the code
// commits keeps the message: a worker's ScheduleMessages of a delayed retry
// fails before the broker schedules anything (the worker must keep the
// original until its copy is scheduled); a relay's send fails before the
// topic sees the batch, and a relay is SIGKILLed after reading a page and
// before sending it (the relay must not checkpoint what it has not
// published). And a dependency can go down for a while and come back
// (outage.go): the whole store, only its writes, or the payment captures,
// which the breakers' probes see, or one key range of the store, which
// only their spread rule sees. Every fault is
// switchable and rate-controlled (FaultRates) and planned from the seed:
// whether a fault strikes a given opportunity (the n-th delivery of a
// queued message, the n-th store call for an order) is a function of the
// seed alone, so a failing seed replays the same plan. The goroutine
// interleaving differs between replays (the report marks the figures that
// depend on it); the invariants must hold under every interleaving.
//
// Faults other than an outage are bounded per order (MaxFaultsPerMessage,
// shared by the order's message and its status changes), so a correct
// consumer always gets a clean delivery before the broker gives up: a
// valid order message that is dead-lettered for MaxDeliveryCountExceeded
// after its order was stored and charged is the consumer's fault, not the
// plan's. An order whose payment never succeeds (the payments service down
// for good) is never lost: its messages are dead-lettered, the service
// charged nothing, and a resubmission finishes it.
//
// # What is simplified, and why it cannot hide a defect
//
//   - A restart stops one worker at a time, right after one of its
//     settlements, as a rolling deployment stops them one by one; its
//     other handlers are then anywhere in their work, and its receive loop
//     waits with its leftover credit, so the shutdown meets every state a
//     SIGTERM at another moment would.
//   - A crash is one delivery's: the crashed delivery sends nothing more
//     (no settlement, no renewal) while the worker's other deliveries go
//     on. A real crash ends all of them at once; each of those is a
//     delivery that stops at some point, which the per-delivery crash
//     already covers at every point the plan strikes.
//   - LockExpiry makes the broker end a lock as the handler starts
//     (sbqueue.Queue.ExpireLock), standing for a handler that overran its
//     lock (a pause, a renewal that could not get through). The worker's
//     own renewal and settlement then meet the lost lock as they would.
//   - A lost settlement is applied by the model as "not applied, lock
//     ended, reported as lock lost", the outcome a settlement on a dropped
//     link has; a settlement that is applied and then reported as failed is
//     the same to the consumer as a completed message redelivered after a
//     crash, which the plan covers.
//   - The queue model's receiver hands out a message as soon as one has
//     arrived on credit, without the SDK's 20 ms TimeAfterFirstMessage
//     wait; what would have arrived in those 20 ms arrives after the call
//     and is released by the modelled releaser, its delivery not counted,
//     so no delivery count rises that the SDK would not raise (see
//     sbqueue.Receiver).
//   - Store calls and payment requests take a fixed latency
//     (StoreLatency, PaymentLatency) and the store's failures are injected
//     before the call or after its commit; real latencies vary, but every
//     ordering the variation could produce between two deliveries is one
//     the lapsed locks, crashes and races of the plan produce too.
//   - The relay's faults are bounded (three of each kind a run) and one
//     instance pauses at a time, so that the run ends and a range always
//     has an instance to take it over; each fault meets the relay at a
//     point (between publish and checkpoint, mid-page, past the lease's
//     expiry) where any other moment's crash would meet the same state of
//     its lease. The relay's feed reads and lease writes do not fail
//     (package relay's own tests inject those), and the topic model's
//     batch size is Service Bus standard's 256 KB with an approximate
//     envelope size per message.
//   - The redelivery horizon the markers' default TTL follows covers the
//     queues' redeliveries, not a relay republishing after an arbitrarily
//     long pause: a republish later than MarkerTTL would be processed
//     again, which a test shows (a 5 minute TTL against a pause past the
//     10 minute window); the real relay's pauses are bounded by nothing.
//   - The inbox consumers' queues get no resubmissions: their markers' TTL
//     would then have to cover the resubmission horizon, which
//     order.RedeliveryHorizon computes and its own tests check; their
//     dead-letter reasons are held to the same invariants.
//   - The operator resubmits one message per MessageId per round, since a
//     second copy within the duplicate-detection window would be dropped
//     and the dead-lettered message it completes lost; the report counts
//     any resubmission the broker dropped nonetheless.
//   - The run's time scale (30 s locks, a 10 minute window and a one hour
//     key retention in the tests; seconds in `go run ./test/simulate`) is
//     shorter than production's, but every ratio the code depends on
//     (backoff to lock, lease to lock, resubmission to key retention) is
//     the one production has with the same settings.
//
// # The proof
//
// After the run, Check holds the final state (the queue, its dead-letter
// queue, the operator's record of what it resubmitted, and every stored
// document) against the producer's ground truth (what was sent, and which
// messages were valid, reused or malformed), and never against the
// consumer's own counters; for payments, against the payments service's
// own ledger of charges. The invariants are those of DESIGN.md §4, listed
// by Invariants: every valid order has exactly one order document and one
// OrderAccepted event (its side effect); no message is lost, on any queue
// (each was completed with its effect present, or dead-lettered with a
// reason that explains it, or resubmitted); mismatches and invalid
// messages are dead-lettered; duplicates change nothing (an order document
// keeps its creation fields and is rewritten only by status versions);
// every stored order was charged exactly once, and its payment record
// names that charge; every order ends at the highest status version sent;
// every stored OrderAccepted event was published by the relay and reached
// every subscription (event-reaches-every-subscription, across crashes,
// stops, pauses and lease takeovers); every inbox consumer processed every
// event exactly once, whatever the other did; no worker took a message from the broker without
// handing it to a handler (every receive locks a message and, once it is
// abandoned or its lock lapses, raises its delivery count); and no message
// was dead-lettered for MaxDeliveryCountExceeded while a dependency it
// needs was down (no-dead-letter-during-outage: the workers pause for an
// outage rather than spend the backlog's deliveries on it). The report
// accounts for every message sent (sent =
// enqueued + dropped; every enqueued message completed, dead-lettered with
// a reason, or resubmitted), and a report with a violation names the seed
// and the orders involved and prints each one's full history: sends,
// deliveries with their delivery counts and lock tokens, outcomes,
// settlements, store calls, payment calls and resubmissions. Tests show
// that broken consumers (one that treats a 409 as an error, one that
// acknowledges failed writes, one that deduplicates by id but not content,
// one that keys its writes by delivery, one that sends a fresh idempotency
// key per capture call, one that applies status changes without comparing
// versions, two inbox consumers sharing one name, inbox markers that expire
// before a relay's late republish, a relay that checkpoints a batch its
// send dropped) make the checker fail, and that the
// simulation reaches the paths of defects 1 and 2 of issue 9 in the payment
// step (a claim captured again after the key retention: a second charge; a
// claim left by a failed completed-mark waited out until MaxDeliveryCount)
// and defect 6 in the worker's shutdown (a receive at shutdown on fresh link
// credit, whose messages are abandoned unhandled): with any of those fixes
// reverted, TestSimulationFindsDefect1, 2 or 6 fails. Three defects of the
// product that strike before success fail the run too: a breaker that
// never opens (TestSimulationFindsABreakerThatNeverOpens), a delayed retry
// that completes the original before it schedules the copy
// (TestSimulationFindsACompletionBeforeItsCopy), and a relay that
// checkpoints a page before it publishes it
// (TestSimulationFindsACheckpointBeforePublish).
//
// The report also explains every duplicate the consumer suppressed by its
// cause (a producer retry, a redelivery after a lost lock or settlement, a
// concurrent race, a crash, an ambiguous write, a transient failure) from
// the recorded history of deliveries.
package simulation
