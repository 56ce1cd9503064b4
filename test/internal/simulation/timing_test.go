package simulation_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
)

// freeze is a Config.Stall that stands for a machine too busy to run the
// process: every settlement and lock renewal of one order (the first one
// settled) waits for long, the lock runs out meanwhile, and the delay probe
// waits out every such freeze, as a process that is not scheduled at all
// would. On virtual time, the delay is exact and costs nothing.
type freeze struct {
	length time.Duration

	mu     sync.Mutex
	target string
	until  time.Time
	stalls int
}

func (f *freeze) stall(p simulation.StallPoint, orderID string) {
	f.mu.Lock()
	switch {
	case p == simulation.StallSettle && (f.target == "" || f.target == orderID):
		f.target = orderID
		f.until = time.Now().Add(f.length)
		f.stalls++
		f.mu.Unlock()
		time.Sleep(f.length)
		return
	case p == simulation.StallProbe && time.Now().Before(f.until):
		d := time.Until(f.until)
		f.mu.Unlock()
		time.Sleep(d)
		return
	}
	f.mu.Unlock()
}

// freezeConfig is a small run whose only fault is the freeze: each
// settlement of one order arrives 1.5 lock durations late, so every
// delivery of it loses its lock and the broker dead-letters the handled
// order for MaxDeliveryCountExceeded, as a machine at load 50 did to
// `go run ./test/simulate`.
func freezeConfig(f *freeze) simulation.Config {
	return simulation.Config{
		Orders: 12, Workers: 2, Concurrency: 2, Seed: 7, DisableInbox: true, DisableStatusChanges: true,
		Stall: f.stall, StallTimeout: 100 * 30 * time.Second,
	}
}

// A run whose violations all coincide with a forced scheduling delay gets
// the timing verdict, not FAIL: ErrTiming, never ErrViolations.
func TestForcedSchedulingDelayIsReportedAsTiming(t *testing.T) {
	f := &freeze{length: 45 * time.Second} // 1.5 × the 30 s lock
	rep, err := runSim(t, freezeConfig(f))
	if err != nil {
		t.Fatal(err)
	}
	if f.stalls == 0 || len(rep.Violations) == 0 {
		t.Fatalf("%d stalls, %d violations: the freeze broke nothing, the test shows nothing", f.stalls, len(rep.Violations))
	}
	verdict := rep.Verdict()
	if !errors.Is(verdict, simulation.ErrTiming) || errors.Is(verdict, simulation.ErrViolations) {
		t.Fatalf("Verdict() = %v, want ErrTiming and not ErrViolations", verdict)
	}
	if !slices.Contains(rep.InvariantsFailed, simulation.NoMessageLost) {
		t.Errorf("invariants failed %q, want %s among them", rep.InvariantsFailed, simulation.NoMessageLost)
	}
	for _, v := range rep.Violations {
		if v.OrderID != f.target {
			t.Errorf("violation of an order the freeze never touched: %s", v)
		}
	}
	if rep.Timing.MaxDelay < rep.Timing.Margin || rep.Timing.Spells == 0 {
		t.Errorf("timing %+v: the probe measured no delay above the margin", rep.Timing)
	}
	var b strings.Builder
	rep.WriteTo(&b)
	if out := b.String(); !containsAll(out, "Verdict: TIMING: the machine was too busy for the compressed time scale (max delay", "vs lock 30s",
		"rerun with -scale", "or under virtual time", "Scheduling delay*", "[timing: ") || strings.Contains(out, "Verdict: FAIL") {
		t.Errorf("report:\n%s", out)
	}
}

// The same forced delay does not hide a defect: a consumer that treats a
// duplicate as an error still fails the checker, since its violations
// coincide with no measured delay.
func TestPlantedDefectFailsDespiteSchedulingDelay(t *testing.T) {
	f := &freeze{length: 45 * time.Second}
	cfg := freezeConfig(f)
	cfg.Orders = 40
	cfg.Faults = simulation.FaultRates{LockExpiry: 0.3, LostSettlement: 0.3, Crash: 0.3, RetryOutsideWindow: 0.3}
	cfg.Consumer = overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Duplicate: idempotent.Transient})
	cfg.TimeLimit = brokenTimeLimit
	rep, err := runSim(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.stalls == 0 {
		t.Fatal("no stall: the test shows nothing")
	}
	verdict := rep.Verdict()
	if !errors.Is(verdict, simulation.ErrViolations) || errors.Is(verdict, simulation.ErrTiming) || rep.TimingBroken() {
		t.Fatalf("Verdict() = %v, want ErrViolations: the defect hid behind the delay", verdict)
	}
	unexplained := 0
	for _, v := range rep.Violations {
		if !rep.TimingExplains(v) {
			unexplained++
			if v.OrderID == f.target {
				t.Errorf("the frozen order's violation is not explained by the freeze: %s", v)
			}
		}
	}
	if unexplained == 0 {
		t.Error("every violation explained by the delay")
	}
	var b strings.Builder
	rep.WriteTo(&b)
	if out := b.String(); !strings.Contains(out, "Verdict: FAIL") || strings.Contains(out, "Verdict: TIMING") {
		t.Errorf("report:\n%s", out)
	}
}

// Without a delay, a breach of a timing assumption (here a lock the
// consumer outlives, a defect) explains nothing: the verdict is FAIL.
func TestBreachWithoutMeasuredDelayIsAFailure(t *testing.T) {
	var once sync.Once
	var target string
	cfg := simulation.Config{
		Orders: 12, Workers: 2, Concurrency: 2, Seed: 7, DisableInbox: true, DisableStatusChanges: true,
		StallTimeout: 100 * 30 * time.Second,
		// Not the probe: only this order's settlements wait, so the
		// probe measures nothing.
		Stall: func(p simulation.StallPoint, id string) {
			if p != simulation.StallSettle {
				return
			}
			once.Do(func() { target = id })
			if id == target {
				time.Sleep(45 * time.Second)
			}
		},
	}
	rep, err := runSim(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Timing.Breaches) == 0 || len(rep.Violations) == 0 {
		t.Fatalf("%d breaches, %d violations: the test shows nothing", len(rep.Timing.Breaches), len(rep.Violations))
	}
	if verdict := rep.Verdict(); !errors.Is(verdict, simulation.ErrViolations) {
		t.Fatalf("Verdict() = %v, want ErrViolations", verdict)
	}
	for _, b := range rep.Timing.Breaches {
		if b.Covered() {
			t.Errorf("breach %+v covered by a delay the probe cannot have measured", b)
		}
	}
}
