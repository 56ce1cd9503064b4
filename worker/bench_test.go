package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// benchReceiver is an endless backlog for benchmarks: ReceiveMessages
// always returns as many messages as asked for, after receiveDelay, and
// every settlement takes settleDelay. With zero delays it costs next to
// nothing, so a benchmark measures the worker's own code: it reuses its
// messages (a message is handed out again only after its settlement, which
// the worker never touches again) and the slice it returns (the worker
// reads it only until its next call). After want settlements it closes
// done.
type benchReceiver struct {
	receiveDelay, settleDelay time.Duration

	free chan *azservicebus.ReceivedMessage // messages not in flight
	buf  []*azservicebus.ReceivedMessage

	settled atomic.Int64
	want    int64
	done    chan struct{}
}

var _ worker.Receiver = (*benchReceiver)(nil)

func newBenchReceiver(want, inFlight int, receiveDelay, settleDelay time.Duration) *benchReceiver {
	r := &benchReceiver{
		receiveDelay: receiveDelay, settleDelay: settleDelay,
		free: make(chan *azservicebus.ReceivedMessage, inFlight),
		want: int64(want), done: make(chan struct{}),
	}
	locked := time.Now().Add(time.Hour)
	for i := range inFlight {
		r.free <- &azservicebus.ReceivedMessage{MessageID: fmt.Sprint("m", i), Body: []byte(`{}`), DeliveryCount: 1, LockedUntil: &locked}
	}
	return r
}

func (r *benchReceiver) ReceiveMessages(ctx context.Context, n int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	if r.receiveDelay > 0 {
		t := time.NewTimer(r.receiveDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	r.buf = r.buf[:0]
	select {
	case m := <-r.free:
		r.buf = append(r.buf, m)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(r.buf) < n {
		select {
		case m := <-r.free:
			r.buf = append(r.buf, m)
		default:
			return r.buf, nil
		}
	}
	return r.buf, nil
}

func (r *benchReceiver) settle(ctx context.Context, m *azservicebus.ReceivedMessage) error {
	if r.settleDelay > 0 {
		time.Sleep(r.settleDelay)
	}
	r.free <- m
	if r.settled.Add(1) == r.want {
		close(r.done)
	}
	return ctx.Err()
}

func (r *benchReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	return r.settle(ctx, m)
}

func (r *benchReceiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.AbandonMessageOptions) error {
	return r.settle(ctx, m)
}

func (r *benchReceiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.DeadLetterOptions) error {
	return r.settle(ctx, m)
}

func (r *benchReceiver) RenewMessageLock(context.Context, *azservicebus.ReceivedMessage, *azservicebus.RenewMessageLockOptions) error {
	return nil
}

// runBench runs a worker on r with h until r has seen b.N settlements and
// returns when that was. A nil logger discards.
func runBench(b *testing.B, r *benchReceiver, h worker.Handler, concurrency int, logger *slog.Logger) (done time.Time) {
	b.Helper()
	w, err := worker.New(r, h, logger, worker.Options{Concurrency: concurrency, RetryBackoff: -1, ReceiveDrain: -1, SummaryInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	cpu0, cpuOK := processCPU()
	b.ResetTimer()
	go func() { errc <- w.Run(ctx) }()
	<-r.done
	b.StopTimer()
	done = time.Now()
	if cpu1, ok := processCPU(); ok && cpuOK {
		// CPU time rather than wall time: on a machine shared with other
		// work it still says what the worker costs.
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return done
}

// BenchmarkWorkerOverhead measures the worker's own cost per message (one
// op is one message received, handled and completed): the receiver and the
// handler cost next to nothing, so ns/op and allocs/op are the receive
// loop's, handle's and settle's. With logger=discard (a nil logger) the
// per-delivery log record is not built; logger=json writes it, as
// orderworker does at INFO, to io.Discard.
func BenchmarkWorkerOverhead(b *testing.B) {
	loggers := []struct {
		name string
		l    *slog.Logger
	}{
		{"discard", nil},
		{"json", slog.New(slog.NewJSONHandler(io.Discard, nil))},
	}
	for _, lg := range loggers {
		for _, c := range []int{1, 8} {
			b.Run(fmt.Sprintf("logger=%s/concurrency=%d", lg.name, c), func(b *testing.B) {
				b.ReportAllocs()
				r := newBenchReceiver(b.N, 4*c+4, 0, 0)
				h := worker.HandlerFunc(func(_ context.Context, m idempotent.Message) idempotent.Result {
					return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
				})
				runBench(b, r, h, c, lg.l)
			})
		}
	}
}

// Simulated latencies of BenchmarkWorkerThroughput. The handler's 5 ms
// stands for the store's round trips of one order; receive and settlement
// take 1 ms each, a Service Bus round trip within one region (a settlement
// is one round trip on the link; a receive on a backlog is the flow frame's
// round trip, and the SDK returns as soon as the credit is filled).
const (
	benchStoreLatency   = 5 * time.Millisecond
	benchReceiveLatency = time.Millisecond
	benchSettleLatency  = time.Millisecond
)

// BenchmarkWorkerThroughput measures how much of the concurrency the
// worker turns into throughput when the handler waits on a store: the
// metric share is messages per second divided by concurrency/store latency,
// the rate of handlers that never wait for anything but the store (1.0).
func BenchmarkWorkerThroughput(b *testing.B) {
	for _, c := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprint("concurrency=", c), func(b *testing.B) {
			r := newBenchReceiver(b.N, 4*c+4, benchReceiveLatency, benchSettleLatency)
			var once sync.Once
			var begun time.Time
			h := worker.HandlerFunc(func(_ context.Context, m idempotent.Message) idempotent.Result {
				once.Do(func() { begun = time.Now() })
				time.Sleep(benchStoreLatency)
				return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
			})
			elapsed := runBench(b, r, h, c, nil).Sub(begun)
			if elapsed <= 0 {
				return
			}
			ideal := float64(c) / benchStoreLatency.Seconds()
			b.ReportMetric(float64(b.N)/elapsed.Seconds()/ideal, "share")
		})
	}
}
