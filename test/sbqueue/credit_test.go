package sbqueue_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

func checkCredit(t *testing.T, r *sbqueue.Receiver, wantCredit, wantBuffered int) {
	t.Helper()
	if c, b := r.Credit(); c != wantCredit || b != wantBuffered {
		t.Errorf("link credit %d, buffered %d; want %d, %d", c, b, wantCredit, wantBuffered)
	}
}

// TestReceiverLeftoverCreditIsReleased: a call that returns with fewer
// messages than it asked for leaves its credit on the link; what arrives on
// it between calls is released by the SDK's releaser (its delivery not
// counted), and the next call issues only the missing credit.
func TestReceiverLeftoverCreditIsReleased(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	r := q.NewReceiver()
	ctx := context.Background()
	send(t, q, sbqueue.Message{MessageID: "a"})
	msgs, err := r.ReceiveMessages(ctx, 10, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ReceiveMessages(10) = %d, %v; want 1", len(msgs), err)
	}
	checkCredit(t, r, 9, 0)

	send(t, q, sbqueue.Message{MessageID: "b"})
	send(t, q, sbqueue.Message{MessageID: "c"})
	s := q.Snapshot()
	// Each arrival used a credit; the releaser released it, and the broker
	// sent it again on the next credit, until the credit ran out.
	if s.Released != 9 || len(s.Active) != 2 || len(s.Locked) != 1 {
		t.Errorf("after two sends on leftover credit: %d released, %d available, %d locked; want 9, 2, 1", s.Released, len(s.Active), len(s.Locked))
	}
	checkCredit(t, r, 0, 0)

	msgs, err = r.ReceiveMessages(ctx, 3, nil)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("ReceiveMessages(3) = %d, %v; want 2", len(msgs), err)
	}
	for _, m := range msgs {
		if m.DeliveryCount != 1 {
			t.Errorf("%s: DeliveryCount %d after releases, want 1", m.MessageID, m.DeliveryCount)
		}
	}
	checkCredit(t, r, 1, 0)
	// Only the missing credit is issued: 5 wanted, 1 held.
	send(t, q, sbqueue.Message{MessageID: "d"}) // released on the leftover credit
	checkCredit(t, r, 0, 0)
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.ReceiveMessages(ctxDone, 5, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReceiveMessages with a cancelled context: %v", err)
	}
	// The call issued 5 credits; "d" arrived on one and was released.
	if s := q.Snapshot(); s.Released != 9+1+5 {
		t.Errorf("released %d, want %d", s.Released, 9+1+5)
	}
	checkCredit(t, r, 0, 0)
}

// TestReceiverAskingAtShutdownCountsDeliveries is what a worker's shutdown
// depends on: a receive cancelled by shutdown leaves its credit; a further
// receive at shutdown that asks for more than is left issues fresh credit,
// and every message sent on it is locked and counted when abandoned,
// although no handler saw it.
func TestReceiverAskingAtShutdownCountsDeliveries(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	r := q.NewReceiver()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := r.ReceiveMessages(ctx, 4, nil)
		done <- err
	}()
	for q.Snapshot().BlockedReceivers == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel() // shutdown
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	checkCredit(t, r, 4, 0)
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		send(t, q, sbqueue.Message{MessageID: id})
	}
	checkCredit(t, r, 0, 0) // four were sent on it and released

	sctx, scancel := context.WithTimeout(context.Background(), time.Hour)
	defer scancel()
	msgs, err := r.ReceiveMessages(sctx, 4, nil) // what a returnPrefetched does
	if err != nil || len(msgs) != 4 {
		t.Fatalf("receive at shutdown = %d, %v; want 4 on fresh credit", len(msgs), err)
	}
	for _, m := range msgs {
		if err := r.AbandonMessage(sctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	r2 := q.NewReceiver()
	msgs, err = r2.ReceiveMessages(sctx, 6, nil)
	if err != nil || len(msgs) != 6 {
		t.Fatalf("ReceiveMessages(6) = %d, %v", len(msgs), err)
	}
	counts := map[string]uint32{}
	for _, m := range msgs {
		counts[m.MessageID] = m.DeliveryCount
	}
	want := map[string]uint32{"a": 2, "b": 2, "c": 2, "d": 2, "e": 1, "f": 1}
	for id, n := range want {
		if counts[id] != n {
			t.Errorf("%s: DeliveryCount %d, want %d", id, counts[id], n)
		}
	}
}

// TestReceiverPrefetchedLockTicks: a message sent on credit is locked from
// the moment it is sent; the lock lapses with the queue's lock duration
// whether or not the message was handed out, and the receiver still hands
// it out with its old lock token.
func TestReceiverPrefetchedLockTicks(t *testing.T) {
	q, clock := newTestQueue(t, sbqueue.QueueOptions{MaxDeliveryCount: 10})
	r := q.NewReceiver()
	send(t, q, sbqueue.Message{MessageID: "a"})
	msgs, err := r.ReceiveMessages(context.Background(), 1, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatal(len(msgs), err)
	}
	if !msgs[0].LockedUntil.Equal(t0.Add(lockDuration)) {
		t.Errorf("LockedUntil %v, want send time + lock duration", msgs[0].LockedUntil)
	}
	clock.Advance(lockDuration)
	err = r.CompleteMessage(context.Background(), msgs[0], nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Errorf("complete after the lock lapsed: %v, want lock lost", err)
	}
	m := receiveSDK(t, r)
	if m.DeliveryCount != 2 {
		t.Errorf("DeliveryCount after a lapse %d, want 2", m.DeliveryCount)
	}
}

// TestReceiverClose: Close takes the link's credit away; the receiver
// cannot receive any more, and what it received can still be settled.
func TestReceiverClose(t *testing.T) {
	q, _ := newTestQueue(t, sbqueue.QueueOptions{})
	r := q.NewReceiver()
	send(t, q, sbqueue.Message{MessageID: "a"})
	msgs, err := r.ReceiveMessages(context.Background(), 5, nil)
	if err != nil || len(msgs) != 1 {
		t.Fatal(len(msgs), err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkCredit(t, r, 0, 0)
	send(t, q, sbqueue.Message{MessageID: "b"})
	if s := q.Snapshot(); len(s.Active) != 1 || s.Released != 0 {
		t.Errorf("after Close, a send went to the closed link: %+v", s.Counters)
	}
	_, err = r.ReceiveMessages(context.Background(), 1, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeClosed || !errors.Is(err, sbqueue.ErrClosed) {
		t.Errorf("ReceiveMessages after Close: %v, want CodeClosed", err)
	}
	if err := r.CompleteMessage(context.Background(), msgs[0], nil); err != nil {
		t.Errorf("Complete after Close: %v", err)
	}
}

// TestReceiverOnRealTimeInABubble: on the RealClock inside a synctest
// bubble, a message whose receiver died is redelivered when its lock lapses
// on the bubble's timers, with no one moving a clock.
func TestReceiverOnRealTimeInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		send(t, q, sbqueue.Message{MessageID: "a"})
		start := time.Now()
		first := receiveSDK(t, q.NewReceiver()) // its receiver "crashes": never settles
		second := receiveSDK(t, q.NewReceiver())
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("redelivered after %v, want the lock duration", waited)
		}
		if second.DeliveryCount != 2 || second.LockToken == first.LockToken {
			t.Errorf("redelivery: count %d, same token %v", second.DeliveryCount, second.LockToken == first.LockToken)
		}
	})
}
