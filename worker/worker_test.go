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
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// start runs w until the returned stop function cancels it; stop waits for
// Run to return and hands back its error.
func start(t *testing.T, w *worker.Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of cancellation")
			return nil
		}
	}
}

func newWorker(t *testing.T, r worker.Receiver, h worker.Handler, o worker.Options) *worker.Worker {
	t.Helper()
	if o.RetryBackoff == 0 {
		o.RetryBackoff = -1
	}
	if o.ReceiveDrain == 0 {
		o.ReceiveDrain = -1 // the fake's idle receive would wait out the window at every stop
	}
	w, err := worker.New(r, h, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// settledN makes r signal the returned channel after n settlement calls.
func settledN(r *fakeReceiver, n int) <-chan struct{} {
	var count atomic.Int64
	done := make(chan struct{})
	r.onSettle = func() {
		if count.Add(1) == int64(n) {
			close(done)
		}
	}
	return done
}

func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestSettlementFollowsOutcome(t *testing.T) {
	tests := []struct {
		outcome idempotent.Outcome
		want    settlement
	}{
		{idempotent.Created, settlement{kind: "complete"}},
		{idempotent.Duplicate, settlement{kind: "complete"}},
		{idempotent.Mismatch, settlement{kind: "deadletter", reason: order.ReasonOrderIDReused, desc: "hashes differ"}},
		{idempotent.Invalid, settlement{kind: "deadletter", reason: idempotent.ReasonInvalidMessage, desc: "totalMinor: wrong"}},
		{idempotent.Transient, settlement{kind: "abandon"}},
		{idempotent.Applied, settlement{kind: "complete"}},
		{idempotent.Stale, settlement{kind: "complete"}},
		{idempotent.Ignored, settlement{kind: "complete"}},
		// An outcome the worker does not know: retried, never lost.
		{idempotent.Outcome(42), settlement{kind: "abandon"}},
	}
	for _, tt := range tests {
		t.Run(tt.outcome.String(), func(t *testing.T) {
			r := newFakeReceiver("m1")
			done := settledN(r, 1)
			h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
				return idempotent.Result{Outcome: tt.outcome, Key: m.ID, Reason: tt.want.reason, Description: tt.want.desc}
			})
			var reports []worker.Report
			var mu sync.Mutex
			w := newWorker(t, r, h, worker.Options{Observe: func(rep worker.Report) { mu.Lock(); reports = append(reports, rep); mu.Unlock() }})
			stop := start(t, w)
			wait(t, done, "settlement")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := r.settlements("m1")
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
	r := newFakeReceiver("lost", "next")
	r.completeErr = func(m *azservicebus.ReceivedMessage) error {
		if m.MessageID == "lost" {
			return &azservicebus.Error{Code: azservicebus.CodeLockLost}
		}
		return nil
	}
	done := settledN(r, 2)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := newWorker(t, r, h, worker.Options{Concurrency: 1})
	stop := start(t, w)
	wait(t, done, "both settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.settlements("next"); len(got) != 1 || got[0].kind != "complete" {
		t.Errorf("the loop did not go on after a lost lock: next settled %+v", got)
	}
	s := w.Stats()
	if s.LockLost != 1 || s.SettleFailed != 1 || s.Outcomes[idempotent.Created] != 2 {
		t.Errorf("stats = %+v, want 1 lock lost, 1 settle failed, 2 created", s)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	r := newFakeReceiver("slow")
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
	w := newWorker(t, r, h, worker.Options{ShutdownGrace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	wait(t, entered, "the handler to start")
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
	if got := r.settlements("slow"); len(got) != 1 || got[0].kind != "complete" {
		t.Errorf("in-flight message settled %+v, want one complete", got)
	}
}

func TestShutdownGraceCancelsStuckHandlers(t *testing.T) {
	r := newFakeReceiver("stuck")
	entered := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		close(entered)
		<-ctx.Done() // a store call that only ends with its context
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Reason: idempotent.ReasonStoreUnavailable, Err: ctx.Err()}
	})
	w := newWorker(t, r, h, worker.Options{ShutdownGrace: 50 * time.Millisecond})
	stop := start(t, w)
	wait(t, entered, "the handler to start")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.settlements("stuck"); len(got) != 1 || got[0].kind != "abandon" {
		t.Errorf("stuck message settled %+v, want one abandon so it is redelivered at once", got)
	}
}

func TestConcurrencyBound(t *testing.T) {
	const limit, total = 3, 30
	ids := make([]string, total)
	for i := range ids {
		ids[i] = fmt.Sprint("m", i)
	}
	r := newFakeReceiver(ids...)
	done := settledN(r, total)
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
	w := newWorker(t, r, h, worker.Options{Concurrency: limit})
	stop := start(t, w)
	wait(t, done, "all settlements")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != limit {
		t.Errorf("peak concurrency = %d, want %d", p, limit)
	}
	if r.maxAsked > limit {
		t.Errorf("asked the broker for %d messages at once, more than the %d free handlers", r.maxAsked, limit)
	}
}

func TestLockRenewedWhileHandling(t *testing.T) {
	r := newFakeReceiver("long")
	renewed := make(chan struct{})
	var once sync.Once
	r.renewErr = func(*azservicebus.ReceivedMessage) error { once.Do(func() { close(renewed) }); return nil }
	done := settledN(r, 1)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		<-renewed // outlive half the lock duration
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := newWorker(t, r, h, worker.Options{LockDuration: 2 * time.Second, MessageTimeout: 1900 * time.Millisecond})
	stop := start(t, w)
	wait(t, done, "settlement")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := r.settlements("long"); len(got) != 1 || got[0].kind != "complete" {
		t.Errorf("settled %+v, want one complete", got)
	}
}

func TestLockLostDuringRenewalCancelsHandlerWithoutSettling(t *testing.T) {
	r := newFakeReceiver("gone")
	r.renewErr = func(*azservicebus.ReceivedMessage) error { return &azservicebus.Error{Code: azservicebus.CodeLockLost} }
	reported := make(chan worker.Report, 1)
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		<-ctx.Done()
		return idempotent.Result{Outcome: idempotent.Transient, Key: m.ID, Err: ctx.Err()}
	})
	w := newWorker(t, r, h, worker.Options{LockDuration: 2 * time.Second, MessageTimeout: 1900 * time.Millisecond,
		Observe: func(rep worker.Report) { reported <- rep }})
	stop := start(t, w)
	rep := <-reported
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.LockLost {
		t.Errorf("report = %+v, want LockLost", rep)
	}
	if got := r.settlements("gone"); len(got) != 0 {
		t.Errorf("settled %+v after the lock was lost, want no settlement", got)
	}
	if s := w.Stats(); s.LockLost != 1 {
		t.Errorf("stats = %+v, want 1 lock lost", s)
	}
}

func TestReceiveErrors(t *testing.T) {
	t.Run("fatal error stops the worker", func(t *testing.T) {
		r := newFakeReceiver()
		r.receiveErrs = []error{&azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}}
		w := newWorker(t, r, worker.HandlerFunc(nil), worker.Options{})
		err := w.Run(context.Background())
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
			t.Fatalf("Run = %v, want the unauthorized error", err)
		}
	})
	t.Run("other errors are retried", func(t *testing.T) {
		r := newFakeReceiver("after")
		r.receiveErrs = []error{&azservicebus.Error{Code: azservicebus.CodeConnectionLost}}
		done := settledN(r, 1)
		h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
		})
		w := newWorker(t, r, h, worker.Options{})
		stop := start(t, w)
		wait(t, done, "the message after the error")
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
		if _, err := worker.New(newFakeReceiver(), worker.HandlerFunc(nil), nil, o); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", o)
		}
	}
}

