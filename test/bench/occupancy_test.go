package bench_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// occupancyWork is what the handler of BenchmarkOccupancy does per
// message: wait, as for one store round trip.
const occupancyWork = 5 * time.Millisecond

// BenchmarkOccupancy measures how many of its conc handlers each way of
// consuming keeps busy when a message costs nothing but a wait of 5 ms (no
// Cosmos DB, so the run is bound by the wait, not by the CPU): memory (the
// matrix's drive: conc goroutines handed their messages in memory), bare
// (bareLoop on the queue model) and the worker (worker.Worker on the queue
// model, logging JSON to io.Discard), taking turns as the matrix does.
// Each consumes b.N messages per turn.
//
// Metrics: <name>-busy, the mean number of handlers inside the handler over
// the turn (measured exactly: the integral of the busy count over time);
// <name>-share, the rate as a share of conc ÷ 5 ms; worker/bare and
// worker/memory, ratios of the rates. Medians of the turns.
func BenchmarkOccupancy(b *testing.B) {
	for _, conc := range matrixConcs {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			ctx := context.Background()
			consumers := []struct {
				name string
				run  func(msgs []idempotent.Message, o *occupancy) (time.Duration, error)
			}{
				{"memory", func(msgs []idempotent.Message, o *occupancy) (time.Duration, error) {
					start := time.Now()
					err := drive(ctx, conc, msgs, o.handler, &tally{})
					return time.Since(start), err
				}},
				{"bare", func(msgs []idempotent.Message, o *occupancy) (time.Duration, error) {
					q, err := newQueue(ctx, msgs)
					if err != nil {
						return 0, err
					}
					start := time.Now()
					err = bareLoop(ctx, q.NewReceiver(), conc, len(msgs), o.handler, func() {})
					return time.Since(start), err
				}},
				{"worker", func(msgs []idempotent.Message, o *occupancy) (time.Duration, error) {
					q, err := newQueue(ctx, msgs)
					if err != nil {
						return 0, err
					}
					return runOccupancyWorker(ctx, q.NewReceiver(), conc, len(msgs), o)
				}},
			}
			b.StopTimer()
			rates := make([][]float64, len(consumers))
			busy := make([][]float64, len(consumers))
			rounds := min(max(*matrixRounds, 1), b.N)
			for r := range rounds {
				for j := range consumers {
					i := (j + r) % len(consumers)
					msgs := stream(uniquePrefix("occ"+consumers[i].name), b.N/rounds, 0, nil)
					o := &occupancy{}
					b.StartTimer()
					d, err := consumers[i].run(msgs, o)
					b.StopTimer()
					if err != nil {
						b.Fatalf("%s: %v", consumers[i].name, err)
					}
					rates[i] = append(rates[i], float64(len(msgs))/d.Seconds())
					busy[i] = append(busy[i], o.mean())
				}
			}
			b.ReportMetric(0, "ns/op")
			rate := map[string]float64{}
			bound := float64(conc) / occupancyWork.Seconds()
			for i, k := range consumers {
				rate[k.name] = median(rates[i])
				b.ReportMetric(median(busy[i]), k.name+"-busy")
				b.ReportMetric(rate[k.name]/bound, k.name+"-share")
			}
			b.ReportMetric(rate["worker"]/rate["bare"], "worker/bare")
			b.ReportMetric(rate["worker"]/rate["memory"], "worker/memory")
		})
	}
}

// occupancy integrates the number of handlers busy over time. It is safe
// for concurrent use.
type occupancy struct {
	mu          sync.Mutex
	busy        int
	first, last time.Time
	area        time.Duration // busy handlers × time
}

func (o *occupancy) change(d int) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first.IsZero() {
		o.first = now
	} else {
		o.area += time.Duration(o.busy) * now.Sub(o.last)
	}
	o.last = now
	o.busy += d
}

// handler waits occupancyWork, counted busy meanwhile.
func (o *occupancy) handler(context.Context, idempotent.Message) (outcome, error) {
	o.change(1)
	time.Sleep(occupancyWork)
	o.change(-1)
	return created, nil
}

// mean returns the mean number of busy handlers from the first handler's
// start to the last one's end.
func (o *occupancy) mean() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if span := o.last.Sub(o.first); span > 0 {
		return float64(o.area) / float64(span)
	}
	return 0
}

// runOccupancyWorker runs a worker whose handler is o's on r until it has
// settled n deliveries, and returns the time from its start to the n-th
// settlement.
func runOccupancyWorker(ctx context.Context, r worker.Receiver, conc, n int, o *occupancy) (time.Duration, error) {
	logger, err := cli.NewLogger(io.Discard, "json", "info")
	if err != nil {
		return 0, err
	}
	var count atomic.Int64
	var doneAt time.Time
	done := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		_, _ = o.handler(ctx, m)
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w, err := worker.New(r, h, logger, worker.Options{
		Concurrency:     conc,
		LockDuration:    time.Minute,
		SummaryInterval: -1,
		Observe: func(worker.Report) {
			if count.Add(1) == int64(n) {
				doneAt = time.Now()
				close(done)
			}
		},
	})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		return 0, fmt.Errorf("the worker stopped after %d of %d deliveries: %v", count.Load(), n, err)
	}
	elapsed := doneAt.Sub(start)
	stop()
	return elapsed, <-ran
}
