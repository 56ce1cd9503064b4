package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/health"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
)

// The worker's health, served on WORKER_HEALTH_ADDR:
//
//   - /startupz passes once the start-up checks passed: the store check
//     (checkStore) and a peek on the queue, which proves the receiver can
//     connect and is allowed to read.
//   - /readyz passes after that while the worker is not draining (it fails
//     from the first signal on, before the drain begins), its circuit
//     breaker is closed (it opens when the store or the payments service
//     fails deliveries, and closes when their probe answers again), and its
//     receiver is connected (no receive failed since the last successful
//     peek: after a failed receive, the check peeks the queue itself).
//   - /livez fails when a handler call has outlived its message deadline by
//     wedgeMargin: the handler ignores its context, its slot is lost, and a
//     restart is the cure.

// wedgeMargin is how long past its message deadline a handler call may run
// before /livez reports the worker wedged.
const wedgeMargin = time.Minute

// healthShutdownTimeout bounds the health listener's shutdown.
const healthShutdownTimeout = 5 * time.Second

// workerHealth is the worker's health state and, when an address is
// configured, its listener. Safe for concurrent use.
type workerHealth struct {
	status   *health.Status
	srv      *health.Server // nil without WORKER_HEALTH_ADDR
	handlers *handlerTracker
	log      *slog.Logger
}

// startHealth creates the health state and, if cfg.HealthAddr is set,
// starts its listener, serving metrics on /metrics when it is not nil.
func startHealth(cfg config, metrics http.Handler, logger *slog.Logger) (*workerHealth, error) {
	h := &workerHealth{status: health.NewStatus(), handlers: newHandlerTracker(cfg.messageTimeout()+wedgeMargin, time.Now), log: logger}
	h.status.AddLive("handlers", h.handlers.check)
	if cfg.HealthAddr == "" {
		return h, nil
	}
	srv, err := health.Listen(cfg.HealthAddr, h.status.Handler(metrics), logger)
	if err != nil {
		return nil, fmt.Errorf("WORKER_HEALTH_ADDR (-health-addr): %w", err)
	}
	h.srv = srv
	logger.Info("health probes listening", "addr", srv.Addr().String(), "paths", "/livez /readyz /startupz", "metrics", metrics != nil)
	return h, nil
}

// stop shuts the listener down within healthShutdownTimeout; after a second
// signal it returns at once (the process exits).
func (h *workerHealth) stop(runCtx context.Context) {
	if h.srv == nil || cli.Force(runCtx).Err() != nil {
		return
	}
	if err := h.srv.Shutdown(healthShutdownTimeout); err != nil {
		h.log.Warn("health listener shutdown", "error", err)
	}
}

// drainFirst returns the context to run the worker with: it ends when ctx
// ends, but only after /readyz has turned not ready, so that the platform
// sees the replica leave before its drain starts. It carries ctx's values
// (the second shutdown stage, cli.Force).
func (h *workerHealth) drainFirst(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		h.status.Draining(context.Cause(ctx).Error())
		cancel(context.Cause(ctx))
	})
	return wctx, func() { stop(); cancel(context.Canceled) }
}

// started records that the start-up checks passed.
func (h *workerHealth) started() { h.status.Started() }

// watch adds the readiness checks of w: its breaker b, and its receiver,
// probed with peek after a receive failed.
func (h *workerHealth) watch(w *worker.Worker, b *breaker.Breaker, peek func(context.Context) error) {
	h.status.AddReady("breaker", func(context.Context) error {
		if state := b.State(); state != breaker.Closed {
			return errors.New("circuit breaker " + state.String() + ": the store or the payments service fails; receiving paused until their probe answers, or a trial delivery succeeds for an outage the probe cannot see")
		}
		return nil
	})
	rc := &receiverCheck{failed: func() int64 { return w.Stats().ReceiveFailed }, peek: peek, sem: make(chan struct{}, 1)}
	h.status.AddReady("receiver", rc.check)
}

// receiverCheck reports the receiver connected unless a receive failed
// since the last successful peek; then it peeks (one at a time) to learn
// whether the link works again.
type receiverCheck struct {
	failed func() int64 // the worker's count of failed receives
	peek   func(context.Context) error
	seen   atomic.Int64 // failed receives already answered by a good peek
	sem    chan struct{}
}

func (c *receiverCheck) check(ctx context.Context) error {
	n := c.failed()
	if n == c.seen.Load() {
		return nil
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return fmt.Errorf("receive failed; peek: %w", ctx.Err())
	}
	if n == c.seen.Load() {
		return nil
	}
	if err := c.peek(ctx); err != nil {
		return fmt.Errorf("receive failed (%d failed receives); peek: %w", n, err)
	}
	c.seen.Store(n)
	return nil
}

// track wraps h so that the liveness check sees handler calls that run
// far beyond their deadline.
func (h *workerHealth) track(next worker.Handler) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		done := h.handlers.begin()
		defer done()
		return next.Process(ctx, m)
	})
}

// handlerTracker records when each handler call in progress began.
type handlerTracker struct {
	limit time.Duration
	now   func() time.Time
	mu    sync.Mutex
	next  uint64
	calls map[uint64]time.Time
}

func newHandlerTracker(limit time.Duration, now func() time.Time) *handlerTracker {
	return &handlerTracker{limit: limit, now: now, calls: map[uint64]time.Time{}}
}

// begin records a call and returns the function that ends it.
func (t *handlerTracker) begin() func() {
	t.mu.Lock()
	id := t.next
	t.next++
	t.calls[id] = t.now()
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.calls, id)
		t.mu.Unlock()
	}
}

// check fails when a call has run longer than the limit.
func (t *handlerTracker) check(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	stuck := 0
	var oldest time.Duration
	for _, began := range t.calls {
		if age := now.Sub(began); age > t.limit {
			stuck++
			oldest = max(oldest, age)
		}
	}
	if stuck > 0 {
		return fmt.Errorf("%d handler call(s) running for up to %v, beyond the message deadline plus %v: the handler ignores its context and its slot is lost",
			stuck, oldest.Round(time.Second), wedgeMargin)
	}
	return nil
}

// peekTimeout bounds one peek of the queue.
const peekTimeout = 10 * time.Second

// peekQueue peeks one message, from the start of the queue, to prove that
// the receiver connects and may read. It neither locks a message nor moves
// the receiver's own peek position.
func peekQueue(ctx context.Context, r *azservicebus.Receiver) error {
	ctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	from := int64(0)
	_, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
	return err
}
