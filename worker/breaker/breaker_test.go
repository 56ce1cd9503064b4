package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

const (
	breakerConcurrency = 4
	breakerThreshold   = 5                     // what orderworker uses
	breakerSpread      = breaker.DefaultSpread // what orderworker uses
	breakerTrialLimit  = 7                     // orderworker's for its concurrency of 8
	breakerBacklog     = 100
)

// storeHandler fails every message with a store outage while down is set.
type storeHandler struct{ down atomic.Bool }

var errStoreDown = errors.New("503 service unavailable")

func (h *storeHandler) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	if h.down.Load() {
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errStoreDown}
	}
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

// backlogQueue is the queue model holding n messages, m-000 on; abandoning
// one makes it available again with its delivery counted, as Service Bus
// does.
func backlogQueue(t *testing.T, n int) *sbqueue.Queue {
	t.Helper()
	q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("orders", sbqueue.QueueOptions{LockDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	send(t, q, "m-%03d", 0, n)
	return q
}

// send sends n messages to q, their ids format applied to first,
// first+1, and on.
func send(t *testing.T, q *sbqueue.Queue, format string, first, n int) {
	t.Helper()
	for i := range n {
		if _, err := q.Send(context.Background(), sbqueue.Message{MessageID: fmt.Sprintf(format, first+i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBreakerStopsReceivingWhileStoreDown: with the store down, a worker
// with a probe makes at most Concurrency + Threshold deliveries however long
// the outage lasts, and never receives the rest of the backlog; once the
// probe succeeds every message is processed. The real timers (retry
// backoff, breaker backoff) run on synctest's virtual clock.
func TestBreakerStopsReceivingWhileStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := backlogQueue(t, breakerBacklog)
		h := &storeHandler{}
		h.down.Store(true)
		var probes atomic.Int64
		logs := workertest.NewCapture(slog.LevelInfo)
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, slog.New(logs), worker.Options{
			Concurrency: breakerConcurrency, SummaryInterval: time.Minute,
			Gate: newBreaker(t, &b, slog.New(logs), breaker.Options{Threshold: breakerThreshold, Probe: probeWhileDown(&h.down, &probes)}),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)

		time.Sleep(10 * time.Minute) // a long outage
		synctest.Wait()
		s := q.Snapshot()
		if s.Delivered > breakerConcurrency+breakerThreshold {
			t.Errorf("%d deliveries during the outage, want at most concurrency %d + threshold %d", s.Delivered, breakerConcurrency, breakerThreshold)
		}
		if len(s.Active)+len(s.Locked) != breakerBacklog || s.DeadLettered != 0 {
			t.Errorf("queue during the outage: %d active, %d locked, %d dead-lettered; want all %d back in the queue", len(s.Active), len(s.Locked), s.DeadLettered, breakerBacklog)
		}
		if !b.Paused() || b.State().String() != "open" || b.Opened() != 1 {
			t.Errorf("breaker open %v, stats %+v; want open once", b.Paused(), w.Stats())
		}
		t.Logf("outage: %d deliveries, %d probes", s.Delivered, probes.Load())
		if probes.Load() < 5 {
			t.Errorf("%d probes in 10 minutes, want the probe retried", probes.Load())
		}

		h.down.Store(false)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		s = q.Snapshot()
		if s.Completed != breakerBacklog || b.Paused() {
			t.Errorf("after the store came back: %d completed, breaker open %v; want all %d completed and the breaker closed", s.Completed, b.Paused(), breakerBacklog)
		}
		stop()
		if n := len(logs.Matching("circuit breaker open:")); n != 1 {
			t.Errorf("%d breaker-open records, want 1", n)
		}
		for _, r := range logs.Matching("circuit breaker open:") {
			if r.Level != slog.LevelWarn || r.Attrs["reason"].String() != idempotent.ReasonStoreUnavailable {
				t.Errorf("breaker-open record %+v: want WARN with the reason", r)
			}
		}
		openSummaries := 0
		for _, r := range logs.Matching("summary") {
			if r.Attrs["breaker"].String() == "open" {
				openSummaries++
				if r.Level != slog.LevelWarn {
					t.Errorf("summary with the breaker open logged at %v, want WARN", r.Level)
				}
			}
		}
		if openSummaries < 5 {
			t.Errorf("%d summaries report the breaker open during a 10-minute outage, want one a minute", openSummaries)
		}
		closed := logs.Matching("circuit breaker closed")
		if len(closed) != 1 || closed[0].Level != slog.LevelInfo {
			t.Errorf("breaker-closed records %+v, want one at INFO", closed)
		}
	})
}

// TestBreakerHalfOpenWithoutProbe: without a probe
// the breaker lets one message through after each backoff; the outage
// costs the deliveries before it opened plus one per trial, never the
// backlog, and the first trial after the store is back resumes receiving.
func TestBreakerHalfOpenWithoutProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := backlogQueue(t, breakerBacklog)
		h := &storeHandler{}
		h.down.Store(true)
		logs := workertest.NewCapture(slog.LevelInfo)
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, slog.New(logs), worker.Options{Concurrency: breakerConcurrency, SummaryInterval: -1,
			Gate: newBreaker(t, &b, slog.New(logs), breaker.Options{Threshold: breakerThreshold})})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)

		time.Sleep(90 * time.Second)
		synctest.Wait()
		s := q.Snapshot()
		trials := int64(len(logs.Matching("half-open")))
		t.Logf("outage: %d deliveries, %d trials", s.Delivered, trials)
		if trials == 0 || trials > 7 { // backoffs 1, 2, 4, ... 64 s within 90 s
			t.Errorf("%d trial deliveries in 90 s, want between 1 and 7", trials)
		}
		if s.Delivered > breakerConcurrency+breakerThreshold+trials {
			t.Errorf("%d deliveries during the outage, want at most concurrency %d + threshold %d + %d trials",
				s.Delivered, breakerConcurrency, breakerThreshold, trials)
		}

		h.down.Store(false)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		s = q.Snapshot()
		if s.Completed != breakerBacklog || s.DeadLettered != 0 || b.Paused() {
			t.Errorf("after the store came back: %d completed, %d dead-lettered, breaker open %v; want all %d completed",
				s.Completed, s.DeadLettered, b.Paused(), breakerBacklog)
		}
		stop()
	})
}

