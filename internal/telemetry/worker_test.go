package telemetry_test

import (
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// TestWorkerNamesAreTheDeployedOnes: the order workers keep the names the
// dashboards, alerts and docs read, now that the worker's own defaults are
// neutral.
func TestWorkerNamesAreTheDeployedOnes(t *testing.T) {
	want := otelworker.Names{
		Deliveries: "orderworker.deliveries", Duplicates: "orderworker.duplicates", Mismatches: "orderworker.mismatches",
		DeadLetters: "orderworker.dead_letters", SettlementFailures: "orderworker.settlement.failures",
		LockRenewals: "orderworker.lock.renewals", BreakerTransitions: "orderworker.breaker.transitions",
		BreakerOpen: "orderworker.breaker.open", InFlight: "orderworker.in_flight",
		RequestUnits: "orderworker.cosmosdb.request_units", CacheHits: "orderworker.cache.hits", CacheMisses: "orderworker.cache.misses",
		Resumed: "orderworker.payment.takeovers",
		Outcome: "order.outcome", Reason: "order.reason", Key: "order.id", DuplicateCause: "order.duplicate.cause",
		LockLost: "order.lock_lost", CutOff: "order.cut_off", ResumedAttr: "order.payment.taken_over", RetryAttempt: "order.retry.attempt",
	}
	if got := telemetry.WorkerNames(); got != want {
		t.Errorf("WorkerNames() = %+v\nwant %+v", got, want)
	}
	if telemetry.WorkerKeyAttr != "order_id" || telemetry.WorkerResumedAttr != "payment_taken_over" {
		t.Errorf("log keys %q, %q; want order_id, payment_taken_over", telemetry.WorkerKeyAttr, telemetry.WorkerResumedAttr)
	}
}
