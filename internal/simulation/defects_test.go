package simulation_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/simulation"
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

// checkDefectSeeds runs cfg for each seed. With the payment step fixed,
// every run must pass; until then each must fail with the defect's
// violation (want), which shows the simulation reaches it.
func checkDefectSeeds(t *testing.T, seeds []uint64, cfg func(uint64) simulation.Config, want, detail string) {
	for _, seed := range seeds {
		rep, err := runSim(t, cfg(seed))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Faults.PaymentMarkFailure == 0 && rep.Faults.PaymentRecordOutage == 0 {
			t.Fatalf("seed %d: no completed-mark failed: the run cannot show the defect", seed)
		}
		var b strings.Builder
		rep.WriteTo(&b)
		if paymentStepFixed {
			if err := rep.Verdict(); err != nil {
				t.Errorf("seed %d: %v\n%s", seed, err, b.String())
			}
			continue
		}
		found := slices.ContainsFunc(rep.Violations, func(v simulation.Violation) bool {
			return v.Invariant == want && strings.Contains(v.Detail, detail)
		})
		if !found {
			t.Errorf("seed %d: the unfixed payment step did not show %s %q (set paymentStepFixed if it is fixed):\n%s", seed, want, detail, b.String())
		}
	}
}

// TestSimulationFindsDefect1: a completed-mark fails, the claim stays in
// progress, the message is dead-lettered, and the operator resubmits it
// after the payments service forgot the key: the stale claim is captured
// again with the same key, which is now a new request: a second charge.
func TestSimulationFindsDefect1(t *testing.T) {
	checkDefectSeeds(t, []uint64{0, 1, 2}, defect1Config, simulation.OneChargePerOrder, "charged 2 times")
}

// TestSimulationFindsDefect2: a completed-mark fails and the claim, fresh,
// is waited out by every redelivery (the worker's backoff is shorter than
// the lease) until the broker dead-letters the message for
// MaxDeliveryCountExceeded, although the order was charged. The operator
// resubmits it before the key retention passes, so nothing is charged
// twice: only the dead-letter is wrong.
func TestSimulationFindsDefect2(t *testing.T) {
	checkDefectSeeds(t, []uint64{1, 2, 3}, func(seed uint64) simulation.Config { return defectConfig(seed, 1, 0) },
		simulation.NoMessageLost, "dead-lettered as MaxDeliveryCountExceeded")
}

// TestSimulationFindsDefect6: workers restart (shut down as on SIGTERM and
// replaced) while messages are waiting. The worker's shutdown asks the
// receiver for Concurrency messages after its handlers drained, which
// issues fresh link credit: the broker sends and locks messages on it, and
// the worker abandons them, raising the delivery count of messages no
// handler saw.
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
		var b strings.Builder
		rep.WriteTo(&b)
		switch {
		case shutdownFixed && rep.Verdict() != nil:
			t.Errorf("seed %d: %v\n%s", seed, rep.Verdict(), b.String())
		case !shutdownFixed && !slices.Contains(rep.InvariantsFailed, simulation.NoUntouchedDelivery):
			t.Errorf("seed %d: the unfixed shutdown did not show %s (set shutdownFixed if it is fixed):\n%s", seed, simulation.NoUntouchedDelivery, b.String())
		}
	}
}
