package simulation

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

func TestPlanIsAFunctionOfTheSeed(t *testing.T) {
	rates := FaultRates{LockExpiry: 0.5, Crash: 0.5, Transient: 0.5, ProducerRetry: 0.5, Malformed: 0.5, Reuse: 0.5}
	a, b, other := newPlan(7, rates, 1000), newPlan(7, rates, 1000), newPlan(8, rates, 1000)
	same, differs := true, false
	for i := range 200 {
		id := fmt.Sprintf("sim-%06d", i)
		for n := range uint64(5) {
			for _, f := range []fault{faultLockExpiry, faultCrash, faultTransientCreate} {
				x := a.inject(f, id, uint64(i), n)
				same = same && x == b.inject(f, id, uint64(i), n)
				differs = differs || x != other.inject(f, id, uint64(i), n)
			}
		}
		same = same && reflect.DeepEqual(a.order(i), b.order(i))
		differs = differs || !reflect.DeepEqual(a.order(i), other.order(i))
	}
	if !same {
		t.Error("two plans from one seed differ")
	}
	if !differs {
		t.Error("plans from seeds 7 and 8 are identical")
	}
}

func TestPlanRates(t *testing.T) {
	const n = 20000
	for _, rate := range []float64{0, 0.05, 0.3, 1} {
		p := newPlan(1, FaultRates{Crash: rate, Malformed: rate}, n)
		var crashes, malformed int
		for i := range n {
			if p.inject(faultCrash, "m", uint64(i), 1) {
				crashes++
			}
			if p.order(i).malformed {
				malformed++
			}
		}
		for name, got := range map[string]int{"crashes": crashes, "malformed": malformed} {
			if f := float64(got) / n; math.Abs(f-rate) > 0.01 {
				t.Errorf("rate %v: %s at %v", rate, name, f)
			}
		}
	}
}

// TestPlanBudget: no message suffers more faults than the budget, so every
// message reaches a clean delivery before MaxDeliveryCount.
func TestPlanBudget(t *testing.T) {
	p := newPlan(1, FaultRates{Crash: 1, Transient: 1}, 3)
	got := 0
	for n := range uint64(20) {
		if p.inject(faultCrash, "m", 1, n) {
			got++
		}
		if p.inject(faultTransientCreate, "m", n, 0) {
			got++
		}
	}
	if got != 3 {
		t.Errorf("%d faults injected into one message, want the budget of 3", got)
	}
	if !p.inject(faultCrash, "other", 1, 1) {
		t.Error("the budget of one message limited another")
	}
}

func TestFaultRatesValidate(t *testing.T) {
	if err := DefaultFaultRates().Validate(); err != nil {
		t.Errorf("default rates: %v", err)
	}
	for _, r := range []FaultRates{{Crash: -0.1}, {Reuse: 1.01}, {Ambiguous: math.NaN()}} {
		if r.Validate() == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}
