package simulation_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// TestStatusChangesBeforeTheirOrderAreScheduled: every order's status
// changes go out of order, some before the order, and the order follows
// five minutes later, far past the ten deliveries its changes would spend
// on abandons (about 75 s with 30 s locks). The workers retry those
// changes by scheduled copies instead: none is dead-lettered for want of
// its order (status-is-highest-version), every copy is accounted for, and
// no change is applied twice.
func TestStatusChangesBeforeTheirOrderAreScheduled(t *testing.T) {
	cfg := simulation.Config{Orders: 20, Workers: 2, Concurrency: 4, Seed: 11, StatusChanges: 1,
		OrderDelay: 5 * time.Minute, DisableInbox: true,
		Faults: simulation.FaultRates{OutOfOrder: 1, LockExpiry: 0.1, LostSettlement: 0.1, Crash: 0.05}}
	rep, err := runSim(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		var b strings.Builder
		rep.WriteTo(&b)
		t.Fatalf("%v\n%s", err, b.String())
	}
	rt := rep.Accounting.Retries
	if rep.Status.BeforeOrder == 0 || rt.Enqueued == 0 {
		t.Fatalf("%d deliveries before their order, %d scheduled retries enqueued: the run did not reach the scheduled path", rep.Status.BeforeOrder, rt.Enqueued)
	}
	if rt.DeadLettered != 0 || rep.Status.DeadLettered != 0 {
		t.Errorf("%d scheduled retries and %d status changes dead-lettered, want none: every order was stored", rt.DeadLettered, rep.Status.DeadLettered)
	}
	// Each (order, version) is applied at most once: a copy of a change
	// applied already is stale.
	if distinct := 3 * rep.Status.Orders; rep.Outcomes.Applied > distinct {
		t.Errorf("%d status changes applied, more than the %d distinct changes at most sent: a copy applied twice", rep.Outcomes.Applied, distinct)
	}
	t.Logf("%d deliveries before their order, %d scheduled retries (%d completed), %d applied, %d stale",
		rep.Status.BeforeOrder, rt.Enqueued, rt.Completed, rep.Outcomes.Applied, rep.Outcomes.Stale)
}
