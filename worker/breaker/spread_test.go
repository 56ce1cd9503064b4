package breaker_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

func failed(key string) worker.Decision {
	return worker.Decision{Telling: true, Result: idempotent.Result{Outcome: idempotent.Transient, Key: key, Reason: idempotent.ReasonStoreUnavailable, Err: errStoreDown}}
}

func succeeded(key string) worker.Decision {
	return worker.Decision{Telling: true, Result: idempotent.Result{Outcome: idempotent.Created, Key: key}}
}

// admit calls b.Admit as the receive loop does and reports the Admission
// if it returned one before the bubble blocked; otherwise it gives up the
// call. Call it in a synctest bubble.
func admit(b *breaker.Breaker) (worker.Admission, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan worker.Admission, 1)
	go func() {
		if _, a, ok := b.Admit(ctx, context.Background()); ok {
			got <- a
		}
	}()
	synctest.Wait()
	select {
	case a := <-got:
		return a, true
	default:
		cancel()
		synctest.Wait()
		return worker.Admission{}, false
	}
}

// TestSpreadOpensOnFiveEntitiesFailingAgain states the spread rule with
// its numbers, with a probe that always succeeds: five entities whose
// last three deliveries failed by a dependency, within the last 50
// deliveries, open the breaker, whatever the successes of other entities
// in between; four never do, nor does any number of entities whose
// failures pass (two failures, then a success), nor five whose failures
// are more than 50 deliveries old.
func TestSpreadOpensOnFiveEntitiesFailingAgain(t *testing.T) {
	type step struct {
		entity string
		fail   bool
	}
	failingAgain := func(entities int) (steps []step) {
		for round := range 3 {
			for e := range entities {
				steps = append(steps, step{fmt.Sprintf("e-%d", e), true}, step{fmt.Sprintf("ok-%d-%d", round, e), false})
			}
		}
		return steps
	}
	for _, tt := range []struct {
		name  string
		steps []step
		open  bool
	}{
		{"four entities failing again", failingAgain(4), false},
		{"five entities failing again amid successes", failingAgain(5), true},
		{"twenty entities failing twice, then passing", func() (steps []step) {
			for e := range 20 {
				k := fmt.Sprintf("e-%d", e)
				steps = append(steps, step{k, true}, step{k, true}, step{k, false})
			}
			return steps
		}(), false},
		{"five failing again, one of them 50 deliveries ago", func() []step {
			steps := []step{{"e-old", true}, {"e-old", true}, {"e-old", true}}
			for i := range 50 {
				steps = append(steps, step{fmt.Sprintf("ok-%d", i), false})
			}
			return append(steps, failingAgain(4)...)
		}(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := breaker.New(breaker.Options{Threshold: 1000, Spread: breaker.DefaultSpread, Probe: func(context.Context) error { return nil }}, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range tt.steps {
					if s.fail {
						b.Record(failed(s.entity))
					} else {
						b.Record(succeeded(s.entity))
					}
				}
				_, admitted := admit(b)
				if admitted == tt.open || b.Paused() != tt.open || b.Opened() != map[bool]int64{false: 0, true: 1}[tt.open] {
					t.Errorf("admitted %v, paused %v, opened %d times; want open %v", admitted, b.Paused(), b.Opened(), tt.open)
				}
			})
		})
	}
}

