package otelworker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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

var errStoreDown = errors.New("503 service unavailable")

// probeFailsOnce returns a probe that fails its first call and succeeds
// after: the breaker, asked to open, opens, and its next probe closes it.
func probeFailsOnce() func(context.Context) error {
	var calls atomic.Int64
	return func(context.Context) error {
		if calls.Add(1) == 1 {
			return errStoreDown
		}
		return nil
	}
}
