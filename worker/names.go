package worker

import "go.opentelemetry.io/otel/attribute"

// The worker's names: its log keys, span attributes and metrics. They are
// this deployment's contract (the README's queries, the dashboards and the
// alerts in infra/ use them), and they name the order example's entity.
// They are all in this file, so that a copy of the worker for another
// domain renames them in one place; nothing else in the package knows what
// the messages are about.

// Log keys of the delivery log (see Logs in the package documentation).
const (
	logKeyID        = "order_id"           // Result.Key
	logKeyTakenOver = "payment_taken_over" // Result.Resumed
	// Of a delivery retried by a scheduled copy: the copy's attempt and
	// its delay.
	logKeyRetryAttempt = "retry_attempt"
	logKeyRetryDelay   = "retry_delay_ms"
)

// Span attributes the worker sets besides the semantic conventions'.
const (
	attrLockLost  = "order.lock_lost"
	attrCutOff    = "order.cut_off"
	attrTakenOver = "order.payment.taken_over" // Result.Resumed
	// The attempt of the copy scheduled for a delayed retry.
	attrRetryAttempt = "order.retry.attempt"
)

// The names of the worker's metrics. Prometheus shows them with dots as
// underscores, the unit appended (_seconds) and counters ending in _total.
const (
	// MetricConsumed counts messages received (semconv).
	MetricConsumed = "messaging.client.consumed.messages"
	// MetricProcessDuration is the histogram of a delivery's handling,
	// settlement included, in seconds, by order.outcome (semconv).
	MetricProcessDuration = "messaging.process.duration"
	// MetricDeliveries counts deliveries handled by order.outcome and
	// order.reason.
	MetricDeliveries = "orderworker.deliveries"
	// MetricDuplicates counts duplicate outcomes by order.duplicate.cause:
	// "redelivery" (the broker delivered the same message again,
	// DeliveryCount > 1: a lost lock or settlement, a crash) or "resend"
	// (a first delivery of an id already processed: the producer sent it
	// again, outside the duplicate-detection window or without it).
	MetricDuplicates = "orderworker.duplicates"
	// MetricMismatches counts ids reused for other content (dead-lettered).
	MetricMismatches = "orderworker.mismatches"
	// MetricDeadLetters counts messages dead-lettered by order.reason.
	MetricDeadLetters = "orderworker.dead_letters"
	// MetricSettlementFailures counts settlements that failed, by
	// messaging.servicebus.disposition_status and error.type ("lock_lost",
	// another Service Bus code, or "_OTHER").
	MetricSettlementFailures = "orderworker.settlement.failures"
	// MetricLockRenewals counts lock renewals by renewal.result: "ok",
	// "failed" (retried) or "lost" (the handler is cancelled; the message
	// is not settled).
	MetricLockRenewals = "orderworker.lock.renewals"
	// MetricBreakerTransitions counts the circuit breaker's state changes
	// by breaker.state, the new state.
	MetricBreakerTransitions = "orderworker.breaker.transitions"
	// MetricBreakerOpen is 1 while the breaker is open or half-open
	// (receiving paused), else 0; summed over the workers of a process.
	MetricBreakerOpen = "orderworker.breaker.open"
	// MetricInFlight is the number of deliveries being handled (an
	// up-down counter, summed over the workers of a process).
	MetricInFlight = "orderworker.in_flight"
	// MetricRequestUnits is the store's cumulative request charge
	// (Options.RequestCharge), in request units.
	MetricRequestUnits = "orderworker.cosmosdb.request_units"
	// MetricCacheHits and MetricCacheMisses are the cumulative hits and
	// misses of Options.CacheStats.
	MetricCacheHits   = "orderworker.cache.hits"
	MetricCacheMisses = "orderworker.cache.misses"
	// MetricPaymentTakeovers counts deliveries that took over a payment
	// claim another delivery held (idempotent.Result.Resumed): an
	// earlier delivery of the same copy whose lock ended, or a holder
	// whose lease ran out. Each is a capture interrupted by a lost lock,
	// a crash or a timeout, and resumed with the same idempotency key.
	MetricPaymentTakeovers = "orderworker.payment.takeovers"
)

// The attribute keys of the project's own attributes.
const (
	AttrOutcome        = attribute.Key("order.outcome")
	AttrReason         = attribute.Key("order.reason")
	AttrOrderID        = attribute.Key("order.id")
	AttrDuplicateCause = attribute.Key("order.duplicate.cause")
	AttrRenewalResult  = attribute.Key("renewal.result")
	AttrBreakerState   = attribute.Key("breaker.state")
)
