package breaker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

// poisonKey is the entity of every poison message: an order whose stored
// document cannot be decoded, so that every status change for it fails.
const poisonKey = "order-poison"

// errUndecodable is what reading the poison order's document returns, as
// order's readJSON reports it.
var errUndecodable = errors.New("decode stored document order-poison/order-poison: json: cannot unmarshal string into Go struct field OrderDocument.version of type int64")

// poisonHandler fails every message whose id starts with "poison" with a
// StoreError of poisonKey, each delivery, as a status change for an order
// whose stored document cannot be decoded fails; while down is set it fails
// every other message with a store outage; else it creates.
type poisonHandler struct {
	down    atomic.Bool
	created atomic.Int64
}

func (h *poisonHandler) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	switch {
	case strings.HasPrefix(m.ID, "poison"):
		return idempotent.StoreFailure(poisonKey, "read for status change", errUndecodable)
	case h.down.Load():
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: errStoreDown}
	}
	h.created.Add(1)
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

// poisonQueue is the queue model with the poison messages first, then
// healthy healthy messages: abandoned messages return to the head, as on
// Service Bus, so the poison ones are the first that every receive takes.
func poisonQueue(t *testing.T, poison, healthy int) *sbqueue.Queue {
	t.Helper()
	q := backlogQueue(t, 0)
	send(t, q, "poison-v%d", 2, poison)
	send(t, q, "m-%03d", 0, healthy)
	return q
}

// TestBreakerPoisonMessagesDoNotStopTheWorker: eight status changes of one
// order whose stored document cannot be decoded (a StoreError on every
// delivery, a dependency failure by its reason) at the head of a backlog of
// 400 orders. They reach the breaker's threshold, but the probe says the
// store answers, so the breaker never opens and their entity's failures no
// longer count: every healthy message completes, and the broker
// dead-letters the poison ones at MaxDeliveryCount. A real outage across
// distinct entities afterwards still opens it, and it closes when the store
// is back. Before the rule, the same messages reopened the breaker after
// every successful probe, each time with a doubled backoff.
func TestBreakerPoisonMessagesDoNotStopTheWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poison, healthy = 8, 400
		q := poisonQueue(t, poison, healthy)
		h := &poisonHandler{}
		var probes atomic.Int64
		logs := workertest.NewCapture(slog.LevelInfo)
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, slog.New(logs), worker.Options{
			Concurrency: 8, SummaryInterval: -1,
			Gate: newBreaker(t, &b, slog.New(logs), breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit, Probe: probeWhileDown(&h.down, &probes)}),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)

		// Ten deliveries of a poison message take about 50 s of retry
		// backoff (500 ms doubling, at most a quarter of the lock).
		began := time.Now()
		var allCreated time.Duration // on the bubble's clock, for the log
		for range 600 {
			time.Sleep(time.Second)
			synctest.Wait()
			if allCreated == 0 && h.created.Load() == healthy {
				allCreated = time.Since(began)
			}
		}
		s := q.Snapshot()
		t.Logf("poison: %d deliveries, %d probes, %d completed (all %d healthy after %v), %d dead-lettered, breaker opened %d times",
			s.Delivered, probes.Load(), s.Completed, healthy, allCreated, s.DeadLettered, b.Opened())
		if h.created.Load() != healthy || s.Completed != healthy {
			t.Errorf("%d of %d healthy orders created, %d completed", h.created.Load(), healthy, s.Completed)
		}
		if s.DeadLettered != poison || len(s.Active)+len(s.Locked) != 0 {
			t.Errorf("%d dead-lettered, %d left in the queue; want the %d poison messages dead-lettered, none left", s.DeadLettered, len(s.Active)+len(s.Locked), poison)
		}
		for _, m := range s.DeadLetters {
			if !strings.HasPrefix(m.MessageID, "poison") || m.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded {
				t.Errorf("dead-lettered %s as %q, want only the poison messages, for MaxDeliveryCountExceeded", m.MessageID, m.DeadLetterReason)
			}
		}
		if b.Opened() != 0 || b.Paused() {
			t.Errorf("breaker opened %d times (open now: %v), want never: the probe answered every time", b.Opened(), b.Paused())
		}
		// One entity: the probe is asked once for its run, then at most
		// once per redelivery of a poison message (each of those failures
		// is the probe's to judge); every answer keeps the breaker
		// closed.
		most := int64(1 + poison*(sbqueue.DefaultMaxDeliveryCount-1))
		if n := len(logs.Matching("circuit breaker stays closed")); int64(n) != probes.Load() || probes.Load() < 1 || probes.Load() > most {
			t.Errorf("%d stays-closed records, %d probes; want as many records as probes, 1 to %d", n, probes.Load(), most)
		}

		// A real outage across distinct entities still opens it. The store
		// goes down before the backlog arrives: the worker's receivers wait
		// for messages, and on another processor they would take and
		// create some of it before a later Store(true), counted below as
		// deliveries during the outage (71 in a run on a loaded machine).
		before := q.Snapshot().Delivered
		h.down.Store(true)
		send(t, q, "late-%03d", 0, breakerBacklog)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		s = q.Snapshot()
		if d := s.Delivered - before; d > 8+breakerThreshold {
			t.Errorf("%d deliveries during the outage, want at most concurrency 8 + threshold %d", d, breakerThreshold)
		}
		if !b.Paused() || b.Opened() != 1 || s.DeadLettered != poison {
			t.Errorf("during the outage: breaker open %v, opened %d times, %d dead-lettered; want open once, nothing more dead-lettered", b.Paused(), b.Opened(), s.DeadLettered)
		}
		h.down.Store(false)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		s = q.Snapshot()
		if s.Completed != healthy+breakerBacklog || b.Paused() {
			t.Errorf("after the outage: %d completed, breaker open %v; want %d completed and the breaker closed", s.Completed, b.Paused(), healthy+breakerBacklog)
		}
		stop()
	})
}

