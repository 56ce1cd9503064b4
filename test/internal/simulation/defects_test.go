package simulation_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// defectConfig is the run that reaches defect 2 of issue 9: a 5 minute
// lock (the lease of the old payment step was the worker's message
// timeout, 4 minutes, and the worker's backoff is at most 75 s),
// completed-marks that fail once, and dead-letter resubmissions.
func defectConfig(seed uint64, early, late float64) simulation.Config {
	return simulation.Config{
		Orders: 40, Seed: seed, LockDuration: 5 * time.Minute, DisableInbox: true, DisableStatusChanges: true,
		Faults: simulation.FaultRates{PaymentMarkFailure: 0.1, ResubmitEarly: early, ResubmitLate: late},
	}
}

// defect1Config is the run that reaches defect 1 of issue 9 even with
// defect 2 fixed: after the charge, some orders' payment records cannot be
// written for the rest of their first copy's deliveries, so the copy is
// dead-lettered with its claim in progress; the operator resubmits every
// dead-lettered message after the payments service forgot the keys.
func defect1Config(seed uint64) simulation.Config {
	return simulation.Config{
		Orders: 40, Seed: seed, DisableInbox: true, DisableStatusChanges: true,
		Faults: simulation.FaultRates{PaymentRecordOutage: 0.1, ResubmitLate: 1},
	}
}

// checkDefectSeeds runs cfg for each seed; every run must reach the fault
// that leads into the defect and pass. With the defect's fix reverted, the
// runs fail with the violation want (detail), as they did before the fix:
// the closing note of issue 9 shows it.
func checkDefectSeeds(t *testing.T, seeds []uint64, cfg func(uint64) simulation.Config, want, detail string) {
	for _, seed := range seeds {
		rep, err := runSim(t, cfg(seed))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Faults.PaymentMarkFailure == 0 && rep.Faults.PaymentRecordOutage == 0 {
			t.Fatalf("seed %d: no completed-mark failed: the run cannot show the defect", seed)
		}
		if err := rep.Verdict(); err != nil {
			var b strings.Builder
			rep.WriteTo(&b)
			t.Errorf("seed %d: %v (the defect shows as %s: %q)\n%s", seed, err, want, detail, b.String())
		}
	}
}

// TestSimulationFindsDefect1 guards the payment lookup of old claims
// (defect 1 of issue 9): the charged order's payment record cannot be
// written for the rest of its copy's life, the message is dead-lettered
// with the claim in progress, and the operator resubmits it after the
// payments service forgot the key. A payment step that captures such a
// claim again with the same key makes a new request of it: a second charge
// (one-charge-per-order fails). The fixed step looks the payment up.
func TestSimulationFindsDefect1(t *testing.T) {
	checkDefectSeeds(t, []uint64{0, 1, 2}, defect1Config, simulation.OneChargePerOrder, "charged 2 times")
}

// TestSimulationFindsDefect2 guards the fenced claim (defect 2 of issue 9):
// a completed-mark fails once. A payment step that neither releases its
// claim nor lets the next delivery of the same copy take it over makes
// every redelivery wait for the lease (the worker's backoff is shorter)
// until the broker dead-letters the charged order's message for
// MaxDeliveryCountExceeded (no-message-lost fails). The fixed step
// completes it on the next delivery.
func TestSimulationFindsDefect2(t *testing.T) {
	checkDefectSeeds(t, []uint64{1, 2, 3}, func(seed uint64) simulation.Config { return defectConfig(seed, 1, 0) },
		simulation.NoMessageLost, "dead-lettered as MaxDeliveryCountExceeded")
}

// TestSimulationFindsDefect6 guards the shutdown (defect 6 of issue 9):
// workers restart (shut down as on SIGTERM and replaced) while messages are
// waiting. A shutdown that asks the receiver for messages after its
// handlers drained issues fresh link credit: the broker sends and locks
// messages on it, and abandoning them raises the delivery count of
// messages no handler saw (no-untouched-delivery fails).
func TestSimulationFindsDefect6(t *testing.T) {
	defect6Seeds := []uint64{0, 1, 2}
	for _, seed := range defect6Seeds {
		rep, err := runSim(t, simulation.Config{Orders: 200, Workers: 2, Concurrency: 2, Seed: seed, DisableInbox: true,
			Faults: simulation.FaultRates{WorkerRestart: 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Restarts == 0 {
			t.Fatalf("seed %d: no worker restarted: the run cannot show the defect", seed)
		}
		if err := rep.Verdict(); err != nil {
			var b strings.Builder
			rep.WriteTo(&b)
			t.Errorf("seed %d: %v (the defect shows as %s)\n%s", seed, err, simulation.NoUntouchedDelivery, b.String())
		}
	}
}
