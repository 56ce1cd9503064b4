package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/workertest"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

func TestSettlementFollowsOutcome(t *testing.T) {
	tests := []struct {
		outcome idempotent.Outcome
		want    workertest.Settlement
	}{
		{idempotent.Created, workertest.Settlement{Kind: "complete"}},
		{idempotent.Duplicate, workertest.Settlement{Kind: "complete"}},
		{idempotent.Mismatch, workertest.Settlement{Kind: "deadletter", Reason: order.ReasonOrderIDReused, Desc: "hashes differ"}},
		{idempotent.Invalid, workertest.Settlement{Kind: "deadletter", Reason: idempotent.ReasonInvalidMessage, Desc: "totalMinor: wrong"}},
		{idempotent.Transient, workertest.Settlement{Kind: "abandon"}},
		{idempotent.Applied, workertest.Settlement{Kind: "complete"}},
		{idempotent.Stale, workertest.Settlement{Kind: "complete"}},
		{idempotent.Ignored, workertest.Settlement{Kind: "complete"}},
		// An outcome the worker does not know: retried, never lost.
		{idempotent.Outcome(42), workertest.Settlement{Kind: "abandon"}},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.String(), func(t *testing.T) {
			r := workertest.NewReceiver("m1")
			done := workertest.SettledN(r, 1)
			h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
				return idempotent.Result{Outcome: tt.outcome, Key: m.ID, Reason: tt.want.Reason, Description: tt.want.Desc}
			})
			var reports []worker.Report
			var mu sync.Mutex
			w := workertest.NewWorker(t, r, h, worker.Options{Observe: func(rep worker.Report) { mu.Lock(); reports = append(reports, rep); mu.Unlock() }})
			stop := workertest.Start(t, w)
			workertest.Wait(t, done, "settlement")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := r.Settlements("m1")
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("settlements = %+v, want [%+v]", got, tt.want)
			}
			if len(reports) != 1 || reports[0].Result.Outcome != tt.outcome || reports[0].SettleErr != nil {
				t.Errorf("reports = %+v", reports)
			}
		})
	}
}

func TestLockLostOnCompleteIsSurvived(t *testing.T) {
	r := workertest.NewReceiver("lost", "next")
	r.CompleteErr = func(m *azservicebus.ReceivedMessage) error {
		if m.MessageID == "lost" {
			return &azservicebus.Error{Code: azservicebus.CodeLockLost}
		}
		return nil
	}
	done := workertest.SettledN(r, 2)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: 1})
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "both settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.Settlements("next"); len(got) != 1 || got[0].Kind != "complete" {
		t.Errorf("the loop did not go on after a lost lock: next settled %+v", got)
	}
	s := w.Stats()
	if s.LockLost != 1 || s.SettleFailed != 1 || s.Outcomes[idempotent.Created] != 2 {
		t.Errorf("stats = %+v, want 1 lock lost, 1 settle failed, 2 created", s)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	r := workertest.NewReceiver("slow")
	entered := make(chan struct{})
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		close(entered)
		<-release
		if ctx.Err() != nil {
			return idempotent.Result{Outcome: idempotent.Transient, Err: ctx.Err()}
		}
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{ShutdownGrace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	workertest.Wait(t, entered, "the handler to start")
	cancel()
	select {
	case err := <-errc:
		t.Fatalf("Run returned (%v) while a handler was still running", err)
	default:
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := r.Settlements("slow"); len(got) != 1 || got[0].Kind != "complete" {
		t.Errorf("in-flight message settled %+v, want one complete", got)
	}
}

func TestShutdownGraceCancelsStuckHandlers(t *testing.T) {
	r := workertest.NewReceiver("stuck")
	entered := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		close(entered)
		<-ctx.Done() // a store call that only ends with its context
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: ctx.Err()}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{ShutdownGrace: 50 * time.Millisecond})
	stop := workertest.Start(t, w)
	workertest.Wait(t, entered, "the handler to start")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.Settlements("stuck"); len(got) != 1 || got[0].Kind != "abandon" {
		t.Errorf("stuck message settled %+v, want one abandon so it is redelivered at once", got)
	}
}

func TestConcurrencyBound(t *testing.T) {
	const limit, total = 3, 30
	ids := make([]string, total)
	for i := range ids {
		ids[i] = fmt.Sprint("m", i)
	}
	r := workertest.NewReceiver(ids...)
	done := workertest.SettledN(r, total)
	var running, peak atomic.Int64
	gate := make(chan struct{})
	var once sync.Once
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == limit {
			once.Do(func() { close(gate) })
		}
		<-gate // hold every handler until the bound has been reached once
		running.Add(-1)
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: limit})
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "all settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != limit {
		t.Errorf("peak concurrency = %d, want %d", p, limit)
	}
	if n := r.MaxAsked(); n > limit {
		t.Errorf("asked the broker for %d messages at once, more than the %d free handlers", n, limit)
	}
}

func TestLockRenewedWhileHandling(t *testing.T) {
	r := workertest.NewReceiver("long")
	renewed := make(chan struct{})
	var once sync.Once
	r.RenewErr = func(*azservicebus.ReceivedMessage) error { once.Do(func() { close(renewed) }); return nil }
	done := workertest.SettledN(r, 1)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		<-renewed // outlive half the lock duration
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{LockDuration: 2 * time.Second, MessageTimeout: 1900 * time.Millisecond})
	stop := workertest.Start(t, w)
	workertest.Wait(t, done, "settlement")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.Settlements("long"); len(got) != 1 || got[0].Kind != "complete" {
		t.Errorf("settled %+v, want one complete", got)
	}
}

