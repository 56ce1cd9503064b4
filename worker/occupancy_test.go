package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// roundTripReceiver is the fake receiver with a network in front of it:
// every receive and every settlement costs a round trip (in the bubble's
// fake time), as they do against Service Bus.
type roundTripReceiver struct {
	*workertest.Receiver
	receiveRTT, settleRTT time.Duration
}

func (r *roundTripReceiver) ReceiveMessages(ctx context.Context, max int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	time.Sleep(r.receiveRTT)
	return r.Receiver.ReceiveMessages(ctx, max, o)
}

func (r *roundTripReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	time.Sleep(r.settleRTT)
	return r.Receiver.CompleteMessage(ctx, m, o)
}

// TestConcurrencyKeepsEveryHandlerBusy: with a backlog, Concurrency c keeps
// c handlers busy. Each message costs its handler 5 ms (a store round
// trip), each receive call and each settlement 1 ms and 2 ms; in fake
// time, nothing else takes any. A handler that finishes waits at most for
// the receive call in progress and the next one, so 8 waves of c messages
// take at most 8 × (5 + 2 × 1) ms and the last settlement's 2 ms: the
// loop must ask for as many messages as there are free handlers in one call
// (one call per message would cost c ms a wave), and a handler slot must
// free before the settlement's round trip, not after it.
func TestConcurrencyKeepsEveryHandlerBusy(t *testing.T) {
	for _, conc := range []int{1, 4, 16, 64} {
		t.Run(fmt.Sprintf("conc=%d", conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const (
					waves      = 8
					work       = 5 * time.Millisecond
					receiveRTT = time.Millisecond
					settleRTT  = 2 * time.Millisecond
				)
				n := waves * conc
				r := &roundTripReceiver{Receiver: workertest.NewReceiver(ids("m", n)...), receiveRTT: receiveRTT, settleRTT: settleRTT}
				var (
					mu             sync.Mutex
					busy, mostBusy int
				)
				h := worker.HandlerFunc(func(_ context.Context, m idempotent.Message) idempotent.Result {
					mu.Lock()
					busy++
					mostBusy = max(mostBusy, busy)
					mu.Unlock()
					time.Sleep(work)
					mu.Lock()
					busy--
					mu.Unlock()
					return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
				})
				ctx, cancel := context.WithCancel(context.Background())
				var settled atomic.Int64
				done := make(chan struct{})
				w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: conc, SummaryInterval: -1, Observe: func(worker.Report) {
					if settled.Add(1) == int64(n) {
						close(done)
					}
				}})
				start := time.Now()
				errc := make(chan error, 1)
				go func() { errc <- w.Run(ctx) }()
				<-done
				elapsed := time.Since(start)
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				t.Logf("concurrency %d: %d messages in %v", conc, n, elapsed)
				if limit := waves*(work+2*receiveRTT) + settleRTT; elapsed > limit {
					t.Errorf("concurrency %d: %d messages took %v, want at most %v (handlers left idle)", conc, n, elapsed, limit)
				}
				if mostBusy != conc {
					t.Errorf("concurrency %d: at most %d handlers were busy at once", conc, mostBusy)
				}
			})
		})
	}
}
