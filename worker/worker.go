package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// Handler decides what to do with one delivery. *order.Processor implements
// it. Process must be safe for concurrent use and idempotent: it is called
// again for every redelivery of a message.
type Handler interface {
	Process(ctx context.Context, m order.Message) order.Result
}

var _ Handler = (*order.Processor)(nil)

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, m order.Message) order.Result

// Process calls f(ctx, m).
func (f HandlerFunc) Process(ctx context.Context, m order.Message) order.Result { return f(ctx, m) }

// Options configure a Worker. The zero value of each field selects its default.
type Options struct {
	// Concurrency bounds the handlers running at once. Default 8.
	Concurrency int
	// LockDuration is the queue's lock duration. The lock of a message being
	// handled is renewed every LockDuration/2. Default 60s, the Service Bus
	// default.
	LockDuration time.Duration
	// MessageTimeout is the deadline of one handler call. It must be below
	// LockDuration. Default 80% of LockDuration.
	MessageTimeout time.Duration
	// SettleTimeout bounds one settlement call (the SDK retries a settlement
	// by itself within it). Default 20s.
	SettleTimeout time.Duration
	// RetryBackoff is how long a handler waits, holding the lock, before it
	// abandons a message after a transient failure; it doubles with each
	// delivery and never exceeds LockDuration/4. It keeps a throttled store
	// from being hammered by instant redeliveries. Zero selects 500ms; a
	// negative value disables the wait.
	RetryBackoff time.Duration
	// ShutdownGrace is how long in-flight handlers may run after Run's
	// context is cancelled. Default 30s.
	ShutdownGrace time.Duration
	// ReturnPrefetchedFor, if positive, makes Run receive once more for this
	// long after its handlers have drained, and abandon whatever arrives.
	// The SDK cannot drain link credit: messages the broker sends on credit
	// left by the cancelled receive would otherwise stay locked after the
	// receiver closes, until their locks lapse. Abandoning them gives them
	// back at once. Zero disables it (for receivers without link credit).
	ReturnPrefetchedFor time.Duration
	// SummaryInterval is how often Run logs a summary of outcomes. Default
	// 30s; negative disables the periodic summary (the final one is always
	// logged).
	SummaryInterval time.Duration
	// RequestCharge, if set, reports the store's cumulative request charge
	// (Cosmos DB request units) for the summaries.
	RequestCharge func() float64
	// Observe, if set, is called once for every delivery after its
	// settlement attempt. It is called from handler goroutines concurrently.
	Observe func(Report)
}

// Report describes the handling of one delivery, for Options.Observe.
type Report struct {
	MessageID     string
	DeliveryCount uint32
	Result        order.Result
	LockLost      bool  // the lock was lost while handling: no settlement was attempted
	SettleErr     error // the settlement error, if settlement failed
	Duration      time.Duration
}

// Stats counts what a Worker has done. Retried counts transient outcomes
// (abandoned); LockLost counts deliveries whose lock was lost during handling
// or settlement; SettleFailed counts settlements that failed for any reason.
type Stats struct {
	Received, Created, Duplicate, Mismatch, Invalid, Retried, LockLost, SettleFailed int64
	Applied, Stale                                                                   int64 // status changes
}

// Worker is a PeekLock consumer. Create it with New; a Worker runs once.
type Worker struct {
	r    Receiver
	h    Handler
	log  *slog.Logger
	opts Options

	received, created, duplicate, mismatch, invalid, retried, lockLost, settleFailed atomic.Int64
	applied, stale                                                                   atomic.Int64
}