func TestLockLostDuringRenewalCancelsHandlerWithoutSettling(t *testing.T) {
	r := workertest.NewReceiver("gone")
	r.RenewErr = func(*azservicebus.ReceivedMessage) error { return &azservicebus.Error{Code: azservicebus.CodeLockLost} }
	reported := make(chan worker.Report, 1)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		<-ctx.Done()
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Err: ctx.Err()}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{LockDuration: 2 * time.Second, MessageTimeout: 1900 * time.Millisecond,
		Observe: func(rep worker.Report) { reported <- rep }})
	stop := workertest.Start(t, w)
	rep := <-reported
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.LockLost {
		t.Errorf("report = %+v, want LockLost", rep)
	}
	if got := r.Settlements("gone"); len(got) != 0 {
		t.Errorf("settled %+v after the lock was lost, want no settlement", got)
	}
	if s := w.Stats(); s.LockLost != 1 {
		t.Errorf("stats = %+v, want 1 lock lost", s)
	}
}

func TestReceiveErrors(t *testing.T) {
	t.Run("fatal error stops the worker", func(t *testing.T) {
		r := workertest.NewReceiver()
		r.FailReceives(&azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess})
		w := workertest.NewWorker(t, r, worker.HandlerFunc(nil), worker.Options{})
		err := w.Run(context.Background())
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("Run = %v, want the unauthorized error", err)
		}
	})
	t.Run("other errors are retried", func(t *testing.T) {
		r := workertest.NewReceiver("after")
		r.FailReceives(&azservicebus.Error{Code: azservicebus.CodeConnectionLost})
		done := workertest.SettledN(r, 1)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		w := workertest.NewWorker(t, r, h, worker.Options{})
		stop := workertest.Start(t, w)
		workertest.Wait(t, done, "the message after the error")
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []worker.Options{
		{Concurrency: -1},
		{LockDuration: time.Millisecond},
		{LockDuration: 10 * time.Second, MessageTimeout: 10 * time.Second},
	} {
		if _, err := worker.New(workertest.NewReceiver(), worker.HandlerFunc(nil), nil, o); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", o)
		}
	}
}

// TestShutdownNeverReceives: once Run's context ends the worker asks for no
// more messages, so messages that arrive afterwards are neither locked nor
// abandoned by it (an abandon would count a delivery no handler made); with
// the SDK its releaser gives back what arrives on leftover credit.
func TestShutdownNeverReceives(t *testing.T) {
	r := workertest.NewReceiver("first")
	entered := make(chan struct{})
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		if m.ID != "first" {
			t.Errorf("handled %s after shutdown began", m.ID)
		}
		close(entered)
		<-release
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	// No drain: the receive in progress ends with ctx.
	w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: 2, ReceiveDrain: -1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	workertest.Wait(t, entered, "the handler to start")
	cancel()
	r.Add("late-1")
	r.Add("late-2")
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"late-1", "late-2"} {
		if got := r.Settlements(id); len(got) != 0 {
			t.Errorf("%s settled %+v at shutdown, want no settlement", id, got)
		}
	}
	if n := r.Pending(); n != 2 {
		t.Errorf("%d messages left in the queue, want the 2 that arrived after shutdown began", n)
	}
	if n := r.CallsDone(); n != 0 {
		t.Errorf("ReceiveMessages called %d times with a done context: each call issues link credit", n)
	}
}

// TestShutdownDrainsTheReceiveInProgress: what the receive in progress at
// shutdown brings within ReceiveDrain (messages the broker sent on credit
// issued before shutdown) is handled and completed, not abandoned; no new
// receive is started.
func TestShutdownDrainsTheReceiveInProgress(t *testing.T) {
	r := workertest.NewReceiver("first")
	entered := make(chan string, 2)
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		entered <- m.ID
		<-release
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := workertest.NewWorker(t, r, h, worker.Options{Concurrency: 2, ReceiveDrain: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	if id := <-entered; id != "first" {
		t.Fatalf("first handled %s", id)
	}
	// Cancel only once the second receive is in progress: cancelled
	// before the loop called it, no receive would be started at all.
	for r.ReceiveCalls() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	r.Add("in-flight") // sent by the broker on the credit of the receive in progress
	if id := <-entered; id != "in-flight" {
		t.Fatalf("then handled %s", id)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "in-flight"} {
		if got := r.Settlements(id); len(got) != 1 || got[0].Kind != "complete" {
			t.Errorf("%s settled %+v, want one complete", id, got)
		}
	}
	if n := r.CallsDone(); n != 0 {
		t.Errorf("ReceiveMessages called %d times with a done context", n)
	}
}

// unwrapping wraps a Receiver and says so, as a decorator does.
type unwrapping struct{ worker.Receiver }

func (u unwrapping) Unwrap() worker.Receiver { return u.Receiver }

// opaque wraps a Receiver without saying so.
type opaque struct{ worker.Receiver }

// TestReceiveDrainDefaultSeesThroughWrappers: the drain window's default
// follows the SDK's receiver through decorators that unwrap (the
// telemetry's), so wrapping the receiver changes no shutdown behaviour.
func TestReceiveDrainDefaultSeesThroughWrappers(t *testing.T) {
	sdk := &azservicebus.Receiver{}
	for _, tt := range []struct {
		name string
		r    worker.Receiver
		want bool
	}{
		{"the SDK's receiver", sdk, true},
		{"wrapped twice, unwrapping", unwrapping{unwrapping{sdk}}, true},
		{"wrapped without Unwrap", opaque{sdk}, false},
		{"a fake", workertest.NewReceiver(), false},
		{"a wrapped fake", unwrapping{workertest.NewReceiver()}, false},
	} {
		if got := worker.HasLinkCredit(tt.r); got != tt.want {
			t.Errorf("%s: HasLinkCredit = %v, want %v", tt.name, got, tt.want)
		}
	}
}
