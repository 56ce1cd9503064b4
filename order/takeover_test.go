package order_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestPaymentTakenOver checks Result.Resumed: set on the delivery
// that took over a claim another delivery held (an earlier delivery of its
// own copy, or a holder whose lease ran out), whatever that delivery's
// outcome, and on no other: not on the first claim, not on a claim its
// holder released, not on a delivery that waits for the lease.
func TestPaymentTakenOver(t *testing.T) {
	const lease = time.Minute
	type step struct {
		m        idempotent.Message
		advance  time.Duration // the clock moves first
		outcome  idempotent.Outcome
		takeover bool
	}
	tests := []struct {
		name     string
		failures int  // record writes failed from delivery 1's completed mark on
		down     bool // the payments service fails every capture after the first
		fresh    bool // the later deliveries reach a processor that remembers nothing (no fact cache)
		steps    []step
	}{
		{"the same copy's next delivery takes over a held claim", 2, false, false, []step{
			{delivery(validBody, 7, 1), 0, idempotent.Transient, false},
			{delivery(validBody, 7, 2), 0, idempotent.Duplicate, true},
			{delivery(validBody, 7, 3), 0, idempotent.Duplicate, false}, // completed: nothing to take over
		}},
		{"the same, read from the store by a processor without the fact", 2, false, true, []step{
			{delivery(validBody, 7, 1), 0, idempotent.Transient, false},
			{delivery(validBody, 7, 2), 0, idempotent.Duplicate, true},
		}},
		{"a released claim is claimed anew, not taken over", 1, false, false, []step{
			{delivery(validBody, 7, 1), 0, idempotent.Transient, false},
			{delivery(validBody, 7, 2), 0, idempotent.Duplicate, false},
		}},
		{"another copy waits inside the lease, then takes over", 2, false, true, []step{
			{delivery(validBody, 7, 1), 0, idempotent.Transient, false},
			{delivery(validBody, 8, 1), lease - time.Nanosecond, idempotent.Transient, false},
			{delivery(validBody, 8, 2), time.Nanosecond, idempotent.Duplicate, true},
		}},
		{"a takeover whose capture fails is reported too", 2, true, false, []step{
			{delivery(validBody, 7, 1), 0, idempotent.Transient, false},
			{delivery(validBody, 7, 2), 0, idempotent.Transient, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			clk := &testClock{now: fixedNow()}
			s := &faultyStore{Store: memstore.New("/orderId"), replace: failFromCompletedMark(tt.failures)}
			g := newGateway()
			if tt.down {
				g.fail = func(call int) (error, bool) {
					if call > 1 {
						return errors.New("payments service unavailable"), false
					}
					return nil, true
				}
			}
			p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPayments(g, lease, "w1"))
			for i, st := range tt.steps {
				clk.Advance(st.advance)
				if i == 1 && tt.fresh {
					p = order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPayments(g, lease, "w2"), order.WithFactCache(0))
				}
				r := p.Process(ctx, st.m)
				if r.Outcome != st.outcome || r.Resumed != st.takeover {
					t.Fatalf("step %d (seq %d, delivery %d): %v %q (%s), Resumed %v; want %v, Resumed %v",
						i+1, st.m.SequenceNumber, st.m.DeliveryCount, r.Outcome, r.Reason, r.Description, r.Resumed, st.outcome, st.takeover)
				}
			}
			if g.total() != 1 {
				t.Errorf("%d charges, want 1", g.total())
			}
		})
	}
}
