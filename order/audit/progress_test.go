package audit_test

import (
	"testing"

	"github.com/idempotent-consumer/sbcosmos/order/audit"
)

// TestAudit_ReportsProgressAndRate: Config.Progress hears of every page,
// with counts that only grow and end at the report's; the report counts
// the orders and gives the run's time and rate.
func TestAudit_ReportsProgressAndRate(t *testing.T) {
	w := newWorld(t, newMemstore)
	cfg := w.config()
	var got []audit.Progress
	cfg.Progress = func(p audit.Progress) { got = append(got, p) }
	rep := run(t, cfg)
	if len(got) != rep.Pages || rep.Pages < 2 {
		t.Fatalf("%d progress calls for %d pages", len(got), rep.Pages)
	}
	for i, p := range got {
		if p.Pages != i+1 || p.Range < 1 || p.Range > p.Ranges || p.Ranges != len(w.ranges) || p.Elapsed < 0 || p.OrdersPerSecond() < 0 {
			t.Errorf("progress %d: %+v", i, p)
		}
		if i > 0 && (p.Documents <= got[i-1].Documents || p.Orders < got[i-1].Orders || p.Range < got[i-1].Range || p.Elapsed < got[i-1].Elapsed) {
			t.Errorf("progress %d went back: %+v after %+v", i, p, got[i-1])
		}
	}
	last := got[len(got)-1]
	if last.Documents != rep.Documents || last.Orders != rep.Orders {
		t.Errorf("last progress %+v, report %d documents and %d orders", last, rep.Documents, rep.Orders)
	}
	if want := rep.Result(audit.OrderEvent).Checked; rep.Orders != want || rep.Orders != worldOrders {
		t.Errorf("report counts %d orders, order-event checked %d, the world has %d", rep.Orders, want, worldOrders)
	}
	// The figures depend on the machine: only their presence is checked.
	if rep.Seconds <= 0 || rep.OrdersPerSecond <= 0 {
		t.Errorf("report took %v s at %v orders/s, want both positive", rep.Seconds, rep.OrdersPerSecond)
	}
}