// TestBreakerExcusesAfterTheProbeCloses: when poison messages of a few
// entities fill a run while the probe fails (the store really is down
// too), the breaker opens; once the probe succeeds and closes it, those
// entities' failures no longer count, so they cannot reopen it while the
// healthy messages behind them complete.
func TestBreakerExcusesAfterTheProbeCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poison, healthy = 8, 200
		q := poisonQueue(t, poison, healthy)
		h := &poisonHandler{}
		h.down.Store(true)
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, nil, worker.Options{
			Concurrency: 8, SummaryInterval: -1,
			Gate: newBreaker(t, &b, nil, breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit, Probe: probeWhileDown(&h.down, nil)}),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !b.Paused() || b.Opened() != 1 {
			t.Fatalf("breaker open %v, opened %d times; want open once while the store is down", b.Paused(), b.Opened())
		}
		h.down.Store(false)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		s := q.Snapshot()
		if s.Completed != healthy || s.DeadLettered != poison || b.Opened() != 1 || b.Paused() {
			t.Errorf("%d completed, %d dead-lettered, breaker opened %d times (open now %v); want %d completed, the %d poison dead-lettered, no reopening",
				s.Completed, s.DeadLettered, b.Opened(), b.Paused(), healthy, poison)
		}
		stop()
	})
}

// manyPoisonHandler fails every message whose id starts with "poison" with
// a StoreError of its own entity (the id), each delivery; else it creates.
type manyPoisonHandler struct{ created atomic.Int64 }

func (h *manyPoisonHandler) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	if strings.HasPrefix(m.ID, "poison") {
		return idempotent.StoreFailure(m.ID, "read for status change", errUndecodable)
	}
	h.created.Add(1)
	return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
}

// TestBreakerPoisonAtTheHeadPassedByTheFirstTrial: six poison entities,
// with the deployment's options (concurrency 8, spread 5, trial limit 7),
// fail on every delivery while the probe answers and return to the head of
// the queue after each: six entities failing again, they look like an
// outage the probe cannot see and open the breaker (the spread rule's
// documented limit). Orders sent meanwhile wait behind them. The first
// trial, after TrialBackoff (10 min), lets the six fail one by one and
// reaches an order, which closes the breaker: the trial got past the six,
// so they no longer count in the spread, the orders flow, and the broker
// dead-letters only the poison messages. With a trial limit of the spread
// (5) no trial could get past the sixth, and each would cost the six a
// delivery, doubling the wait, until the broker dead-lettered them hours
// later.
func TestBreakerPoisonAtTheHeadPassedByTheFirstTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poison, healthy = 6, 200
		q := backlogQueue(t, 0)
		send(t, q, "poison-%d", 0, poison)
		h := &manyPoisonHandler{}
		var b *breaker.Breaker
		w, err := worker.New(q.NewReceiver(), h, nil, worker.Options{
			Concurrency: 8, SummaryInterval: -1,
			Gate: newBreaker(t, &b, nil, breaker.Options{Threshold: breakerThreshold, Spread: breakerSpread, TrialLimit: breakerTrialLimit,
				Probe: func(context.Context) error { return nil }}),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, w)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !b.Paused() || b.Opened() != 1 {
			t.Fatalf("breaker paused %v, opened %d times; want the six poison entities to open it", b.Paused(), b.Opened())
		}
		send(t, q, "m-%03d", 0, healthy)
		time.Sleep(10 * time.Minute) // the first trial comes 10 min after the opening
		synctest.Wait()
		s := q.Snapshot()
		t.Logf("%d deliveries, %d completed, %d dead-lettered, breaker opened %d times, paused %v", s.Delivered, s.Completed, s.DeadLettered, b.Opened(), b.Paused())
		if h.created.Load() != healthy || b.Paused() || b.Opened() != 1 {
			t.Errorf("%d of %d orders created, breaker paused %v, opened %d times; want all created after the first trial, no reopening", h.created.Load(), healthy, b.Paused(), b.Opened())
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if s := q.Snapshot(); s.DeadLettered != poison || s.Completed != healthy || b.Opened() != 1 {
			t.Errorf("%d dead-lettered, %d completed, breaker opened %d times; want the %d poison dead-lettered, the %d orders completed, one opening", s.DeadLettered, s.Completed, b.Opened(), poison, healthy)
		}
		stop()
	})
}
