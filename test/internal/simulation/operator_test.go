package simulation

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// losingReceiver loses the lock of the message of its renewAt-th renewal
// before the renewal, and of its completeAt-th complete before the
// complete, as a lock duration that lapses under load does.
type losingReceiver struct {
	dlqReceiver
	dlq                  *sbqueue.Queue
	renewAt, completeAt  int
	renewals, completes  int
	lostRenew, lostCompl int64 // the sequence numbers whose lock it lost
}

func (l *losingReceiver) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error {
	if l.renewals++; l.renewals == l.renewAt {
		l.dlq.ExpireLock(m.LockToken)
		l.lostRenew = *m.SequenceNumber
	}
	return l.dlqReceiver.RenewMessageLock(ctx, m, o)
}

func (l *losingReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	if l.completes++; l.completes == l.completeAt {
		l.dlq.ExpireLock(m.LockToken)
		l.lostCompl = *m.SequenceNumber
	}
	return l.dlqReceiver.CompleteMessage(ctx, m, o)
}

// TestOperatorRetriesWhatLostItsLock: a lock the operator loses in its
// resubmission round (before a copy is sent, or at the complete after it)
// is a timing event: the round returns no error, resubmits every
// dead-lettered message exactly once and leaves the dead-letter queue
// empty. The round used to receive the whole dead-letter queue before it
// acted and returned "complete dead-lettered #N: (locklost)", which made
// the run exit 1 without a report.
func TestOperatorRetriesWhatLostItsLock(t *testing.T) {
	const n = 3*operatorBatch + 5
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: time.Minute, MaxDeliveryCount: 10})
	if err != nil {
		t.Fatal(err)
	}
	out := &outlet{q: q}
	for i := range n {
		id := fmt.Sprintf("op-%03d", i)
		if err := out.send(ctx, Sent{MessageID: id, OrderID: id, Kind: Original}, sbqueue.Message{MessageID: id, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	r := q.NewReceiver()
	ms, err := r.ReceiveMessages(ctx, n, nil)
	if err != nil || len(ms) != n {
		t.Fatalf("received %d of %d: %v", len(ms), n, err)
	}
	for _, m := range ms {
		if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}

	lr := &losingReceiver{dlq: q.DeadLetterQueue(), renewAt: operatorBatch + 2, completeAt: 2*operatorBatch + 3}
	op := &operator{out: out, plan: newPlan(1, FaultRates{ResubmitEarly: 1}, 0), wrap: func(r dlqReceiver) dlqReceiver { lr.dlqReceiver = r; return lr }}
	got, err := op.resubmit(ctx, 1)
	if err != nil {
		t.Fatalf("resubmit with a lost lock: %v", err)
	}
	if lr.lostRenew == 0 || lr.lostCompl == 0 {
		t.Fatalf("no lock lost (renewal #%d, complete #%d): the test injects nothing", lr.lostRenew, lr.lostCompl)
	}
	if lost := q.DeadLetterQueue().Snapshot().LockLost; lost != 2 {
		t.Errorf("%d settlements or renewals lost their lock, want the 2 injected", lost)
	}
	if got != n || op.counts.Early != n {
		t.Errorf("resubmitted %d (counted %d), want %d", got, op.counts.Early, n)
	}
	if d := q.DeadLetterQueue().Snapshot(); len(d.Active)+len(d.Locked) != 0 {
		t.Errorf("the dead-letter queue keeps %d available and %d locked messages, want none", len(d.Active), len(d.Locked))
	}
	ids := map[string]int{}
	for _, m := range q.Snapshot().Active {
		ids[m.MessageID]++
	}
	for i := range n {
		if id := fmt.Sprintf("op-%03d", i); ids[id] != 1 {
			t.Errorf("%s is in the queue %d times, want once", id, ids[id])
		}
	}
	for _, s := range out.sent[:n] {
		if !s.Resubmitted {
			t.Errorf("%s (#%d) not recorded as resubmitted", s.MessageID, s.Seq)
		}
	}
}
