package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// sdkQueue is a queue on the Service Bus test broker with a real
// azservicebus receiver on it.
type sdkQueue struct {
	q        *sbqueue.Queue
	client   *azservicebus.Client
	receiver *azservicebus.Receiver
}

func newSDKQueue(t *testing.T, backlog int) *sdkQueue {
	t.Helper()
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	client, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &sdkQueue{q: q, client: client, receiver: receiver}
	s.send(t, "backlog", backlog)
	return s
}

func (s *sdkQueue) send(t *testing.T, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.q.Send(context.Background(), sbqueue.Message{MessageID: fmt.Sprintf("%s-%02d", prefix, i), Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
}

// until polls cond until it holds or 30 s have passed.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockingHandler records the messages it sees and holds each until
// release is closed.
type blockingHandler struct {
	release chan struct{}
	mu      sync.Mutex
	seen    map[string]bool
}

func (h *blockingHandler) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	h.mu.Lock()
	h.seen[m.ID] = true
	h.mu.Unlock()
	<-h.release
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

func (h *blockingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// TestShutdownCountsNoDeliveryThroughTheSDK runs the worker on the real
// azservicebus receiver against the test broker and cancels it: every
// message no handler saw must end available with its delivery count
// untouched, and be received next as a first delivery. The old shutdown
// received once more on fresh credit and abandoned what came (Concurrency
// counted deliveries per SIGTERM).
func TestShutdownCountsNoDeliveryThroughTheSDK(t *testing.T) {
	const concurrency = 4
	tests := []struct {
		name      string
		drain     time.Duration // Options.ReceiveDrain
		backlog   int           // messages queued before the worker starts
		handled   int           // how many handlers start before the cancel
		afterStop int           // messages sent once shutdown has begun
		drained   int           // how many of them the receive in progress brings to a handler
		released  int           // how many of them the SDK's releaser gives back
	}{
		// Every handler busy: the loop waits for a slot, no credit is
		// left on the link when shutdown begins.
		{name: "backlog", backlog: 40, handled: concurrency},
		// Two handlers busy, the loop waits in ReceiveMessages with the
		// credit for two more. What the broker sends on it within the
		// drain window is handled and completed...
		{name: "credit drained", drain: time.Minute, backlog: 2, handled: 2, afterStop: 5, drained: 2},
		// ... and without a window it is released by the SDK, never
		// locked for good.
		{name: "credit released", drain: -1, backlog: 2, handled: 2, afterStop: 5, released: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSDKQueue(t, tt.backlog)
			h := &blockingHandler{release: make(chan struct{}), seen: map[string]bool{}}
			w, err := worker.New(s.receiver, h, nil, worker.Options{
				Concurrency: concurrency, RetryBackoff: -1, SummaryInterval: -1, ReceiveDrain: tt.drain,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- w.Run(ctx) }()
			until(t, "the handlers to start", func() bool { return h.count() == tt.handled })
			if tt.afterStop > 0 {
				// The loop is in ReceiveMessages once the broker waits
				// on the queue with the credit it issued: only then is
				// there credit left on the link at shutdown.
				until(t, "the broker to wait with the receive's credit", func() bool { return s.q.Snapshot().BlockedReceivers == 1 })
			}
			cancel()
			s.send(t, "late", tt.afterStop)
			until(t, "the receive in progress to bring what the broker sent on its credit", func() bool {
				return h.count() == tt.handled+tt.drained
			})
			// Without a drain window the receive is cancelled at once,
			// but what reached the SDK before it saw the cancel is still
			// handed out, and then handled (a loaded machine shows it):
			// of the leftover credit, what no handler got is released.
			until(t, "the SDK to release what arrived on leftover credit", func() bool {
				brought := int64(h.count() - tt.handled - tt.drained)
				return s.q.Snapshot().Released+brought == int64(tt.released)
			})
			close(h.release)
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			closeCtx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancelClose()
			if err := s.receiver.Close(closeCtx); err != nil {
				t.Fatal(err)
			}

			snap := s.q.Snapshot()
			unseen := tt.backlog + tt.afterStop - h.count()
			if want := tt.handled + tt.drained; h.count() < want || h.count() > want+tt.released || snap.Completed != int64(h.count()) {
				t.Errorf("handlers saw %d and the queue completed %d, want %d (and at most %d more brought by the cancelled receive)", h.count(), snap.Completed, want, tt.released)
			}
			if snap.Abandoned != 0 || len(snap.Locked) != 0 {
				t.Errorf("shutdown abandoned %d and left %d locked, want none", snap.Abandoned, len(snap.Locked))
			}
			if len(snap.Active) != unseen {
				t.Errorf("%d messages available after shutdown, want the %d no handler saw", len(snap.Active), unseen)
			}
			for _, m := range snap.Active {
				if h.seen[m.MessageID] || m.DeliveryCount != 0 {
					t.Errorf("message %s: delivery count %d at the broker (seen by a handler: %v), want 0", m.MessageID, m.DeliveryCount, h.seen[m.MessageID])
				}
			}

			// The next receiver gets each of them as a first delivery.
			next, err := s.client.NewReceiverForQueue("orders", nil)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancelReceive := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancelReceive()
			got := 0
			for got < unseen {
				msgs, err := next.ReceiveMessages(rctx, unseen-got, nil)
				if err != nil {
					t.Fatalf("receiving the rest after %d of %d: %v", got, unseen, err)
				}
				for _, m := range msgs {
					got++
					if m.DeliveryCount != 1 {
						t.Errorf("message %s received next with DeliveryCount %d, want 1", m.MessageID, m.DeliveryCount)
					}
				}
			}
		})
	}
}

// TestShutdownUnderLoadThroughTheSDK cancels a busy worker at an arbitrary
// moment, as SIGTERM does: nothing may be abandoned or left locked, and
// every message not completed must still be a first delivery.
func TestShutdownUnderLoadThroughTheSDK(t *testing.T) {
	const backlog = 300
	s := newSDKQueue(t, backlog)
	var handled sync.Map
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		handled.Store(m.ID, true)
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w, err := worker.New(s.receiver, h, nil, worker.Options{Concurrency: 16, RetryBackoff: -1, SummaryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	until(t, "the worker to complete some messages", func() bool { return s.q.Snapshot().Completed >= 50 })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	if err := s.receiver.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	snap := s.q.Snapshot()
	if snap.Abandoned != 0 || len(snap.Locked) != 0 || snap.Completed+int64(len(snap.Active)) != backlog {
		t.Errorf("after shutdown: %d completed, %d abandoned, %d locked, %d available; want nothing abandoned or locked",
			snap.Completed, snap.Abandoned, len(snap.Locked), len(snap.Active))
	}
	for _, m := range snap.Active {
		if _, ok := handled.Load(m.MessageID); ok || m.DeliveryCount != 0 {
			t.Errorf("message %s: delivery count %d (handled: %v), want 0", m.MessageID, m.DeliveryCount, ok)
		}
	}
	t.Logf("completed %d of %d; released by the SDK: %d", snap.Completed, backlog, snap.Released)
}
