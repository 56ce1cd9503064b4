package telemetry

import "github.com/idempotent-consumer/sbcosmos/worker/otelworker"

// The log keys of the order workers' delivery lines (worker.Options.KeyAttr
// and ResumedAttr): the order's id, and a delivery that resumed a payment
// capture another delivery had begun. The README's log queries read them.
const (
	WorkerKeyAttr     = "order_id"
	WorkerResumedAttr = "payment_taken_over"
)

// WorkerNames returns the order workers' metric and span attribute names
// (otelworker.Names): metrics prefixed orderworker, attributes order, the
// entity's key as order.id, the store's request charge as
// orderworker.cosmosdb.request_units and a resumed effect as the payment
// takeover it is in the order example. The dashboards, alerts and docs
// under infra/ and docs/ read these names.
func WorkerNames() otelworker.Names {
	n := otelworker.PrefixedNames("orderworker", "order")
	n.Key = "order.id"
	n.RequestUnits = "orderworker.cosmosdb.request_units"
	n.Resumed = "orderworker.payment.takeovers"
	n.ResumedAttr = "order.payment.taken_over"
	return n
}
