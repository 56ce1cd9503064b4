package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// TestRenewalFollowsTheGrantedLock: the queue grants 10 s locks while the
// worker is configured (by default) for 60 s. Renewing every 30 s from the
// configuration loses the lock of every handler that runs longer than
// 10 s; renewing from LockedUntil keeps it. The mismatch is reported once.
// It runs the real timers on synctest's virtual clock against the queue
// model, whose locks expire as Service Bus's do.
func TestRenewalFollowsTheGrantedLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const granted = 10 * time.Second
		q, err := sbqueue.NewNamespace(sbqueue.RealClock()).CreateQueue("orders", sbqueue.QueueOptions{LockDuration: granted})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := q.Send(context.Background(), sbqueue.Message{MessageID: fmt.Sprint("long-", i)}); err != nil {
				t.Fatal(err)
			}
		}
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			select {
			case <-time.After(40 * time.Second): // four granted locks long
				return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
			case <-ctx.Done():
				return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: ctx.Err()}
			}
		})
		logs := workertest.NewCapture(slog.LevelWarn)
		w, err := worker.New(q.NewReceiver(), h, slog.New(logs), worker.Options{Concurrency: 2, SummaryInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}

		s := q.Snapshot()
		if s.Completed != 2 || s.LockExpired != 0 || s.LockLost != 0 {
			t.Errorf("queue: completed %d, locks expired %d, lost %d; want 2 completed and no lock expired or lost", s.Completed, s.LockExpired, s.LockLost)
		}
		if st := w.Stats(); st.LockLost != 0 || st.Outcomes[idempotent.Created] != 2 {
			t.Errorf("stats = %+v, want 2 created and no lock lost", st)
		}
		warned := logs.Matching("lock duration disagrees")
		if len(warned) != 1 {
			t.Fatalf("%d lock-duration warnings, want exactly 1 per worker", len(warned))
		}
		if g, c := warned[0].Attrs["granted_lock"].String(), warned[0].Attrs["configured_lock"].String(); g != "10s" || c != "1m0s" {
			t.Errorf("warning says granted %q, configured %q; want 10s and 1m0s", g, c)
		}
	})
}

// TestRenewalWithoutLockedUntil: a receiver that reports no LockedUntil
// gets its locks renewed every half of the configured duration.
func TestRenewalWithoutLockedUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("long")
		done := workertest.SettledN(r, 1)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			time.Sleep(25 * time.Second)
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{LockDuration: 30 * time.Second, SummaryInterval: -1})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		<-done
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		// 25 s of handling, renewed at 15 s: one renewal.
		if n := r.Renewals("long"); n != 1 {
			t.Errorf("%d renewals in 25 s with a 30 s lock and no LockedUntil, want 1 (every 15 s)", n)
		}
	})
}

// TestRenewalWithLockedUntilInThePast: a LockedUntil already past by the
// local clock (clocks that disagree) must not make renewal spin: the
// configured rule applies.
func TestRenewalWithLockedUntilInThePast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver()
		past := time.Now().Add(-time.Hour)
		r.Send(&azservicebus.ReceivedMessage{MessageID: "skewed", DeliveryCount: 1, LockedUntil: &past})
		done := workertest.SettledN(r, 1)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			time.Sleep(25 * time.Second)
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		logs := workertest.NewCapture(slog.LevelWarn)
		w, err := worker.New(r, h, slog.New(logs), worker.Options{LockDuration: 30 * time.Second, SummaryInterval: -1, RetryBackoff: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		<-done
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if n := r.Renewals("skewed"); n != 1 {
			t.Errorf("%d renewals in 25 s, want 1 (every 15 s)", n)
		}
		if n := len(logs.Matching("local clock is ahead")); n != 1 {
			t.Errorf("%d clock warnings, want 1", n)
		}
	})
}

// TestRenewalEndsWithTheMessageTimeout: a handler that ignores its
// MessageTimeout keeps its lock only until that deadline; after it the lock
// lapses and the broker gives the message to another consumer, instead of
// a hung handler holding it for good.
func TestRenewalEndsWithTheMessageTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := workertest.NewReceiver("hung")
		done := workertest.SettledN(r, 1)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			time.Sleep(10 * time.Second) // ignores ctx
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{LockDuration: 4 * time.Second, MessageTimeout: 3 * time.Second, SummaryInterval: -1})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		<-done
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		// Renewed at 2 s; the next renewal, due at 4 s, is past the 3 s
		// deadline.
		if n := r.Renewals("hung"); n != 1 {
			t.Errorf("%d renewals of a handler that ran 10 s past its 3 s deadline, want 1 (at 2 s)", n)
		}
	})
}