// New returns a Worker that receives from r and hands every message to h.
func New(r Receiver, h Handler, logger *slog.Logger, o Options) (*Worker, error) {
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.LockDuration == 0 {
		o.LockDuration = 60 * time.Second
	}
	if o.MessageTimeout == 0 {
		o.MessageTimeout = o.LockDuration * 8 / 10
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 20 * time.Second
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 500 * time.Millisecond
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.SummaryInterval == 0 {
		o.SummaryInterval = 30 * time.Second
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > 5000:
		return nil, fmt.Errorf("worker: concurrency %d is not between 1 and 5000", o.Concurrency)
	case o.LockDuration < time.Second:
		return nil, fmt.Errorf("worker: lock duration %v is below 1s", o.LockDuration)
	case o.MessageTimeout <= 0 || o.MessageTimeout >= o.LockDuration:
		return nil, fmt.Errorf("worker: message timeout %v must be positive and below the lock duration %v", o.MessageTimeout, o.LockDuration)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{r: r, h: h, log: logger, opts: o}, nil
}

// Stats returns the counts so far. It is safe to call while Run runs.
func (w *Worker) Stats() Stats {
	return Stats{
		Received: w.received.Load(), Created: w.created.Load(), Duplicate: w.duplicate.Load(),
		Mismatch: w.mismatch.Load(), Invalid: w.invalid.Load(), Retried: w.retried.Load(),
		LockLost: w.lockLost.Load(), SettleFailed: w.settleFailed.Load(),
		Applied: w.applied.Load(), Stale: w.stale.Load(),
	}
}

// Run receives and handles messages until ctx is cancelled, then shuts down
// gracefully (see the package comment) and returns nil. It returns an error
// only when receiving fails in a way that retrying cannot fix, such as a
// missing queue or missing rights.
func (w *Worker) Run(ctx context.Context) error {
	// Handlers outlive ctx by up to ShutdownGrace: they get a context that
	// is cancelled only when the grace period ends.
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()

	stopSummary := w.startSummary()
	slots := make(chan struct{}, w.opts.Concurrency)
	var inflight sync.WaitGroup
	err := w.receiveLoop(ctx, handlerCtx, slots, &inflight)

	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.opts.ShutdownGrace):
		w.log.Warn("shutdown grace period over: cancelling in-flight handlers", "grace", w.opts.ShutdownGrace.String())
		cancelHandlers()
		<-done
	}
	if w.opts.ReturnPrefetchedFor > 0 {
		w.returnPrefetched(handlerCtx)
	}
	stopSummary()
	return err
}

// returnPrefetched takes what the broker sent on the credit left by the last
// receive and abandons it, so that nothing stays locked after shutdown.
// Asking for Concurrency messages issues no credit beyond what the last
// receive already did; when the queue is busy it uses it up, and when the
// queue is idle nothing is left to arrive.
func (w *Worker) returnPrefetched(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, w.opts.ReturnPrefetchedFor)
	msgs, _ := w.r.ReceiveMessages(rctx, w.opts.Concurrency, nil)
	cancel()
	for _, m := range msgs {
		sctx, cancel := context.WithTimeout(ctx, w.opts.SettleTimeout)
		err := w.r.AbandonMessage(sctx, m, nil)
		cancel()
		w.log.Info("returned a prefetched message at shutdown", "message_id", m.MessageID, "delivery_count", m.DeliveryCount, "error", err)
	}
}

// receiveLoop receives while ctx lives. It takes a free handler slot before
// it asks for messages, so it never holds a message (and lets its lock tick)
// that no handler can start on.
func (w *Worker) receiveLoop(ctx, handlerCtx context.Context, slots chan struct{}, inflight *sync.WaitGroup) error {
	backoff := time.Duration(0)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
		for n < cap(slots) && tryAcquire(slots) {
			n++
		}
		msgs, err := w.r.ReceiveMessages(ctx, n, nil)
		for i := len(msgs); i < n; i++ {
			<-slots
		}
		for _, m := range msgs {
			w.received.Add(1)
			inflight.Add(1)
			go func() {
				defer func() { <-slots; inflight.Done() }()
				w.handle(handlerCtx, m)
			}()
		}
		if err == nil {
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if fatalReceiveError(err) {
			return fmt.Errorf("worker: receive: %w", err)
		}
		backoff = min(max(2*backoff, time.Second), 30*time.Second)
		w.log.Warn("receive failed; retrying", "error", err, "backoff", backoff.String())
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
	}
}

func tryAcquire(slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// fatalReceiveError reports errors that no retry can fix.
func fatalReceiveError(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && (sbErr.Code == azservicebus.CodeUnauthorizedAccess || sbErr.Code == azservicebus.CodeNotFound)
}

// handle processes one delivery under its own deadline, renews its lock while
// the handler runs, and settles the result.
func (w *Worker) handle(ctx context.Context, m *azservicebus.ReceivedMessage) {
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, w.opts.MessageTimeout)
	var lost atomic.Bool
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		if w.renewLock(mctx, m) {
			lost.Store(true)
			cancel()
		}
	}()

	om := order.Message{ID: m.MessageID, Subject: deref(m.Subject), Body: m.Body, DeliveryCount: m.DeliveryCount}
	if m.SequenceNumber != nil {
		om.SequenceNumber = *m.SequenceNumber
	}
	res := w.h.Process(mctx, om)
	if res.Outcome == order.Transient && !lost.Load() {
		w.backoff(mctx, m.DeliveryCount)
	}
	cancel()
	<-renewDone

	rep := Report{MessageID: m.MessageID, DeliveryCount: m.DeliveryCount, Result: res, LockLost: lost.Load()}
	if !rep.LockLost {
		sctx, cancelSettle := context.WithTimeout(context.WithoutCancel(ctx), w.opts.SettleTimeout)
		rep.SettleErr = w.settle(sctx, m, res)
		cancelSettle()
	}
	rep.Duration = time.Since(start)
	w.record(m, rep)
	if w.opts.Observe != nil {
		w.opts.Observe(rep)
	}
}

