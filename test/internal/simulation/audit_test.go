package simulation_test

import (
	"fmt"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// TestFinalStoreAuditsClean runs orderctl audit's checks (package
// order/audit) on the final store of seeded runs with mixed faults: every
// violation the audit reports is explained by the run's ground truth (an
// order the run made unusable, or one with a message left in a dead-letter
// queue for the operator), and the audit checked every invariant it could.
func TestFinalStoreAuditsClean(t *testing.T) {
	cfgs := map[string]simulation.Config{"every fault": {Orders: 200, Workers: 3, Concurrency: 4, Seed: 7, Faults: simulation.DefaultFaultRates()}}
	for _, seed := range []uint64{1, 2, 3, 42} {
		cfgs[fmt.Sprintf("seed=%d", seed)] = scenario(seed)
	}
	for name, cfg := range cfgs {
		cfg.Audit = true
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep, err := runSim(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.Verdict(); err != nil {
				t.Fatal(err)
			}
			a := rep.Audit
			if a == nil {
				t.Fatal("no audit report")
			}
			for _, v := range a.Unexplained {
				t.Errorf("audit violation the run does not explain: %s: %s", v.ID, v.Detail)
			}
			for _, r := range a.Report.Invariants {
				t.Logf("%-15s checked %4d, violations %d %s", r.Name, r.Checked, r.Violations, r.NotChecked)
			}
			t.Logf("%d violations explained by dead-lettered or unusable orders", a.Explained)
			if got := a.Report.Result(audit.OrderEvent).Checked; got != rep.OrderDocuments {
				t.Errorf("order-event checked %d orders, the store holds %d", got, rep.OrderDocuments)
			}
			for _, n := range []string{audit.Payment, audit.PaymentLedger, audit.Status, audit.Inbox, audit.MarkerTTL, audit.RelayLag, audit.RelayLease} {
				if r := a.Report.Result(n); r.Checked == 0 {
					t.Errorf("%s checked nothing (%s)", n, r.NotChecked)
				}
			}
		})
	}
}

// TestBrokenPatternsFailTheAudit is TestBrokenPatternsFailTheChecker for
// the audit: a broken pattern must be caught from the final store alone,
// with violations the run's ground truth does not explain, under the
// invariant the bug breaks.
func TestBrokenPatternsFailTheAudit(t *testing.T) {
	redeliveries := simulation.FaultRates{LockExpiry: 0.3, LostSettlement: 0.3, Crash: 0.3, RetryOutsideWindow: 0.3}
	tests := []struct {
		name string
		cfg  simulation.Config
		want string
	}{
		{"keys its writes by delivery", simulation.Config{Consumer: keyedByDelivery, Faults: redeliveries}, audit.OrderEvent},
		{"a fresh idempotency key per call", simulation.Config{Consumer: withFreshKeys, Faults: simulation.FaultRates{PaymentTimeout: 0.6}}, audit.PaymentLedger},
		{"status changes applied without comparing versions",
			simulation.Config{Consumer: blindStatus, StatusChanges: 1, Faults: simulation.FaultRates{OutOfOrder: 1}}, audit.Status},
		{"two inbox consumers sharing one name", simulation.Config{InboxConsumer: sharedName}, audit.Inbox},
		{"a relay that checkpoints a batch its send dropped", simulation.Config{RelaySender: droppingSender}, audit.Inbox},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Orders, cfg.Workers, cfg.Concurrency, cfg.Seed, cfg.Audit = 60, 3, 4, 3, true
			rep, err := runSim(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Audit == nil {
				t.Fatal("no audit report")
			}
			var caught []string
			for _, v := range rep.Audit.Unexplained {
				caught = append(caught, v.ID)
			}
			if r := rep.Audit.Report.Result(tt.want); r.Violations == 0 || len(caught) == 0 {
				t.Fatalf("the audit missed the bug: %s has %d violations, %d unexplained", tt.want, r.Violations, len(caught))
			}
			t.Logf("%s: %d violations, first %v", tt.want, rep.Audit.Report.Result(tt.want).Violations, rep.Audit.Report.Result(tt.want).First[0])
		})
	}
}
