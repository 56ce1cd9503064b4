// Package simulation proves, by fault injection, that the idempotent consumer
// produces exactly one effect per message under every delivery fault of an
// at-least-once queue. It is also the project's embedded default: the whole
// pipeline in one process, with no Azure and no Docker
// (`go run ./cmd/orderworker -simulate`).
//
// # What runs
//
// Run drives the real code: package worker's receive loop (unchanged), with
// several competing workers, each running the consumer (order.Processor by
// default, which also applies status changes and captures each order's
// payment) against an in-memory Cosmos DB (package memstore), receiving
// from an in-process Service Bus queue (package sbqueue) with PeekLock,
// lock expiry, MaxDeliveryCount, a dead-letter queue and duplicate
// detection. The queue runs on a virtual clock, so a lock lapses or a
// duplicate-detection window passes instantly when the simulation moves the
// clock.
//
// Payments go through the project's payments.Client and payments.Gateway to
// the reference payments service (payments.Service), in process: the
// client's transport hands each request to the service's handler, with no
// socket. The service and the processor's payment claims run on the virtual
// clock too, with the queue's lock duration as the claim's lease, so a claim
// left by a crashed delivery goes stale exactly when its message's lock
// lapses. Some orders get status changes (versions 2 to 4), sent in order or
// shuffled, some before the order itself. Beside the order writers, two
// inbox consumers (order.InboxConsumer, "loyalty" and "audit") process the
// same orders, each from a queue of its own, as from the subscriptions of a
// Service Bus topic (whose filter keeps status changes out), each with
// faults of its own, writing to the same store; their markers expire on the
// virtual clock after MarkerTTL, by default the minimum retention
// order.RedeliveryHorizon computes for the queue's settings.
//
// # Faults
//
// Faults are injected by wrappers around the real components, never by
// changing them: the producer retries sends inside and outside the
// duplicate-detection window, reuses ids for other content and sends
// malformed bodies; a receiver wrapper makes locks lapse while handlers
// run, loses settlements (reported as lock lost) and crashes workers between
// their write and their settlement; a store wrapper fails calls with
// throttling or unavailability before they write, reports committed writes
// as timeouts, and takes some orders' storage down for good; the payments
// service fails capture requests with 5xx or 429 before charging, or
// charges and then drops the connection; the client's transport loses
// answers after the charge, as a client timeout does; and a worker dies
// between a capture call and the write that marks the payment completed,
// leaving the payment record in progress and the message locked until its
// lock (and the claim's lease) lapses. Every fault is
// switchable and rate-controlled (FaultRates) and planned from the seed:
// whether a fault strikes a given opportunity (the n-th delivery of a
// queued message, the n-th store call for an order) is a function of the
// seed alone, so a failing seed replays the same plan. The goroutine
// interleaving may differ between replays; the invariants must hold under
// every interleaving.
//
// Faults other than an outage are bounded per order (MaxFaultsPerMessage,
// shared by the order's message and its status changes), so a correct
// consumer always gets a clean delivery before the broker gives up: a
// valid message that is dead-lettered for MaxDeliveryCountExceeded while its
// order exists (and its payment completed) is the consumer's fault, not the
// plan's. A fault costs a message at most two deliveries (its own, and a
// retry that finds the payment claim it left still fresh), and a status
// change may be delivered once before its order exists, so the bound is
// (MaxDeliveryCount-2)/2. An order whose payment never completes is never
// lost: its messages are dead-lettered, the service charged it at most once,
// and its record stays in progress, to be finished (with the same key) by a
// resubmission.
//
// Where waiting is the point, the worker's retry backoff is modelled on the
// virtual clock: a status change that arrived before its order, or an order
// whose payment claim another delivery holds, is not abandoned at once (on
// the virtual clock it would be redelivered before anything changed, and
// burn its deliveries); its lock is left to lapse, so it comes back one lock
// duration later, after the claim's lease.
//
// # The proof
//
// After the run, Check holds the final state (the queue, its dead-letter
// queue and every stored document) against the producer's ground truth
// (what was sent, and which messages were valid, reused or malformed), and
// never against the consumer's own counters; for payments, against the
// payments service's own ledger of charges. The invariants are those of
// DESIGN.md §4, listed by Invariants: every valid order has exactly one
// order document and one OrderAccepted event (its side effect); no message
// is lost, on any queue (each was completed with its effect present, or
// dead-lettered with a reason that explains it); mismatches and invalid
// messages are dead-lettered; duplicates change nothing (an order document
// keeps its creation fields and is rewritten only by status versions);
// every stored order was charged exactly once, and its payment record names
// that charge; every order ends at the highest status version sent; every
// inbox consumer processed every valid order exactly once, whatever the
// other did. A report with a violation names the seed and the orders
// involved; tests show that broken consumers (one that treats a 409 as an
// error, one that acknowledges failed writes, one that deduplicates by id
// but not content, one that keys its writes by delivery, one that sends a
// fresh idempotency key per capture call, one that applies status changes
// without comparing versions, two inbox consumers sharing one name, inbox
// markers that expire before the redelivery horizon) make the checker fail.
//
// The report also explains every duplicate the consumer suppressed by its
// cause (a producer retry, a redelivery after a lost lock or settlement, a
// concurrent race, a crash, an ambiguous write, a transient failure) from
// the recorded history of deliveries.
package simulation