// settle is the one place where an outcome becomes a settlement.
func (w *Worker) settle(ctx context.Context, m *azservicebus.ReceivedMessage, res order.Result) error {
	switch res.Outcome {
	case order.Created, order.Duplicate, order.Applied, order.Stale, order.Ignored:
		return w.r.CompleteMessage(ctx, m, nil)
	case order.Mismatch, order.Invalid:
		reason, desc := res.Reason, truncate(res.Description, 1024)
		return w.r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
	default: // order.Transient, and any outcome this worker does not know
		return w.r.AbandonMessage(ctx, m, nil)
	}
}

// renewLock renews m's lock every LockDuration/2 until ctx ends. It reports
// whether the lock was lost.
func (w *Worker) renewLock(ctx context.Context, m *azservicebus.ReceivedMessage) bool {
	t := time.NewTicker(w.opts.LockDuration / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		err := w.r.RenewMessageLock(ctx, m, nil)
		switch {
		case err == nil:
		case isLockLost(err):
			return true
		case ctx.Err() != nil:
			return false
		default:
			w.log.Warn("lock renewal failed; will try again", "message_id", m.MessageID, "error", err)
		}
	}
}

// backoff waits before a transient failure is abandoned: RetryBackoff
// doubled per earlier delivery, at most LockDuration/4.
func (w *Worker) backoff(ctx context.Context, deliveryCount uint32) {
	if w.opts.RetryBackoff < 0 {
		return
	}
	d := w.opts.RetryBackoff << min(max(int(deliveryCount)-1, 0), 16)
	d = min(d, w.opts.LockDuration/4)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func isLockLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost
}

// record counts and logs one delivery with the project's stable keys.
func (w *Worker) record(m *azservicebus.ReceivedMessage, rep Report) {
	res := rep.Result
	attrs := []any{
		"order_id", res.OrderID, "message_id", m.MessageID, "delivery_count", m.DeliveryCount,
		"outcome", res.Outcome.String(), "duration_ms", rep.Duration.Milliseconds(),
	}
	if res.Reason != "" {
		attrs = append(attrs, "reason", res.Reason)
	}
	if res.Description != "" {
		attrs = append(attrs, "description", res.Description)
	}
	switch res.Outcome {
	case order.Created:
		w.created.Add(1)
		w.log.Info("order created", attrs...)
	case order.Duplicate:
		w.duplicate.Add(1)
		w.log.Info("duplicate completed", attrs...)
	case order.Applied:
		w.applied.Add(1)
		w.log.Info("status change applied", attrs...)
	case order.Stale:
		w.stale.Add(1)
		w.log.Info("stale status change completed as a no-op", attrs...)
	case order.Mismatch:
		w.mismatch.Add(1)
		w.log.Error("order id reused for other content: dead-lettered", attrs...)
	case order.Invalid:
		w.invalid.Add(1)
		w.log.Warn("invalid message dead-lettered", attrs...)
	default:
		w.retried.Add(1)
		w.log.Warn("transient failure: abandoned for redelivery", append(attrs, "error", res.Err)...)
	}
	switch {
	case rep.LockLost:
		w.lockLost.Add(1)
		w.log.Warn("lock lost while handling: not settled; the redelivery will be a duplicate", attrs...)
	case rep.SettleErr != nil:
		w.settleFailed.Add(1)
		if isLockLost(rep.SettleErr) {
			w.lockLost.Add(1)
		}
		w.log.Warn("settlement failed; the message will be redelivered and must then be a duplicate", append(attrs, "error", rep.SettleErr)...)
	}
}

// startSummary logs a summary every SummaryInterval; the returned function
// stops it and logs the final summary.
func (w *Worker) startSummary() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	if w.opts.SummaryInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(w.opts.SummaryInterval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					w.logSummary("summary")
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		w.logSummary("final summary")
	}
}

func (w *Worker) logSummary(msg string) {
	s := w.Stats()
	attrs := []any{
		"received", s.Received, "created", s.Created, "duplicate", s.Duplicate, "mismatch", s.Mismatch,
		"invalid", s.Invalid, "retried", s.Retried, "lock_lost", s.LockLost, "settle_failed", s.SettleFailed,
		"applied", s.Applied, "stale", s.Stale,
	}
	if w.opts.RequestCharge != nil {
		attrs = append(attrs, "request_units", w.opts.RequestCharge())
	}
	w.log.Info(msg, attrs...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// truncate shortens s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
