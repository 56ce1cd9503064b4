package simulation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// TestSeededScenarios is the proof: for many seeds, each with its own mix of
// faults, several competing workers and the real worker loop, every
// invariant holds. A failure names the seed; replay it with
// go run ./test/simulate -seed N and the same sizes.
//
// Built with -race it runs the race-checked seeds
// (raceChecked), which TestRaceCheckedSeedsCoverTheSweep keeps
// representative, and TestSeededScenariosWithoutRace runs all of them in a
// test binary without the race detector.
func TestSeededScenarios(t *testing.T) {
	for _, seed := range sweepSeeds(raceDetector) {
		cfg := scenario(seed)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rep, err := runSim(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.Verdict(); err != nil {
				var b strings.Builder
				rep.WriteTo(&b)
				t.Fatalf("%v\n%s", err, b.String())
			}
			if !rep.Accounting.Balanced() {
				var b strings.Builder
				rep.WriteTo(&b)
				t.Fatalf("the order writers' queue is not accounted for: %+v\n%s", rep.Accounting, b.String())
			}
			if rep.Enqueued == 0 || rep.Outcomes.Created == 0 {
				t.Fatalf("nothing happened: %+v", rep)
			}
		})
	}
}

// scenario derives a mixed fault plan from the seed: each fault is on or off
// and, when on, has a rate of 5-30%, so that seeds cover both single faults
// and every combination.
func scenario(seed uint64) simulation.Config {
	x := seed*0x9e3779b97f4a7c15 + 1
	next := func() uint64 { // xorshift: a fixed, cheap sequence per seed
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	rate := func() float64 {
		if next()%3 == 0 {
			return 0
		}
		return 0.05 + float64(next()%26)/100
	}
	orders, workers, concurrency := 30+int(next()%31), 2+int(next()%3), 1+int(next()%6)
	restart := 0.0
	if seed%4 == 3 { // a quarter of the seeds restart workers
		restart = 0.01
	}
	return simulation.Config{
		Orders:      orders,
		Workers:     workers,
		Concurrency: concurrency,
		Seed:        seed,
		Faults: simulation.FaultRates{
			ProducerRetry: rate(), RetryOutsideWindow: rate(), Crash: rate(), LostSettlement: rate(),
			LockExpiry: rate(), Transient: rate(), Ambiguous: rate(), Outage: rate() / 3,
			Reuse: rate(), Malformed: rate(),
			OutOfOrder: rate() * 3, PaymentFailure: rate(), PaymentTimeout: rate(), PaymentCrash: rate(),
			PaymentMarkFailure: rate(), ResubmitEarly: 2 * rate(), ResubmitLate: 1, WorkerRestart: restart,
			PaymentRecordOutage: rate() / 3, ReplicaLag: rate(),
			RelayCrash: rate(), RelayStop: rate(), RelayPause: rate() / 2, RelayLostAck: rate(),
			// Drawn last, so that the rates above stay each seed's own.
			ScheduleFailure: rate(), RelaySendFailure: rate(), RelayCrashBeforeSend: rate(),
			StoreOutage: rate() / 3, StoreWriteOutage: rate() / 3, CaptureOutage: rate() / 3,
		},
	}
}

// TestEveryFaultOccurs guards the proof against a fault plan that quietly
// stopped injecting: with every fault on, every fault happens and every
// duplicate cause is seen. A seed fixes the plan but not how the handlers
// interleave, and a few faults depend on it (a lagging read that comes
// before its order's create reached the replica, a republish after the
// topic's window): one run can see none of them by chance (a run on an
// idle machine saw no read missing its document). So two seeds run, each
// checked in full, and each fault must occur in at least one of them; a
// fault plan that stopped injecting still fails both.
func TestEveryFaultOccurs(t *testing.T) {
	seen := map[string]int{}
	for _, seed := range []uint64{7, 9} {
		rep := everyFaultRun(t, seed)
		for name, n := range faultRows(rep) {
			seen[name] += n
		}
	}
	for name, n := range seen {
		if n == 0 {
			t.Errorf("no %s in either run", name)
		}
	}
}

// TestRelayInstanceStoppedThenKilled: with every fault on, seed 8's plan
// has a relay instance get SIGTERM while it sends a batch and SIGKILL
// right after the same send (relay-1.2: a supervisor's kill after the grace
// period). That is two faults and one instance ended, replaced once; the
// check counted faults and failed this seed (and seed 11) with 7 instances
// against 8. It now counts the instances a fault ended. (Which slot's
// instance spends the fault budget depends on how the two slots
// interleave, so a run may see no instance struck twice; it logs which.)
func TestRelayInstanceStoppedThenKilled(t *testing.T) {
	r := everyFaultRun(t, 8).Relay
	t.Logf("%d crashes and %d stops ended %d instances (%d struck twice); %d started",
		r.Crashes, r.Stops, r.Ended, r.Crashes+r.Stops-r.Ended, r.Instances)
}

// everyFaultRun runs seed with every fault on and checks what must hold of
// each run: the verdict, the accounting and every duplicate explained.
func everyFaultRun(t *testing.T, seed uint64) *simulation.Report {
	t.Helper()
	rep, err := runSim(t, simulation.Config{
		Orders: 400, Workers: 3, Concurrency: 4, Seed: seed,
		Faults: simulation.FaultRates{
			ProducerRetry: 0.2, RetryOutsideWindow: 0.2, Crash: 0.1, LostSettlement: 0.1, LockExpiry: 0.1,
			Transient: 0.1, Ambiguous: 0.1, Outage: 0.02, Reuse: 0.1, Malformed: 0.1, Poison: 0.01,
			OutOfOrder: 0.5, PaymentFailure: 0.4, PaymentTimeout: 0.1, PaymentCrash: 0.1, PaymentMarkFailure: 0.05, ResubmitEarly: 0.5, ResubmitLate: 1,
			RelayCrash: 0.2, RelayStop: 0.2, RelayPause: 0.2, RelayLostAck: 0.2, ReplicaLag: 0.5,
			ScheduleFailure: 0.2, RelaySendFailure: 0.2, RelayCrashBeforeSend: 0.2,
			StoreOutage: 0.01, StoreWriteOutage: 0.01, CaptureOutage: 0.01,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if len(rep.Inbox) != 2 {
		t.Fatalf("seed %d: %d inbox consumers", seed, len(rep.Inbox))
	}
	if !rep.Accounting.Balanced() {
		t.Errorf("seed %d: the order writers' queue is not accounted for: %+v", seed, rep.Accounting)
	}
	dc := rep.DuplicateCauses
	if dc.Unexplained != 0 {
		t.Errorf("seed %d: %d duplicates unexplained", seed, dc.Unexplained)
	}
	if p := rep.Payments; p.Charges != rep.OrderDocuments || p.Completed != rep.OrderDocuments {
		t.Errorf("seed %d: %d orders, %d charges, %d payment records completed", seed, rep.OrderDocuments, p.Charges, p.Completed)
	}
	for _, in := range rep.Inbox {
		if in.Outcomes.Created == 0 || in.Outcomes.Duplicate == 0 || in.Faults == 0 || in.Entries == 0 || !in.Accounting.Balanced() {
			t.Errorf("seed %d: inbox consumer %s: %+v", seed, in.Consumer, in)
		}
	}
	if r := rep.Relay; r.Ended == 0 || r.Instances < 2+r.Ended || r.Unpublishable != 0 || r.TopicEnqueued != int64(rep.EventDocuments+r.Republished) {
		t.Errorf("seed %d: relay %+v: want crashes or stops, an instance per slot and per instance one ended, nothing unpublishable, and the topic to accept each of %d events once plus the republishes", seed, r, rep.EventDocuments)
	}
	if rep.Outcomes.Duplicate != dc.Total() {
		t.Errorf("seed %d: %d duplicates, %d attributed", seed, rep.Outcomes.Duplicate, dc.Total())
	}
	return rep
}

// faultRows counts, for TestEveryFaultOccurs, each fault and duplicate
// cause a run saw.
func faultRows(rep *simulation.Report) map[string]int {
	f, dc := rep.Faults, rep.DuplicateCauses
	return map[string]int{
		"producer retries":                     f.ProducerRetry,
		"late retries":                         f.LateRetry,
		"reuses":                               f.Reuse,
		"malformed":                            f.Malformed,
		"crashes":                              f.Crash,
		"lost settlements":                     f.LostSettlement,
		"lock expiries":                        f.LockExpiry,
		"transient errors":                     f.Transient,
		"ambiguous writes":                     f.Ambiguous,
		"outage errors":                        f.OutageErrors,
		"undecodable reads of poison orders":   f.PoisonReads,
		"duplicates after a producer retry":    dc.ProducerRetry,
		"duplicates after lock loss":           dc.LockLoss,
		"duplicates in a race (any queue)":     dc.ConcurrentRace + rep.Inbox[0].DuplicateCauses.ConcurrentRace + rep.Inbox[1].DuplicateCauses.ConcurrentRace,
		"completed-marks failed":               f.PaymentMarkFailure,
		"reads behind the latest write":        f.ReplicaLag,
		"reads missing a document that exists": f.ReplicaLagMissing,
		"resubmissions":                        rep.Resubmissions.Early + rep.Resubmissions.Late,
		"duplicates after a crash":             dc.CrashRecovery,
		"duplicates after an ambiguous write":  dc.AmbiguousWrite,
		"duplicates after a transient error":   dc.TransientRetry,
		"sends dropped by duplicate detection": rep.Dropped,
		"mismatches":                           rep.Outcomes.Mismatch,
		"invalid messages":                     rep.Outcomes.Invalid,
		"MaxDeliveryCountExceeded":             rep.DeadLetters["MaxDeliveryCountExceeded"],
		"payment 5xx before charging":          f.PaymentFailure,
		"payment connections dropped":          f.PaymentDrop,
		"payment answers timed out":            f.PaymentTimeout,
		"crashes before the payment mark":      f.PaymentCrash,
		"capture calls that failed":            rep.Payments.CapturesFailed,
		"answers replayed by the service":      rep.Payments.Replays,
		"retries behind a payment claim":       rep.Outcomes.PaymentBusy,
		"orders with shuffled status changes":  rep.Status.Shuffled,
		"status changes applied":               rep.Status.Applied,
		"stale status changes":                 rep.Status.Stale,
		"status changes before their order":    rep.Status.BeforeOrder,
		"status changes dead-lettered":         rep.Status.DeadLettered,
		"inbox consumers":                      len(rep.Inbox),
		"relay SIGKILLs before a checkpoint":   rep.Relay.Crashes,
		"relay SIGTERMs mid-page":              rep.Relay.Stops,
		"relay pauses past the lease":          rep.Relay.Pauses,
		"relay acknowledgements lost":          rep.Relay.LostAcks,
		"republishes dropped by the topic":     int(rep.Relay.DuplicatesDropped),
		"republishes past the window":          rep.Relay.Republished,
		"lease takeovers after expiry":         rep.Relay.ExpiredTakeovers,
		"lease takeovers after a release":      rep.Relay.Takeovers - rep.Relay.ExpiredTakeovers,
		"leases lost by a stale owner":         int(rep.Relay.Lost),
		"schedulings failed":                   rep.BeforeSuccess.ScheduleFailures,
		"relay sends failed":                   rep.Relay.SendFailures,
		"relay SIGKILLs before a send":         rep.Relay.CrashesBeforeSend,
		"dependency outages":                   len(rep.BeforeSuccess.Outages),
	}
}

// TestSeedReplaysThePlan: the same seed sends the same messages and plans
// the same faults; the interleaving of the workers may differ, the ground
// truth may not.
func TestSeedReplaysThePlan(t *testing.T) {
	cfg := scenario(42)
	var reps [2]*simulation.Report
	for i := range reps {
		rep, err := runSim(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = rep
	}
	a, b := reps[0], reps[1]
	if a.Sends != b.Sends || a.Enqueued != b.Enqueued || a.Valid != b.Valid || a.Malformed != b.Malformed ||
		a.ReusedIDs != b.ReusedIDs || a.OutageOrders != b.OutageOrders || a.OrderDocuments != b.OrderDocuments {
		t.Errorf("seed 42 replayed differently:\n%+v\n%+v", a, b)
	}
}

// TestPartsCanBeDisabled: with payments, status changes and the inbox off,
// the run is the order writers' alone, and still proves its invariants.
func TestPartsCanBeDisabled(t *testing.T) {
	cfg := scenario(11)
	cfg.DisablePayments, cfg.DisableStatusChanges, cfg.DisableInbox = true, true, true
	rep, err := runSim(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		t.Fatal(err)
	}
	if rep.Payments.Enabled || rep.Payments.Captures != 0 || rep.Status.Sent != 0 || len(rep.Inbox) != 0 {
		t.Errorf("disabled parts ran: payments %+v, status %+v, inbox %+v", rep.Payments, rep.Status, rep.Inbox)
	}
	var b strings.Builder
	rep.WriteTo(&b)
	for _, section := range []string{"Payments", "Status changes", "Inbox consumers"} {
		if strings.Contains(b.String(), "\n"+section+"\n") || strings.Contains(b.String(), "\n"+section+" (") {
			t.Errorf("report has a %s section:\n%s", section, b.String())
		}
	}
}

// TestMarkerTTLFollowsTheHorizon: by default the inbox markers live as long
// as order.RedeliveryHorizon requires for the queues' settings.
func TestMarkerTTLFollowsTheHorizon(t *testing.T) {
	rep, err := runSim(t, simulation.Config{Orders: 10, LockDuration: time.Minute, MaxDeliveryCount: 6})
	if err != nil {
		t.Fatal(err)
	}
	h := order.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 6, DuplicateDetectionWindow: 10 * time.Minute}
	if want, _ := h.MinRetention(); rep.Config.MarkerTTL != want {
		t.Errorf("marker TTL %v, want the horizon's minimum retention %v", rep.Config.MarkerTTL, want)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []simulation.Config{
		{Orders: -1},
		{Workers: 100},
		{Faults: simulation.FaultRates{Crash: 1.5}},
		{MaxDeliveryCount: 4, MaxFaultsPerMessage: 4},
		{MaxDeliveryCount: 10, MaxFaultsPerMessage: 5}, // a fault may cost two deliveries
		// and an outage one more
		{MaxDeliveryCount: 10, MaxFaultsPerMessage: 4, Faults: simulation.FaultRates{StoreOutage: 0.1}},
		{StatusChanges: 2},
		{MarkerTTL: time.Millisecond},
	} {
		if _, err := runSim(t, cfg); err == nil {
			t.Errorf("Run(%+v) succeeded", cfg)
		}
	}
}

func TestRunStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := simulation.Run(ctx, simulation.Config{Orders: 50}, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

// TestRunStopsAtItsTimeLimit: a run that cannot finish (every store call
// fails, and the stall timeout is longer than the time limit) ends at its
// time limit, on the bubble's clock, with an error that says so.
func TestRunStopsAtItsTimeLimit(t *testing.T) {
	_, err := runSim(t, simulation.Config{Orders: 20, DisableInbox: true, TimeLimit: time.Minute, StallTimeout: time.Hour,
		Faults: simulation.FaultRates{Outage: 1}, MaxDeliveryCount: 1000, MaxFaultsPerMessage: 1})
	if err == nil || !strings.Contains(err.Error(), "time limit") {
		t.Fatalf("Run = %v, want the time limit", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// runSim runs cfg. In a test it runs inside a testing/synctest bubble, so
// that every lock, backoff, renewal, deadline and key retention of the run
// passes on the bubble's virtual clock; a benchmark runs on the wall clock
// at the compressed time scale.
func runSim(tb testing.TB, cfg simulation.Config) (*simulation.Report, error) {
	tb.Helper()
	t, ok := tb.(*testing.T)
	if !ok {
		return simulation.Run(context.Background(), cfg.CompressedTimeScale(), nil)
	}
	var rep *simulation.Report
	var err error
	synctest.Test(t, func(t *testing.T) {
		rep, err = simulation.Run(t.Context(), cfg, nil)
	})
	return rep, err
}
