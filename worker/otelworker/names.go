package otelworker

import "go.opentelemetry.io/otel/attribute"

// The metrics of the OpenTelemetry semantic conventions, whose names no
// deployment changes.
const (
	// MetricConsumed counts messages received.
	MetricConsumed = "messaging.client.consumed.messages"
	// MetricProcessDuration is the histogram of a delivery's handling,
	// settlement included, in seconds, by Names.Outcome.
	MetricProcessDuration = "messaging.process.duration"
)

// Attribute keys of no deployment's own.
const (
	// AttrRenewalResult is the result of a lock renewal: "ok", "failed"
	// (retried) or "lost" (the handler is cancelled; the message is not
	// settled).
	AttrRenewalResult = attribute.Key("renewal.result")
	// AttrBreakerState is a circuit breaker's new state.
	AttrBreakerState = attribute.Key("breaker.state")
)

// Names are the names of the metrics and span attributes a Telemetry
// records besides the semantic conventions': a deployment's contract with
// its dashboards, queries and alerts, which it sets with a prefix of its
// own (see PrefixedNames). Prometheus shows the metrics with dots as
// underscores, the unit appended (_seconds) and counters ending in _total.
type Names struct {
	// Deliveries counts deliveries handled, by Outcome and Reason.
	Deliveries string
	// Duplicates counts duplicate outcomes by DuplicateCause:
	// "redelivery" (the broker delivered the same message again,
	// DeliveryCount > 1: a lost lock or settlement, a crash) or "resend"
	// (a first delivery of an id already processed: the producer sent it
	// again, outside the duplicate-detection window or without it).
	Duplicates string
	// Mismatches counts ids reused for other content (dead-lettered).
	Mismatches string
	// DeadLetters counts messages dead-lettered, by Reason.
	DeadLetters string
	// SettlementFailures counts settlements that failed, by
	// messaging.servicebus.disposition_status and error.type ("lock_lost",
	// another Service Bus code, or "_OTHER").
	SettlementFailures string
	// LockRenewals counts lock renewals by AttrRenewalResult.
	LockRenewals string
	// BreakerTransitions counts a circuit breaker's state changes by
	// AttrBreakerState, the new state (see Telemetry.BreakerChanged).
	BreakerTransitions string
	// BreakerOpen is 1 while the breaker is open or half-open (receiving
	// paused), else 0; summed over the workers of a process.
	BreakerOpen string
	// InFlight is the number of deliveries being handled (an up-down
	// counter, summed over the workers of a process).
	InFlight string
	// RequestUnits is the store's cumulative request charge
	// (Options.RequestCharge).
	RequestUnits string
	// CacheHits and CacheMisses are the cumulative hits and misses of
	// Options.CacheStats.
	CacheHits, CacheMisses string
	// Resumed counts deliveries that resumed a side effect another
	// delivery had begun (idempotent.Result.Resumed): each is an effect
	// interrupted by a lost lock, a crash or a timeout, and resumed with
	// the same idempotency key.
	Resumed string

	// Outcome is the attribute of a delivery's outcome, on its span and
	// metrics; Reason that of its reason (and of a dead-letter's).
	Outcome, Reason attribute.Key
	// Key is the span attribute of idempotent.Result.Key: the entity.
	Key attribute.Key
	// DuplicateCause is the attribute of Duplicates.
	DuplicateCause attribute.Key
	// LockLost and CutOff are span attributes of every delivery:
	// whether its lock was lost, and whether the shutdown grace cut it off.
	LockLost, CutOff attribute.Key
	// ResumedAttr is the span attribute set, to true, on a delivery with
	// Result.Resumed.
	ResumedAttr attribute.Key
	// RetryAttempt is the span attribute of the attempt of a copy
	// scheduled for a delayed retry.
	RetryAttempt attribute.Key
}

// PrefixedNames returns the names of a deployment whose metrics start with
// metric and whose span attributes start with attr, each followed by a
// dot: metric.deliveries, metric.duplicates, metric.mismatches,
// metric.dead_letters, metric.settlement.failures, metric.lock.renewals,
// metric.breaker.transitions, metric.breaker.open, metric.in_flight,
// metric.store.request_units, metric.cache.hits, metric.cache.misses,
// metric.effect.resumed; attr.outcome, attr.reason, attr.key,
// attr.duplicate.cause, attr.lock_lost, attr.cut_off, attr.effect_resumed,
// attr.retry.attempt. A deployment whose dashboards know other names sets
// those fields after.
func PrefixedNames(metric, attr string) Names {
	m := func(s string) string { return metric + "." + s }
	a := func(s string) attribute.Key { return attribute.Key(attr + "." + s) }
	return Names{
		Deliveries: m("deliveries"), Duplicates: m("duplicates"), Mismatches: m("mismatches"),
		DeadLetters: m("dead_letters"), SettlementFailures: m("settlement.failures"), LockRenewals: m("lock.renewals"),
		BreakerTransitions: m("breaker.transitions"), BreakerOpen: m("breaker.open"), InFlight: m("in_flight"),
		RequestUnits: m("store.request_units"), CacheHits: m("cache.hits"), CacheMisses: m("cache.misses"),
		Resumed: m("effect.resumed"),
		Outcome: a("outcome"), Reason: a("reason"), Key: a("key"), DuplicateCause: a("duplicate.cause"),
		LockLost: a("lock_lost"), CutOff: a("cut_off"), ResumedAttr: a("effect_resumed"), RetryAttempt: a("retry.attempt"),
	}
}

// DefaultNames are the names of Options with no Names:
// PrefixedNames("worker", "worker").
func DefaultNames() Names { return PrefixedNames("worker", "worker") }

// AttrKept is the span attribute of a process span the Telemetry keeps
// whatever a sampler's ratio, with why: KeptRedelivery on a redelivery's
// span (DeliveryCount > 1, known when it starts, so that its whole trace
// is kept: the settlement, the store's calls) and KeptFailure on the span
// a Telemetry records at the end of a delivery whose trace the sampler had
// dropped and that did not complete: dead-lettered (a mismatch, an invalid
// message), abandoned, cut off, its lock lost, its settlement or its
// retry's scheduling failed.
//
// The deployment's sampler does the keeping: it samples every span whose
// start attributes (SamplingParameters.Attributes in the OpenTelemetry SDK)
// carry AttrKept and leaves the others to its ratio, for example
//
//	func (s kept) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
//		for _, a := range p.Attributes {
//			if a.Key == otelworker.AttrKept {
//				return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample,
//					Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
//			}
//		}
//		return s.ratio.ShouldSample(p) // sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))
//	}
//
// (This package leaves the SDK to the deployment, so that the core links
// the OpenTelemetry API only.) Without such a sampler the attribute is
// only a label, and a sampled-out failure's span is dropped as its trace
// was.
//
// A span kept for failure is the process span alone, a child of the
// dropped one (so it has the trace id the dropped span had): its outcome,
// reason, key, message id, delivery count, error and duration, without
// the settlement's and the store's spans, which were not recorded. A query
// that counts deliveries from spans must leave the kept ones out (or read
// a metric): they are not a sample.
const AttrKept = attribute.Key("sampling.kept")

// The values of AttrKept.
const (
	KeptRedelivery = "redelivery"
	KeptFailure    = "failure"
)
