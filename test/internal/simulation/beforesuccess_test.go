package simulation_test

import (
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// Faults that strike before success (issue 32): a call fails and nothing
// happened, so only the order in which the product commits keeps the
// message. Each test below runs seeds whose plan strikes its fault and
// must pass; with the defect it names planted in the product, the runs
// fail with the invariant it names.

// checkBeforeSuccess runs cfg for each seed; struck reads from the report
// how often the fault under test struck, which must be at least once, and
// every invariant must hold. want names the invariant the planted defect
// breaks, for the failure message.
func checkBeforeSuccess(t *testing.T, seeds []uint64, cfg func(uint64) simulation.Config, struck func(*simulation.Report) int, defect, want string) {
	t.Helper()
	for _, seed := range seeds {
		rep, err := runSim(t, cfg(seed))
		if err != nil {
			t.Fatal(err)
		}
		if struck(rep) == 0 {
			t.Fatalf("seed %d: the fault never struck: the run cannot show %s", seed, defect)
		}
		if err := rep.Verdict(); err != nil {
			var b strings.Builder
			rep.WriteTo(&b)
			t.Errorf("seed %d: %v (%s shows as %s)\n%s", seed, err, defect, want, b.String())
		}
	}
}

// TestSimulationFindsABreakerThatNeverOpens: the whole store goes down for
// ten lock durations while the order writers' queue has a backlog; the
// breaker's probe (a point read) fails with it. A breaker that opens stops
// receiving, and each message loses at most the delivery it was in; one
// that never opens (Admit always admits, or open does nothing) lets the
// workers spend every received message's deliveries on the outage, and
// the broker dead-letters them (no-dead-letter-during-outage fails for most
// of the backlog). The inbox consumers are off: their queues hold a trickle
// when the outage begins, which the breaker's per-worker threshold lets
// drain (see the doc of outage.go).
func TestSimulationFindsABreakerThatNeverOpens(t *testing.T) {
	checkBeforeSuccess(t, []uint64{0, 1, 2}, func(seed uint64) simulation.Config {
		return simulation.Config{Orders: 200, Seed: seed, DisableInbox: true, Faults: simulation.FaultRates{StoreOutage: 0.05}}
	}, func(r *simulation.Report) int { return len(r.BeforeSuccess.Outages) }, "a breaker that never opens", simulation.NoDeadLetterDuringOutage)
}

// TestSimulationFindsACompletionBeforeItsCopy: status changes arrive before
// their order and are retried by scheduled copies, and some schedulings
// fail before the broker schedules anything. A worker that schedules the
// copy and then completes the original abandons the original when the
// scheduling fails, and a redelivery schedules again; one that completes
// the original first and then schedules loses the change when the
// scheduling fails (status-is-highest-version fails: the change was
// completed and its version never stored).
func TestSimulationFindsACompletionBeforeItsCopy(t *testing.T) {
	checkBeforeSuccess(t, []uint64{0, 1, 2}, func(seed uint64) simulation.Config {
		return simulation.Config{Orders: 200, Seed: seed, DisableInbox: true, Faults: simulation.FaultRates{OutOfOrder: 1, ScheduleFailure: 0.3}}
	}, func(r *simulation.Report) int { return r.BeforeSuccess.ScheduleFailures }, "a delayed retry that completes the original before scheduling its copy", simulation.StatusIsHighestVersion)
}

// TestSimulationFindsACheckpointBeforePublish: the relay's sends fail
// before the topic sees them, and instances are SIGKILLed after reading a
// page and before sending it. A relay that publishes and then checkpoints
// reads the page again (or another instance does, once the lease
// expires); one that checkpoints a page before publishing it loses the
// page (event-reaches-every-subscription fails).
func TestSimulationFindsACheckpointBeforePublish(t *testing.T) {
	checkBeforeSuccess(t, []uint64{0, 1, 2}, func(seed uint64) simulation.Config {
		return simulation.Config{Orders: 200, Seed: seed, DisableStatusChanges: true, Faults: simulation.FaultRates{RelaySendFailure: 0.2, RelayCrashBeforeSend: 0.2}}
	}, func(r *simulation.Report) int { return r.Relay.SendFailures + r.Relay.CrashesBeforeSend }, "a relay that checkpoints a page before publishing it", simulation.EventReachesEverySubscription)
}

// TestOutagesDeadLetterNothing: each kind of dependency outage, on its
// own, for ten lock durations while messages wait, dead-letters nothing
// (no-dead-letter-during-outage). The outages the breakers' probes see
// (the whole store; its writes, which the store's probe deletes; the
// payment captures, which the payments service's probe exercises) run
// with four workers of two handlers on every queue, the inbox consumers'
// quiet ones included: each worker spends at most one delivery of a
// message before its probe opens it. One key range of the store, which
// only the spread rule sees, runs on the order writers' queue with a
// backlog, as cmd/orderworker is deployed (three workers of eight
// handlers): on a queue where fewer than the spread's entities fail (an
// inbox consumer's trickle), it cannot be told from poison messages, and
// its messages are dead-lettered as theirs are (see outage.go).
func TestOutagesDeadLetterNothing(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		faults               simulation.FaultRates
		workers, concurrency int
		disableInbox         bool
	}{
		{"the whole store", simulation.FaultRates{StoreOutage: 0.05}, 4, 2, false},
		{"the store's writes", simulation.FaultRates{StoreWriteOutage: 0.05}, 4, 2, false},
		{"the payment captures", simulation.FaultRates{CaptureOutage: 0.05}, 4, 2, false},
		{"one key range", simulation.FaultRates{PartitionOutage: 0.05}, 3, 8, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkBeforeSuccess(t, []uint64{0, 1, 2}, func(seed uint64) simulation.Config {
				return simulation.Config{Orders: 200, Seed: seed, Workers: tt.workers, Concurrency: tt.concurrency, DisableInbox: tt.disableInbox, Faults: tt.faults}
			}, func(r *simulation.Report) int { return len(r.BeforeSuccess.Outages) }, "a breaker that does not stop for an outage of "+tt.name, simulation.NoDeadLetterDuringOutage)
		})
	}
}
