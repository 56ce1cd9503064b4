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

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Handler decides what to do with one delivery: an *idempotent.Consumer,
// or a domain's own decision (for example the order example's
// *order.Processor).
// Process must be safe for concurrent use and idempotent: it is called
// again for every redelivery of a message.
type Handler interface {
	Process(ctx context.Context, m idempotent.Message) idempotent.Result
}

var _ Handler = (*idempotent.Consumer[struct{}])(nil)

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, m idempotent.Message) idempotent.Result

// Process calls f(ctx, m).
func (f HandlerFunc) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	return f(ctx, m)
}

// Options configure a Worker. The zero value of each field selects its default.
type Options struct {
	// Concurrency bounds the handlers running at once, and separately the
	// settlements in progress: at most 2*Concurrency messages are received
	// and not yet settled (see the package documentation). Default 8.
	Concurrency int
	// LockDuration is the queue's lock duration. A handler's lock is renewed
	// when half of the time left until the message's LockedUntil has passed,
	// and at least every LockDuration/2; when the lock the broker grants
	// disagrees with it, the worker logs a warning once. Default 60s, the
	// Service Bus default.
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
	// ReceiveDrain is how long, once Run's context has ended, the receive
	// call in progress may go on collecting what the broker sends on the
	// link credit that call issued before shutdown began; what it returns is
	// handled within the grace like any other message. Cancelling that call
	// at once would leave the credit on the link: the broker fills it, and
	// what the SDK's releaser has not given back by the time the receiver
	// closes stays locked until its lock expires, a counted delivery. With
	// a backlog the call returns within milliseconds; only on an idle queue
	// does it wait out the window. Default 1s when the Receiver is an
	// *azservicebus.Receiver, which has link credit, or wraps one and says
	// so with a method Unwrap() Receiver (as otelworker's does); for any
	// other Receiver (a fake, the queue model: set it explicitly when it
	// models credit) the default is no window. Negative cancels the call at
	// once.
	// No new receive is ever started after Run's context has ended.
	ReceiveDrain time.Duration
	// Gate, if set, is asked before every receive and told every result:
	// a circuit breaker that stops receiving while a dependency fails
	// (package worker/breaker). Nil receives whenever a handler slot is
	// free.
	Gate Gate
	// Scheduler, if set, is a sender on the worker's queue: a Transient
	// result with RetryAfter set (a message that can only succeed later)
	// is then retried by a scheduled copy, and the delivery completed,
	// instead of abandoned, so waiting costs the message no deliveries (see
	// the package documentation). Without it such results are abandoned.
	Scheduler Scheduler
	// Retry bounds the scheduled retries of one message.
	Retry RetryOptions
	// SummaryInterval is how often Run logs a summary (see the package
	// documentation for its level). Default 30s; negative disables the
	// periodic summary (the final one is always logged).
	SummaryInterval time.Duration
	// RequestCharge, if set, reports the store's cumulative request charge
	// (Cosmos DB request units) for the summaries.
	RequestCharge func() float64
	// CacheStats, if set, reports the handler's cache counters (for
	// example idempotent.FactCache's Stats) for the summaries, which log
	// its hits, misses and hit rate. It is called from the summary
	// goroutine, concurrently with the handler.
	CacheStats func() idempotent.CacheStats
	// Observe, if set, is called once for every delivery after its
	// settlement attempt. It is called from handler goroutines concurrently.
	Observe func(Report)
	// Hook, if set, sees every delivery begin and end: traces and metrics
	// (package worker/otelworker). Nil costs nothing.
	Hook Hook
	// KeyAttr is the log key of Result.Key in the delivery log: the name
	// of the deployment's entity (for example "invoice_id"), which its log
	// queries read. Default "entity_key".
	KeyAttr string
	// ResumedAttr is the log key set, to true, on the delivery log line of
	// a result with Resumed set. Default "effect_resumed".
	ResumedAttr string
}

// Report describes the handling of one delivery, for Options.Observe and
// Hook.End.
type Report struct {
	MessageID     string
	DeliveryCount uint32
	Result        idempotent.Result
	LockLost      bool  // the lock was lost while handling or waiting to be settled: no settlement was attempted
	CutOff        bool  // the shutdown grace cancelled the handler; the message was abandoned
	SettleErr     error // the settlement error, if settlement failed
	Duration      time.Duration
	// Scheduled reports that a copy of the message was scheduled for a
	// delayed retry, attempt RetryAttempt, enqueued RetryDelay later, and
	// the message completed; ScheduleErr is the scheduling's error, when it
	// failed and the message was abandoned instead.
	Scheduled    bool
	RetryAttempt int
	RetryDelay   time.Duration
	ScheduleErr  error
}