// TestShutdownNeverReceives: once Run's context ends the worker asks for no
// more messages, so messages that arrive afterwards are neither locked nor
// abandoned by it (an abandon would count a delivery no handler made); with
// the SDK its releaser gives back what arrives on leftover credit.
func TestShutdownNeverReceives(t *testing.T) {
	r := newFakeReceiver("first")
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
	w := newWorker(t, r, h, worker.Options{Concurrency: 2, ReceiveDrain: -1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	wait(t, entered, "the handler to start")
	cancel()
	r.add("late-1")
	r.add("late-2")
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"late-1", "late-2"} {
		if got := r.settlements(id); len(got) != 0 {
			t.Errorf("%s settled %+v at shutdown, want no settlement", id, got)
		}
	}
	if n := len(r.msgs); n != 2 {
		t.Errorf("%d messages left in the queue, want the 2 that arrived after shutdown began", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.callsDone != 0 {
		t.Errorf("ReceiveMessages called %d times with a done context: each call issues link credit", r.callsDone)
	}
}

// TestShutdownDrainsTheReceiveInProgress: what the receive in progress at
// shutdown brings within ReceiveDrain (messages the broker sent on credit
// issued before shutdown) is handled and completed, not abandoned; no new
// receive is started.
func TestShutdownDrainsTheReceiveInProgress(t *testing.T) {
	r := newFakeReceiver("first")
	entered := make(chan string, 2)
	release := make(chan struct{})
	h := worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		entered <- m.ID
		<-release
		return idempotent.Result{Outcome: idempotent.Created, Key: m.ID}
	})
	w := newWorker(t, r, h, worker.Options{Concurrency: 2, ReceiveDrain: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	if id := <-entered; id != "first" {
		t.Fatalf("first handled %s", id)
	}
	// Cancel only once the second receive is in progress: cancelled
	// before the loop called it, no receive would be started at all.
	for r.receiveCalls() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	r.add("in-flight") // sent by the broker on the credit of the receive in progress
	if id := <-entered; id != "in-flight" {
		t.Fatalf("then handled %s", id)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "in-flight"} {
		if got := r.settlements(id); len(got) != 1 || got[0].kind != "complete" {
			t.Errorf("%s settled %+v, want one complete", id, got)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.callsDone != 0 {
		t.Errorf("ReceiveMessages called %d times with a done context", r.callsDone)
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
		{"a fake", newFakeReceiver(), false},
		{"a wrapped fake", unwrapping{newFakeReceiver()}, false},
	} {
		if got := worker.HasLinkCredit(tt.r); got != tt.want {
			t.Errorf("%s: HasLinkCredit = %v, want %v", tt.name, got, tt.want)
		}
	}
}