// TestSpreadTrials: opened by the spread while the probe succeeds, the
// breaker waits TrialBackoff (10 min), then lets one message through at a
// time: a trial that fails lets the next through until five entities have
// failed, which opens it again for twice the wait (20 min); the first
// success closes it. The probe is asked before each trial. Each trial's
// Admission asks that a message failing by a dependency wait off the head
// of the queue until after the next trial (DependencyWait): 20 minutes in
// the first wait's trials, 40 in the second's.
func TestSpreadTrials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		probes := 0
		b, err := breaker.New(breaker.Options{Threshold: 1000, Spread: breaker.DefaultSpread,
			Probe: func(context.Context) error { probes++; return nil }}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			for e := range 5 {
				b.Record(failed(fmt.Sprintf("e-%d", e)))
			}
		}
		if _, ok := admit(b); ok || b.State() != breaker.Open {
			t.Fatalf("state %v after five entities failed again, want open", b.State())
		}
		opened := time.Now()
		away := 20 * time.Minute
		trial := func(wait time.Duration) worker.Admission {
			t.Helper()
			time.Sleep(wait)
			a, ok := admit(b)
			if !ok || !a.Trial || a.Max != 1 || a.DependencyWait != away {
				t.Fatalf("%v after opening: admission %+v (%v), want one trial message whose failure waits %v", time.Since(opened), a, ok, away)
			}
			a.Done(1)
			return a
		}
		// Nothing before the wait.
		time.Sleep(10*time.Minute - time.Second)
		if _, ok := admit(b); ok {
			t.Fatal("admitted before TrialBackoff")
		}
		trial(time.Second)
		for e := range 4 { // four fail: the next goes at once
			d := failed(fmt.Sprintf("e-%d", e))
			d.Trial = true
			b.Record(d)
			if e < 3 {
				trial(0)
			}
		}
		trial(0)
		d := failed("e-new")
		d.Trial = true
		b.Record(d) // the fifth: open again
		if b.State() != breaker.Open {
			t.Fatalf("state %v after five entities failed their trials, want open", b.State())
		}
		reopened := time.Now()
		away = 40 * time.Minute
		time.Sleep(20*time.Minute - time.Second)
		if _, ok := admit(b); ok {
			t.Fatal("admitted before twice the wait")
		}
		trial(time.Second)
		d = succeeded("e-0")
		d.Trial = true
		b.Record(d)
		if b.State() != breaker.Closed || b.Opened() != 1 {
			t.Errorf("after a trial succeeded: %v, opened %d times; want closed, opened once", b.State(), b.Opened())
		}
		if probes != 3 {
			t.Errorf("%d probes, want one before opening and one before the trials of each of the two waits (%v since reopening)", probes, time.Since(reopened))
		}
	})
}

// TestDeepDeliveryAsksTheProbe: on a quiet queue shared by several
// workers, one message's deliveries spread over their breakers, and none
// sees Threshold failures in a row before MaxDeliveryCount. A dependency
// failure of a redelivered message (DeliveryCount 2 or more: it failed
// before, here or on another worker) makes the breaker ask the probe by
// itself: a failing probe opens it, a succeeding one (a poison message)
// keeps it closed and excuses the entity, whose next redelivery asks
// again (an outage may have begun since). A first delivery, or a breaker
// without a probe, does nothing on one failure.
func TestDeepDeliveryAsksTheProbe(t *testing.T) {
	deep := func(key string, count uint32) worker.Decision {
		d := failed(key)
		d.DeliveryCount = count
		return d
	}
	for _, tt := range []struct {
		name     string
		probe    error
		noProbe  bool
		count    uint32
		wantOpen bool
		probes   int
	}{
		{"the fifth delivery, the probe fails", errStoreDown, false, breakerThreshold, true, 1},
		{"the ninth delivery, the probe fails", errStoreDown, false, 9, true, 1},
		{"the second delivery, the probe fails", errStoreDown, false, 2, true, 1},
		{"the first delivery, the probe fails", errStoreDown, false, 1, false, 0},
		{"the fifth delivery, the probe succeeds", nil, false, breakerThreshold, false, 2},
		{"the fifth delivery, no probe", nil, true, breakerThreshold, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				probes := 0
				o := breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit}
				if !tt.noProbe {
					o.Probe = func(context.Context) error { probes++; return tt.probe }
				}
				b, err := breaker.New(o, nil)
				if err != nil {
					t.Fatal(err)
				}
				b.Record(deep("quiet-1", tt.count))
				if _, ok := admit(b); ok == tt.wantOpen {
					t.Fatalf("admitted %v after one failure at delivery %d, want %v", ok, tt.count, !tt.wantOpen)
				}
				if got := b.Paused(); got != tt.wantOpen {
					t.Fatalf("paused %v, want %v", got, tt.wantOpen)
				}
				if !tt.wantOpen && tt.probes > 0 { // excused, it asks the probe again at its next deep delivery
					b.Record(deep("quiet-1", tt.count+1))
					admit(b)
				}
				if probes != tt.probes {
					t.Fatalf("%d probes, want %d", probes, tt.probes)
				}
			})
		})
	}
}

