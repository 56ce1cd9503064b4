package workertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Start runs w until the returned stop function cancels it; stop waits
// for Run to return, at most 30 seconds, and hands back its error.
func Start(t testing.TB, w *worker.Worker) (stop func() error) {
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

// NewWorker returns a worker on r and h with no logger, failing t if o
// is refused. Unless o sets them, it turns off the retry backoff and the
// receive drain: the fake's idle receive would wait out the drain window
// at every stop.
func NewWorker(t testing.TB, r worker.Receiver, h worker.Handler, o worker.Options) *worker.Worker {
	t.Helper()
	if o.RetryBackoff == 0 {
		o.RetryBackoff = -1
	}
	if o.ReceiveDrain == 0 {
		o.ReceiveDrain = -1
	}
	w, err := worker.New(r, h, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// SettledN sets r's OnSettle so that the returned channel closes after n
// settlement calls.
func SettledN(r *Receiver, n int) <-chan struct{} {
	var count atomic.Int64
	done := make(chan struct{})
	r.OnSettle = func() {
		if count.Add(1) == int64(n) {
			close(done)
		}
	}
	return done
}

// Wait waits for c to close, failing t after 30 seconds with what it
// waited for.
func Wait(t testing.TB, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