// TestBreakerIgnoresMessageRetries: a retry for the message's own sake
// (its order not yet created) says the store answers: it never opens the
// breaker.
func TestBreakerIgnoresMessageRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := backlogQueue(t, 20)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: order.ReasonOrderNotYetCreated}
		})
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, nil, worker.Options{Concurrency: 2, SummaryInterval: -1, RetryBackoff: -1,
			Gate: newBreaker(t, &b, nil, breaker.Options{Threshold: breakerThreshold})})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)
		time.Sleep(time.Second)
		synctest.Wait()
		stop()
		if st := w.Stats(); b.Opened() != 0 || st.Retried < 20 {
			t.Errorf("stats = %+v, want retries and the breaker never opened", st)
		}
	})
}

// TestBreakerCancelsTheReceiveInProgress: when the breaker opens while the
// loop waits in ReceiveMessages on an idle queue, that receive is cancelled,
// so messages sent during the outage are not received.
func TestBreakerCancelsTheReceiveInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := backlogQueue(t, breakerThreshold)
		h := &storeHandler{}
		h.down.Store(true)
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, nil, worker.Options{
			Concurrency: 8, SummaryInterval: -1, // free slots: the loop waits in a receive
			Gate: newBreaker(t, &b, nil, breaker.Options{Threshold: breakerThreshold, Probe: func(context.Context) error { return errStoreDown }}),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)
		time.Sleep(time.Minute)
		synctest.Wait()
		send(t, q, "during-%d", 0, 50)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		// The cancelled receive's link credit stays on the link, as with
		// the SDK: the broker may send messages on it, which the SDK's
		// releaser (and the model's) gives back with AMQP released, which
		// counts no delivery. What counts is what is not given back.
		if s := q.Snapshot(); s.Delivered-s.Released != breakerThreshold || !b.Paused() {
			t.Errorf("%d deliveries (%d of them released unhandled), breaker open %v; want only the %d that opened it counted",
				s.Delivered, s.Released, b.Paused(), breakerThreshold)
		}
		if s := q.Snapshot(); len(s.Active) != 50+breakerThreshold || len(s.Locked) != 0 {
			t.Errorf("%d messages available and %d locked during the outage; want the 50 sent and the %d abandoned, none locked", len(s.Active), len(s.Locked), breakerThreshold)
		}
		stop()
	})
}

// probeWhileDown returns a probe that fails with errStoreDown while down
// is set, and counts its calls in calls unless calls is nil.
func probeWhileDown(down *atomic.Bool, calls *atomic.Int64) func(context.Context) error {
	return func(context.Context) error {
		if calls != nil {
			calls.Add(1)
		}
		if down.Load() {
			return errStoreDown
		}
		return nil
	}
}

// run runs w until the returned stop cancels it; stop waits for Run to
// return and fails t if it returned an error. In a synctest bubble, the
// wait is the bubble's: a Run that never returns is reported deadlocked.
func run(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// newBreaker returns a Breaker for a test's worker and stores it in *b.
func newBreaker(t *testing.T, b **breaker.Breaker, logger *slog.Logger, o breaker.Options) *breaker.Breaker {
	t.Helper()
	var err error
	if *b, err = breaker.New(o, logger); err != nil {
		t.Fatal(err)
	}
	return *b
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []breaker.Options{
		{Threshold: -1},
		{Threshold: 5, MinBackoff: time.Minute, MaxBackoff: time.Second},
		{ProbeTimeout: -time.Second},
	} {
		if _, err := breaker.New(o, nil); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", o)
		}
	}
}
