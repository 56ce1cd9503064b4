package simulation

import (
	"github.com/idempotent-consumer/sbcosmos/order"
)

// fill completes the report from the final state and the run's records.
func (r *Report) fill(s *State, prod *producer, subs []*subscription, op *operator) {
	idx := newIndex(s)
	r.Violations = idx.check()
	failed := make(map[string]bool)
	for _, v := range r.Violations {
		failed[v.Invariant] = true
	}
	for _, inv := range Invariants() {
		if failed[inv.Name] {
			r.InvariantsFailed = append(r.InvariantsFailed, inv.Name)
		} else {
			r.InvariantsHeld = append(r.InvariantsHeld, inv.Name)
		}
	}
	for _, m := range s.Sent {
		if m.Kind == Status {
			r.Status.Sent++
			if m.Enqueued {
				r.Status.Enqueued++
			}
		}
		r.Sends++
		if m.Enqueued {
			r.Enqueued++
		} else {
			r.Dropped++
			if m.Kind == Reuse && !m.Resend {
				r.DroppedReuses++
			}
		}
	}
	r.Deliveries = s.Queue.Delivered
	r.LockLost = s.Queue.LockLost
	r.DeadLetters = make(map[string]int)
	for _, m := range s.Queue.DeadLetters {
		r.DeadLetters[m.DeadLetterReason]++
		if m.Subject == order.SubjectOrderStatusChanged {
			r.Status.DeadLettered++
		}
	}
	for _, ds := range idx.orders {
		r.OrderDocuments += len(ds)
	}
	for _, ds := range idx.events {
		r.EventDocuments += len(ds)
	}
	tr := subs[0].tr
	r.Outcomes, _ = tr.outcomes()
	r.Status.Applied, r.Status.Stale, r.Status.BeforeOrder = r.Outcomes.Applied, r.Outcomes.Stale, r.Outcomes.BeforeOrder
	r.DuplicateCauses = tr.attribute()
	tr.mu.Lock()
	r.Faults = tr.faultCount
	pc := tr.payCount
	tr.mu.Unlock()
	if s.Payments != nil {
		r.Payments.Enabled = true
		r.Payments.Captures, r.Payments.CapturesFailed, r.Payments.Replays = pc.Captures, pc.Failed, pc.Replays
		for _, ds := range idx.payments {
			for _, d := range ds {
				if d.state == order.PaymentCompleted {
					r.Payments.Completed++
				}
			}
		}
	}
	for _, s2 := range subs[1:] {
		o, _ := s2.tr.outcomes()
		snap := s2.out.q.Snapshot()
		ir := InboxReport{Consumer: s2.out.consumer, Enqueued: int(snap.Sent), Deliveries: snap.Delivered, Outcomes: o,
			DuplicateCauses: s2.tr.attribute(), DeadLettered: len(snap.DeadLetters)}
		for _, e := range idx.loyalty {
			if e.consumer == s2.out.consumer {
				ir.Entries++
			}
		}
		for _, m := range idx.markers {
			if m.consumer == s2.out.consumer {
				ir.Markers++
			}
		}
		s2.tr.mu.Lock()
		fc := s2.tr.faultCount
		s2.tr.mu.Unlock()
		ir.Faults = fc.Crash + fc.LostSettlement + fc.LockExpiry + fc.Transient + fc.Ambiguous
		r.Inbox = append(r.Inbox, ir)
	}
	r.Faults.ProducerRetry = prod.faults.ProducerRetry
	for _, l := range prod.late {
		switch l.kind {
		case Reuse:
			r.Faults.Reuse++
		default:
			r.Faults.LateRetry++
		}
	}
	r.Faults.Malformed = r.Malformed
	r.Resubmissions = op.counts
	r.Accounting = account(s.Sent, s.Queue)
	for i := range r.Inbox {
		r.Inbox[i].Accounting = account(s.Inbox[i].Sent, s.Inbox[i].Queue)
	}
}