// TestSpreadCountsDeepDeliveries: an entity whose message failed at
// DeliveryCount Threshold or later is failing again however few of its
// deliveries this breaker saw (several workers share its queue, each
// seeing some of them): five such entities open the breaker although the
// probe succeeds; four do not.
func TestSpreadCountsDeepDeliveries(t *testing.T) {
	for _, entities := range []int{breakerSpread - 1, breakerSpread} {
		t.Run(fmt.Sprintf("%d entities", entities), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := breaker.New(breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit,
					Probe: func(context.Context) error { return nil }}, nil)
				if err != nil {
					t.Fatal(err)
				}
				for e := range entities {
					d := failed(fmt.Sprintf("e-%d", e))
					d.DeliveryCount = breakerThreshold + uint32(e%3)
					b.Record(d)
					b.Record(succeeded(fmt.Sprintf("healthy-%d", e)))
					admit(b)
				}
				if got, want := b.Paused(), entities >= breakerSpread; got != want {
					t.Fatalf("paused %v after %d entities failed at delivery %d or later, want %v", got, entities, breakerThreshold, want)
				}
			})
		})
	}
}

// TestDeepDeliveryOfAnExcusedEntityAsksAgain: an entity excused because
// the probe answered (its failures were its own, or an outage ended just
// before) is not excused from the outage that begins next: its next
// failure at a DeliveryCount of Threshold or more asks the probe again,
// and the failing probe opens the breaker. Excused for good, its message
// would spend its last deliveries on the new outage and be dead-lettered.
func TestDeepDeliveryOfAnExcusedEntityAsksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down bool
		probes := 0
		b, err := breaker.New(breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit,
			Probe: func(context.Context) error {
				probes++
				if down {
					return errStoreDown
				}
				return nil
			}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := failed("quiet-1")
		d.DeliveryCount = breakerThreshold
		b.Record(d)
		if _, ok := admit(b); !ok || b.Paused() {
			t.Fatalf("paused %v after a deep failure the probe excused, want closed", b.Paused())
		}
		down = true // the store fails from now on
		d.DeliveryCount++
		b.Record(d)
		if _, ok := admit(b); ok || b.State() != breaker.Open {
			t.Fatalf("state %v after the excused entity failed a deep delivery with the probe failing, want open", b.State())
		}
		if probes != 2 {
			t.Errorf("%d probes, want 2", probes)
		}
	})
}

// TestSpreadTrialComesRoundAgain: a blind trial that comes round to an
// entity again after fewer than Spread entities failed in it has met every
// failing message at the head of the queue (without a Scheduler a failed
// trial message returns there; with one, a second message of one entity
// does): they are poison, not an outage, so the breaker closes, and they
// no longer count in the spread. The same after Spread or more entities
// failed opens it again.
func TestSpreadTrialComesRoundAgain(t *testing.T) {
	for _, tt := range []struct {
		name      string
		failing   int // distinct entities failing in the trial before the first comes round
		wantState breaker.State
	}{
		{"two entities, then the first again", 2, breaker.Closed},
		{"four entities, then the first again", breaker.DefaultSpread - 1, breaker.Closed},
		{"five entities, then the first again", breaker.DefaultSpread, breaker.Open},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := breaker.New(breaker.Options{Threshold: 1000, Spread: breaker.DefaultSpread, TrialLimit: breakerTrialLimit,
					Probe: func(context.Context) error { return nil }}, nil)
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					for e := range breaker.DefaultSpread {
						b.Record(failed(fmt.Sprintf("e-%d", e)))
					}
				}
				if _, ok := admit(b); ok || b.State() != breaker.Open {
					t.Fatalf("state %v after five entities failed again, want open", b.State())
				}
				time.Sleep(10 * time.Minute)
				fail := func(key string) {
					t.Helper()
					a, ok := admit(b)
					if !ok || !a.Trial {
						t.Fatalf("admission %+v (%v), want a trial", a, ok)
					}
					a.Done(1)
					d := failed(key)
					d.Trial = true
					b.Record(d)
				}
				for e := range tt.failing {
					fail(fmt.Sprintf("e-%d", e))
				}
				fail("e-0")
				if got := b.State(); got != tt.wantState {
					t.Fatalf("state %v after %d entities failed in the trial and the first came round, want %v", got, tt.failing, tt.wantState)
				}
				if tt.wantState != breaker.Closed {
					return
				}
				// The poison entities no longer count: failing again, they
				// do not reopen it.
				for range 3 {
					for e := range tt.failing {
						b.Record(failed(fmt.Sprintf("e-%d", e)))
					}
				}
				if _, ok := admit(b); !ok || b.State() != breaker.Closed {
					t.Errorf("state %v after the trial's poison entities failed again, want closed", b.State())
				}
			})
		})
	}
}