// Worker is a PeekLock consumer. Create it with New; a Worker runs once.
type Worker struct {
	r    Receiver
	h    Handler
	log  *slog.Logger
	opts Options
	gate Gate // nil: always admitted

	outcomes                                outcomeCounts
	received, deadLettered, retried, cutOff atomic.Int64
	lockLost, settleFailed                  atomic.Int64
	renewed, renewFailed, receiveFailed     atomic.Int64
	scheduled, scheduleFailed               atomic.Int64
	inFlight                                atomic.Int64

	lockWarned atomic.Bool // the granted-lock warning was logged
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
	if o.ReceiveDrain == 0 {
		o.ReceiveDrain = -1
		if hasLinkCredit(r) {
			o.ReceiveDrain = time.Second
		}
	}
	if o.KeyAttr == "" {
		o.KeyAttr = "entity_key"
	}
	if o.ResumedAttr == "" {
		o.ResumedAttr = "effect_resumed"
	}
	if o.Retry.MaxAttempts == 0 {
		o.Retry.MaxAttempts = 10
	}
	if o.Retry.MaxDelay == 0 {
		o.Retry.MaxDelay = time.Hour
	}
	switch {
	case o.Concurrency < 1 || o.Concurrency > 5000:
		return nil, fmt.Errorf("worker: concurrency %d is not between 1 and 5000", o.Concurrency)
	case o.LockDuration < time.Second:
		return nil, fmt.Errorf("worker: lock duration %v is below 1s", o.LockDuration)
	case o.MessageTimeout <= 0 || o.MessageTimeout >= o.LockDuration:
		return nil, fmt.Errorf("worker: message timeout %v must be positive and below the lock duration %v", o.MessageTimeout, o.LockDuration)
	case o.Retry.MaxAttempts < 0 || o.Retry.MaxDelay < 0:
		return nil, fmt.Errorf("worker: retry max attempts %d, max delay %v: want non-negative values", o.Retry.MaxAttempts, o.Retry.MaxDelay)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{r: r, h: h, log: logger, opts: o, gate: o.Gate}, nil
}

// hasLinkCredit reports whether r is an *azservicebus.Receiver, or wraps
// one: a Receiver that wraps another says so with a method
// Unwrap() Receiver.
func hasLinkCredit(r Receiver) bool {
	for {
		switch x := r.(type) {
		case *azservicebus.Receiver:
			return true
		case interface{ Unwrap() Receiver }:
			r = x.Unwrap()
		default:
			return false
		}
	}
}

// errGraceOver is the cause of the handlers' context when the shutdown grace
// period ends.
var errGraceOver = errors.New("worker: shutdown grace period over")

// errLockLost is the cause of a handler's context when its lock was lost.
var errLockLost = errors.New("worker: message lock lost")

// pipeline is one Run's state shared by the receive loop and the handlers.
type pipeline struct {
	// handlerCtx is the handlers' context: it outlives Run's context and
	// is cancelled, with cause errGraceOver, when the shutdown grace ends.
	handlerCtx context.Context
	// settleCtx is the parent of every settlement's context: never
	// cancelled, each settlement has its own SettleTimeout.
	settleCtx context.Context
	// slots holds a token for every message between the moment the loop
	// asks for it and the end of its Process phase: at most Concurrency.
	slots chan struct{}
	// settling holds a token for every settlement in progress: at most
	// Concurrency. A handler takes one before it gives up its slot.
	settling chan struct{}
	// inflight counts the deliveries being handled; Run waits for them.
	inflight sync.WaitGroup
	// idle hands a delivery to a handler goroutine that waits for one
	// (unbuffered: a send succeeds only when one waits); closing over
	// tells the waiting ones to end.
	idle chan handoff
	over chan struct{}
}

// handoff is a received message on its way to a handler goroutine.
type handoff struct {
	m   *azservicebus.ReceivedMessage
	adm admitted
}

// admitted is what a delivery keeps of the Admission it was received
// under.
type admitted struct {
	trial bool          // Admission.Trial
	wait  time.Duration // Admission.DependencyWait
}

// Run receives and handles messages until ctx is cancelled, then shuts down
// gracefully (see the package comment) and returns nil. It returns an error
// only when receiving fails in a way that retrying cannot fix, such as a
// missing queue or missing rights.
func (w *Worker) Run(ctx context.Context) error {
	// Handlers outlive ctx by up to ShutdownGrace: they get a context that
	// is cancelled only when the grace period ends.
	handlerCtx, cancelHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHandlers(nil)
	p := &pipeline{
		handlerCtx: handlerCtx,
		settleCtx:  context.WithoutCancel(ctx),
		slots:      make(chan struct{}, w.opts.Concurrency),
		settling:   make(chan struct{}, w.opts.Concurrency),
		idle:       make(chan handoff),
		over:       make(chan struct{}),
	}
	defer close(p.over)

	// Receive calls outlive ctx by up to ReceiveDrain; without a drain
	// they end with ctx itself, at once.
	rx, cancelRx := context.WithCancel(ctx)
	if w.opts.ReceiveDrain >= 0 {
		rx, cancelRx = context.WithCancel(context.WithoutCancel(ctx))
		stopDrain := context.AfterFunc(ctx, func() {
			t := time.AfterFunc(w.opts.ReceiveDrain, cancelRx)
			context.AfterFunc(rx, func() { t.Stop() })
		})
		defer stopDrain()
	}
	defer cancelRx()

	stopSummary := w.startSummary()
	err := w.receiveLoop(ctx, rx, p)
	cancelRx()

	begun := time.Now()
	why := "context cancelled"
	if err != nil {
		why = "receive failed: " + err.Error()
	}
	w.log.Info("shutdown: stopped receiving, draining in-flight handlers",
		"why", why, "in_flight", w.inFlight.Load(), "grace", w.opts.ShutdownGrace.String())
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	grace := time.NewTimer(w.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log.Warn("shutdown grace period over: cancelling in-flight handlers; their messages are abandoned",
			"in_flight", w.inFlight.Load(), "grace", w.opts.ShutdownGrace.String())
		cancelHandlers(errGraceOver)
		<-done
	}
	stopSummary()
	w.log.Info("shutdown complete", "drain_ms", time.Since(begun).Milliseconds(), "cut_off", w.cutOff.Load())
	return err
}

// receiveLoop receives while ctx lives and the Gate admits it. It takes a
// free handler slot before it asks for a message, so every message it
// receives has a handler that starts on it at once (it never holds a
// message, its lock ticking, that no handler can start on), and it asks
// for as many messages as there are free slots. A slot frees as soon as its
// handler's Process phase ends, before the settlement, so the next receive
// overlaps the settlement's round trip. It never calls ReceiveMessages once
// ctx has ended: that call would issue fresh link credit at shutdown.
// Receive calls use rx, which ends ReceiveDrain after ctx.
func (w *Worker) receiveLoop(ctx, rx context.Context, p *pipeline) error {
	backoff := time.Duration(0)
	failures := 0
	var failingSince time.Time
	for {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		rctx, adm, ok := w.admit(ctx, rx)
		// A select with a free slot and a done context may pick either:
		// check ctx before every receive.
		if !ok || ctx.Err() != nil {
			<-p.slots
			if adm.Done != nil {
				adm.Done(0)
			}
			return nil
		}
		most := w.opts.Concurrency
		if adm.Max > 0 {
			most = min(most, adm.Max)
		}
		n := 1
		for n < most && tryAcquire(p.slots) {
			n++
		}
		msgs, err := w.r.ReceiveMessages(rctx, n, nil)
		cancelledByGate := rctx.Err() != nil && ctx.Err() == nil && rx.Err() == nil
		if adm.Done != nil {
			adm.Done(len(msgs))
		}
		for i := len(msgs); i < n; i++ {
			<-p.slots
		}
		for _, m := range msgs {
			w.received.Add(1)
			w.inFlight.Add(1)
			p.inflight.Add(1)
			w.dispatch(p, handoff{m, admitted{adm.Trial, adm.DependencyWait}})
		}
		if err == nil || cancelledByGate {
			if failures > 0 {
				w.log.Info("receiving again", "failed_receives", failures, "failing_for_ms", time.Since(failingSince).Milliseconds())
				failures = 0
			}
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		w.receiveFailed.Add(1)
		if fatalReceiveError(err) {
			w.log.Error("receive failed permanently: stopping", "error", err)
			return fmt.Errorf("worker: receive: %w", err)
		}
		if failures == 0 {
			failingSince = time.Now()
		}
		failures++
		backoff = min(max(2*backoff, time.Second), 30*time.Second)
		w.log.Warn("receive failed; retrying", "error", err, "failed_receives", failures, "backoff", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// admit asks the Gate, if there is one, whether to receive.
func (w *Worker) admit(ctx, rx context.Context) (context.Context, Admission, bool) {
	if w.gate == nil {
		return rx, Admission{}, ctx.Err() == nil
	}
	return w.gate.Admit(ctx, rx)
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

// dispatch hands d to a handler goroutine that is idle, or starts one.
// Handler goroutines stay for the next delivery instead of ending with
// theirs: a delivery goes some fifty frames deep (the handler, the
// settlement through azservicebus and go-amqp, the log line), and a new
// goroutine's stack starts at the average size the collector last found,
// far smaller, so a goroutine per delivery would grow its stack, copying
// it, several times for every message. There are never more of them than
// deliveries in flight at once, at most 2*Concurrency; they end with Run.
func (w *Worker) dispatch(p *pipeline, d handoff) {
	select {
	case p.idle <- d:
	default:
		go w.handler(p, d)
	}
}

// handler handles d, then every delivery handed to it, until Run ends.
func (w *Worker) handler(p *pipeline, d handoff) {
	for {
		w.handle(p, d.m, d.adm)
		d = handoff{} // hold nothing of the last delivery while idle
		select {
		case d = <-p.idle:
		case <-p.over:
			return
		}
	}
}

// handle runs one delivery through its two phases: process, holding a
// handler slot (p.slots, taken by the receive loop), and settle, holding a
// settlement slot instead. It takes the settlement slot before it gives up
// the handler slot, so messages waiting to be settled hold handler slots
// and the loop receives no more than it can settle. adm is what the
// Gate's Admission said of the receive. Observe is called last, after the
// settlement attempt.
func (w *Worker) handle(p *pipeline, m *azservicebus.ReceivedMessage, adm admitted) {
	defer p.inflight.Done()
	defer w.inFlight.Add(-1)
	start := time.Now()
	ctx := p.handlerCtx
	// With a Hook, the settlement and the log line descend from the
	// context it returns, without its cancellation (a tracer's process
	// span: the settlement's span is its child, and a log bridge
	// correlates the line with the trace); without one they need no
	// values.
	detached := p.settleCtx
	if w.opts.Hook != nil {
		ctx = w.opts.Hook.Start(ctx, m)
		detached = context.WithoutCancel(ctx)
	}
	d := w.process(ctx, m, adm)

	w.waitToSettle(p, d)
	<-p.slots
	rep := d.rep
	if !rep.LockLost {
		// Settlement has a deadline of its own: it runs even after the
		// grace period cancelled the handler.
		sctx, cancelSettle := context.WithTimeout(detached, w.opts.SettleTimeout)
		rep.SettleErr = w.settle(sctx, m, &rep, d.retry)
		cancelSettle()
	}
	<-p.settling

	rep.Duration = time.Since(start)
	w.record(detached, m, rep)
	if w.opts.Hook != nil {
		w.opts.Hook.End(ctx, rep)
	}
	if w.opts.Observe != nil {
		w.opts.Observe(rep)
	}
}

// process is the Process phase of one delivery: it calls the handler under
// its MessageTimeout, renews the lock meanwhile (until that deadline: a
// handler that ignores it loses the lock, and the message goes to another
// consumer), tells the Gate, and waits out the retry backoff of a
// retried outcome.
func (w *Worker) process(ctx context.Context, m *azservicebus.ReceivedMessage, adm admitted) *delivery {
	now := time.Now()
	w.checkGrantedLock(m, now)
	d := &delivery{w: w, m: m, last: now}
	lctx, loseLock := context.WithCancelCause(ctx)
	defer loseLock(nil)
	mctx, cancel := context.WithTimeout(lctx, w.opts.MessageTimeout)
	defer cancel()
	d.renew(mctx, loseLock)

	// A scheduled copy is handled under its original's MessageId, the
	// deduplication key.
	st := retryStateOf(m, now)
	om := idempotent.Message{ID: st.original, Subject: deref(m.Subject), Body: m.Body, DeliveryCount: m.DeliveryCount}
	if m.SequenceNumber != nil {
		om.SequenceNumber = *m.SequenceNumber
	}
	res := w.h.Process(mctx, om)
	// A result reached after the grace or a lost lock cancelled the handler
	// says nothing about the dependencies.
	retried := res.Outcome.Settlement() == idempotent.Abandon
	cutOff := retried && errors.Is(context.Cause(mctx), errGraceOver)
	lost := d.lost.Load() || errors.Is(context.Cause(mctx), errLockLost)
	if w.gate != nil {
		w.gate.Record(Decision{Result: res, Trial: adm.trial, Telling: !cutOff && !lost, DeliveryCount: m.DeliveryCount})
	}
	if !cutOff && !lost {
		d.retry = w.planRetry(st, res, time.Now(), adm.wait)
	}
	if retried && !lost && d.retry == nil {
		w.backoff(mctx, m.DeliveryCount)
	}
	cancel()
	d.stopRenewal()
	d.rep = Report{MessageID: m.MessageID, DeliveryCount: m.DeliveryCount, Result: res, LockLost: d.lost.Load(), CutOff: cutOff}
	return d
}

// waitToSettle takes a settlement slot for d. When none is free it waits,
// renewing d's lock, until one is; the wait is bounded, since every
// settlement ends within SettleTimeout. A lock lost meanwhile sets
// d.rep.LockLost.
func (w *Worker) waitToSettle(p *pipeline, d *delivery) {
	if tryAcquire(p.settling) {
		return
	}
	if d.rep.LockLost { // no lock to keep
		p.settling <- struct{}{}
		return
	}
	rctx, stop := context.WithCancelCause(p.handlerCtx)
	d.renew(rctx, stop)
	p.settling <- struct{}{}
	stop(nil)
	d.stopRenewal()
	d.rep.LockLost = d.lost.Load()
}

// delivery is one message being handled, with the state its lock renewal
// shares with the handler.
type delivery struct {
	w     *Worker
	m     *azservicebus.ReceivedMessage
	rep   Report      // set at the end of the Process phase
	retry *retryPlan  // set at the end of the Process phase: a delayed retry instead of an abandon
	lost  atomic.Bool // a renewal found the lock lost
	// last is the receipt or the last successful renewal. A renewal
	// updates it while it runs; the handler reads it only between
	// stopRenewal and the next renew.
	last     time.Time
	timer    *time.Timer    // starts the renewal when the next renewal is due
	renewing sync.WaitGroup // the renewal the timer started, if it did
}

// renew keeps d's lock while ctx lives: a timer starts the renewal when the
// next one is due (so no goroutine waits for a renewal that most messages
// never need), and lose is called with errLockLost when the lock is found
// lost. Every renew is followed by stopRenewal once ctx has ended.
func (d *delivery) renew(ctx context.Context, lose context.CancelCauseFunc) {
	d.renewing.Add(1)
	d.timer = time.AfterFunc(d.w.renewWait(d.m, d.last, time.Now()), func() {
		defer d.renewing.Done()
		if d.w.renewLock(ctx, d.m, &d.last) {
			d.lost.Store(true)
			lose(errLockLost)
		}
	})
}

// stopRenewal waits until the renewal renew started has returned; the
// context given to renew must have ended.
func (d *delivery) stopRenewal() {
	if d.timer.Stop() {
		d.renewing.Done() // the timer had not fired: no renewal will start
	}
	d.renewing.Wait()
}

// settle is the one place where an outcome becomes a settlement, by what
// the outcome means (idempotent.Outcome.Settlement). A delayed retry
// (retry not nil) schedules its copy first and then completes m: a failure
// between the two leaves two copies, which duplicate detection or the
// handler's idempotency absorbs, never none; a scheduling that fails
// abandons m as any retried outcome.
func (w *Worker) settle(ctx context.Context, m *azservicebus.ReceivedMessage, rep *Report, retry *retryPlan) error {
	res := rep.Result
	switch res.Outcome.Settlement() {
	case idempotent.Complete:
		return w.r.CompleteMessage(ctx, m, nil)
	case idempotent.DeadLetter:
		reason, desc := res.Reason, truncate(res.Description, 1024)
		return w.r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
	default: // idempotent.Abandon, and any settlement this worker does not know
		if retry != nil {
			rep.RetryAttempt, rep.RetryDelay = retry.attempt, retry.delay
			if rep.ScheduleErr = w.scheduleRetry(ctx, m, retry); rep.ScheduleErr == nil {
				rep.Scheduled = true
				return w.r.CompleteMessage(ctx, m, nil)
			}
		}
		return w.r.AbandonMessage(ctx, m, nil)
	}
}

// backoff waits before a retried outcome is abandoned: RetryBackoff
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
