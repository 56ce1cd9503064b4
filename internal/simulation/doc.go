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
// default) against an in-memory Cosmos DB (package memstore), receiving
// from an in-process Service Bus queue (package sbqueue) with PeekLock,
// lock expiry, MaxDeliveryCount, a dead-letter queue and duplicate
// detection. The queue runs on a virtual clock, so a lock lapses or a
// duplicate-detection window passes instantly when the simulation moves the
// clock.
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
// as timeouts, and takes some orders' storage down for good. Every fault is
// switchable and rate-controlled (FaultRates) and planned from the seed:
// whether a fault strikes a given opportunity (the n-th delivery of a
// queued message, the n-th store call for an order) is a function of the
// seed alone, so a failing seed replays the same plan. The goroutine
// interleaving may differ between replays; the invariants must hold under
// every interleaving.
//
// Faults other than an outage are bounded per message (MaxFaultsPerMessage,
// below MaxDeliveryCount), so a correct consumer always gets a clean
// delivery before the broker gives up: a valid message that is dead-lettered
// for MaxDeliveryCountExceeded while its order exists is the consumer's
// fault, not the plan's.
//
// # The proof
//
// After the run, Check holds the final state (the queue, its dead-letter
// queue and every stored document) against the producer's ground truth
// (what was sent, and which messages were valid, reused or malformed), and
// never against the consumer's own counters. The invariants are those of
// DESIGN.md §4, listed by Invariants: every valid order has exactly one
// order document and one OrderAccepted event (its side effect); no message
// is lost (each was completed with its effect present, or dead-lettered with
// a reason that explains it); mismatches and invalid messages are
// dead-lettered; no stored document was ever written twice. A report with a
// violation names the seed and the orders involved; tests show that broken
// consumers (one that treats a 409 as an error, one that acknowledges failed
// writes, one that deduplicates by id but not content, one that keys its
// writes by delivery) make the checker fail.
//
// The report also explains every duplicate the consumer suppressed by its
// cause (a producer retry, a redelivery after a lost lock or settlement, a
// concurrent race, a crash, an ambiguous write, a transient failure) from
// the recorded history of deliveries.
package simulation
