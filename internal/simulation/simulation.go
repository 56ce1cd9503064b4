package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Config configures a run. The zero value of each field selects its
// default, except Faults and Seed, whose zero values mean no faults and
// seed 0, and the Disable fields, whose zero values run every part.
type Config struct {
	Orders      int        // orders to send. Default 1000.
	Workers     int        // competing workers on each queue. Default 3.
	Concurrency int        // handlers per worker. Default 8.
	Seed        uint64     // plans the orders and every fault
	Faults      FaultRates // see FaultRates; DefaultFaultRates exercises every fault

	// StatusChanges is the fraction of valid orders that get one to three
	// status changes (versions 2 to 4). Default 0.3.
	StatusChanges float64

	// The parts of the pattern beyond writing orders, all on by default:
	// the payment capture (an in-process payments service, charged once
	// per order through its idempotency key), the status changes, and two
	// inbox consumers ("loyalty" and "audit") on subscriptions of their own.
	DisablePayments      bool
	DisableStatusChanges bool
	DisableInbox         bool

	// MaxFaultsPerMessage bounds the faults injected into one order's
	// messages (Outage aside), so that every message reaches a clean
	// delivery before MaxDeliveryCount. A fault costs a message at most two
	// deliveries, and a status change may be delivered once before its
	// order exists, so it must be at most (MaxDeliveryCount-2)/2, the
	// default.
	MaxFaultsPerMessage int

	// The queues' properties, on their virtual clock. Defaults: 30s, 10, 10m.
	LockDuration             time.Duration
	MaxDeliveryCount         int
	DuplicateDetectionWindow time.Duration

	// MarkerTTL is the time-to-live of the inbox consumers' markers.
	// Default: the minimum retention for the queues' settings,
	// order.RedeliveryHorizon.MinRetention. A shorter TTL is accepted, to
	// show what it breaks.
	MarkerTTL time.Duration

	// Consumer builds the order consumer under test, once per worker.
	// Default: DefaultConsumer, the project's consumer. Tests plug in
	// broken consumers to show that the checker catches them.
	Consumer func(Env) worker.Handler

	// InboxConsumer builds the inbox consumer of the subscription named
	// subscription, once per worker. Default: DefaultInboxConsumer.
	InboxConsumer func(subscription string, e Env) worker.Handler

	// Logger receives the workers' logs. Default: discarded.
	Logger *slog.Logger

	// ProgressInterval is how often Run reports progress. Default 100ms.
	ProgressInterval time.Duration

	// StallTimeout ends a run in which nothing is settled for this long
	// while messages remain, which can only be a bug. Default 30s.
	StallTimeout time.Duration
}

// Env is what a consumer under test is built from.
type Env struct {
	// Store is the store, with the plan's store faults. It is shared by
	// every consumer of the run, as one Cosmos DB container is.
	Store Store
	// Now is the virtual clock, which the queues' locks follow.
	Now func() time.Time
	// Payments is the gateway to the payments service, with the plan's
	// payment faults; nil when payments are disabled.
	Payments order.PaymentGateway
	// Lease is how long a payment claim protects a capture in progress:
	// the queue's lock duration, on the virtual clock, so that a claim left
	// by a crashed delivery goes stale when its lock lapses.
	Lease time.Duration
	// Owner names the worker, for payment records.
	Owner string
	// MarkerTTL is the inbox markers' time-to-live.
	MarkerTTL time.Duration
}

// DefaultConsumer returns the project's order consumer: an order.Processor
// that applies status changes and, unless e.Payments is nil, captures each
// accepted order's payment.
func DefaultConsumer(e Env) worker.Handler {
	opts := []order.Option{order.WithDocuments(e.Store)}
	if e.Payments != nil {
		opts = append(opts, order.WithPayments(e.Payments, e.Lease, e.Owner))
	}
	return order.NewProcessor(e.Store, e.Now, opts...)
}

// DefaultInboxConsumer returns the project's inbox consumer for a
// subscription: an order.InboxConsumer named after it.
func DefaultInboxConsumer(subscription string, e Env) worker.Handler {
	return &order.InboxConsumer{Name: subscription, Store: e.Store, MarkerTTL: e.MarkerTTL, Now: e.Now}
}

// inboxConsumers are the names of the inbox consumers' subscriptions.
var inboxConsumers = [...]string{"loyalty", "audit"}

// horizon returns the redelivery horizon of the queues of c.
func (c Config) horizon() order.RedeliveryHorizon {
	return order.RedeliveryHorizon{LockDuration: c.LockDuration, MaxDeliveryCount: c.MaxDeliveryCount, DuplicateDetectionWindow: c.DuplicateDetectionWindow}
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Orders, 1000)
	def(&c.Workers, 3)
	def(&c.Concurrency, 8)
	def(&c.MaxDeliveryCount, sbqueue.DefaultMaxDeliveryCount)
	def(&c.MaxFaultsPerMessage, max((c.MaxDeliveryCount-2)/2, 1))
	defDur(&c.LockDuration, 30*time.Second)
	defDur(&c.DuplicateDetectionWindow, sbqueue.DefaultDuplicateDetectionWindow)
	defDur(&c.ProgressInterval, 100*time.Millisecond)
	defDur(&c.StallTimeout, 30*time.Second)
	if c.StatusChanges == 0 {
		c.StatusChanges = 0.3
	}
	if c.MarkerTTL == 0 {
		c.MarkerTTL, _ = c.horizon().MinRetention()
	}
	if c.Consumer == nil {
		c.Consumer = DefaultConsumer
	}
	if c.InboxConsumer == nil {
		c.InboxConsumer = DefaultInboxConsumer
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Orders < 0:
		return fmt.Errorf("simulation: %d orders", c.Orders)
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("simulation: %d workers is not between 1 and 64", c.Workers)
	case 2*c.MaxFaultsPerMessage+2 > c.MaxDeliveryCount:
		return fmt.Errorf("simulation: MaxFaultsPerMessage %d must be at most (MaxDeliveryCount %d - 2) / 2, or faults alone could dead-letter a message", c.MaxFaultsPerMessage, c.MaxDeliveryCount)
	case c.LockDuration <= 0 || c.DuplicateDetectionWindow <= 0 || c.MarkerTTL < time.Second:
		return errors.New("simulation: lock duration and duplicate-detection window must be positive, and the marker TTL at least a second")
	case !(c.StatusChanges >= 0 && c.StatusChanges <= 1):
		return fmt.Errorf("simulation: StatusChanges %v is not between 0 and 1", c.StatusChanges)
	}
	return c.Faults.Validate()
}

// Progress is a snapshot of a running simulation.
type Progress struct {
	Phase      string // "sending", "draining", "late sends", "draining late sends", "checking" or "done"
	Sent       int    // messages enqueued so far, on every queue
	Settled    int64  // messages completed or dead-lettered so far
	Deliveries int64
	Elapsed    time.Duration
}

// workerLockDuration is the lock duration the workers believe in, on the
// real clock. The queue's locks live on the virtual clock and lapse only
// when the simulation moves it, so the workers must never renew on their
// own timers: with this duration their first renewal would come after 2.5
// minutes of real time, far beyond any run.
const workerLockDuration = 5 * time.Minute

// subscription is one queue of the run with its tracker: the order
// writers' queue, or an inbox consumer's.
type subscription struct {
	out   *outlet
	plan  *plan // its faults; the order writers' is the run's plan
	tr    *tracker
	store *faultStore
}

// Run sends cfg.Orders orders, and their status changes, through the queue
// model to cfg.Workers real worker loops (package worker, unchanged)
// running the consumer against the in-memory store and the payments
// service, with the faults of cfg.Faults, until every message is completed
// or dead-lettered; then it checks the invariants against the final state.
// Unless cfg.DisableInbox, the orders also go, as to the subscriptions of a
// Service Bus topic, to a queue per inbox consumer, each with workers and
// faults of its own.
//
// The run has two rounds. First the producer sends every order (and its
// planned immediate retries and status changes) while the workers consume.
// When nothing is in flight and no message is available, locks left by
// crashed deliveries (and by deliveries backing off, see faultReceiver) are
// made to lapse by moving the virtual clock one lock duration, until the
// queues are empty. Then the clock moves past the duplicate-detection
// window, the producer sends the late retries and the reused ids, and the
// queues are drained again.
//
// progress, if not nil, is called at the start of each phase, every
// cfg.ProgressInterval and once at the end, never concurrently.
//
// Run returns an error only if the simulation itself failed (bad
// configuration, a worker that stopped, a stall, ctx done); invariant
// violations are in the report: see Report.Verdict.
func Run(ctx context.Context, cfg Config, progress func(Progress)) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	clock := sbqueue.NewVirtualClock(epoch)
	ns := sbqueue.NewNamespace(clock)
	p := newPlan(cfg.Seed, cfg.Faults, cfg.MaxFaultsPerMessage)
	if !cfg.DisableStatusChanges {
		p.statuses = cfg.StatusChanges
	}
	gen := ordergen.New(cfg.Seed, "sim")
	rep := &Report{Config: cfg, Orders: cfg.Orders}
	outages := make(map[string]bool)
	for i := range cfg.Orders {
		op := p.order(i)
		if op.malformed {
			rep.Malformed++
			continue
		}
		rep.Valid++
		if op.reuse {
			rep.ReusedIDs++
		}
		if op.outage {
			outages[gen.ID(i)] = true
		}
		if op.statuses > 0 {
			rep.Status.Orders++
			if op.statusBefore > 0 || !slices.IsSorted(op.statusOrder) {
				rep.Status.Shuffled++
			}
		}
	}
	rep.OutageOrders = len(outages)

	mem := memstore.NewWithClock(clock.Now)
	changed := make(chan struct{}, 1)
	names := []string{"orders"}
	if !cfg.DisableInbox {
		names = append(names, inboxConsumers[:]...)
	}
	subs := make([]*subscription, len(names))
	for i, name := range names {
		q, err := ns.CreateQueue(name, sbqueue.QueueOptions{
			LockDuration:               cfg.LockDuration,
			MaxDeliveryCount:           cfg.MaxDeliveryCount,
			RequiresDuplicateDetection: true,
			DuplicateDetectionWindow:   cfg.DuplicateDetectionWindow,
		})
		if err != nil {
			return nil, err
		}
		s := &subscription{out: &outlet{q: q, statuses: i == 0}, plan: p, tr: newTracker(changed)}
		if i == 0 {
			s.store = newFaultStore(mem, p, s.tr, outages, false)
		} else {
			s.out.consumer, s.plan = name, p.subscription(name)
			s.store = newFaultStore(mem, s.plan, s.tr, nil, true)
		}
		subs[i] = s
	}
	var svc *payments.Service
	var gateway order.PaymentGateway
	if !cfg.DisablePayments {
		var gw *faultGateway
		var err error
		if svc, gw, err = newPayments(clock, p, subs[0].tr); err != nil {
			return nil, err
		}
		gateway = gw
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	var workers []*worker.Worker
	for i, s := range subs {
		for w := range cfg.Workers {
			env := Env{Store: s.store, Now: clock.Now, Payments: gateway, Lease: cfg.LockDuration,
				Owner: fmt.Sprintf("%s-worker-%d", names[i], w), MarkerTTL: cfg.MarkerTTL}
			var h worker.Handler
			if i == 0 {
				h = cfg.Consumer(env)
			} else {
				h = cfg.InboxConsumer(names[i], env)
			}
			wk, err := worker.New(&faultReceiver{inner: s.out.q.NewReceiver(), q: s.out.q, plan: s.plan, tr: s.tr},
				&trackingHandler{inner: h, tr: s.tr}, logger.With("queue", names[i], "worker", w), worker.Options{
					Concurrency:     cfg.Concurrency,
					LockDuration:    workerLockDuration,
					RetryBackoff:    -1, // redeliveries are instant on the virtual clock
					ShutdownGrace:   10 * time.Second,
					SummaryInterval: -1,
				})
			if err != nil {
				return nil, err
			}
			workers = append(workers, wk)
		}
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	werrs := make([]error, len(workers))
	for i, w := range workers {
		wg.Go(func() { werrs[i] = w.Run(wctx) })
	}

	d := &driver{cfg: cfg, subs: subs, clock: clock, changed: changed, start: start, progress: progress}
	d.setPhase("sending")
	stopProgress := d.startProgress()
	outlets := make([]*outlet, len(subs))
	for i, s := range subs {
		outlets[i] = s.out
	}
	prod := newProducer(outlets, clock, gen, p)
	err := prod.sendFirst(ctx, cfg.Orders)
	if err == nil {
		d.setPhase("draining")
		err = d.drain(ctx)
	}
	if err == nil && len(prod.late) > 0 {
		clock.Advance(cfg.DuplicateDetectionWindow)
		d.setPhase("late sends")
		err = prod.sendLate(ctx)
		if err == nil {
			d.setPhase("draining late sends")
			err = d.drain(ctx)
		}
	}
	stopWorkers()
	wg.Wait()
	d.setPhase("checking")
	stopProgress()
	if err == nil {
		err = errors.Join(werrs...)
	}
	for _, s := range subs {
		if _, unmatched := s.tr.outcomes(); err == nil && unmatched > 0 {
			err = fmt.Errorf("%w: %d of them", errUnmatched, unmatched)
		}
	}

	state := State{Sent: subs[0].out.sent, Queue: subs[0].out.q.Snapshot(), Documents: mem.Items(), Now: clock.Now(), MarkerTTL: cfg.MarkerTTL}
	for _, s := range subs[1:] {
		state.Inbox = append(state.Inbox, Subscription{Consumer: s.out.consumer, Sent: s.out.sent, Queue: s.out.q.Snapshot()})
	}
	if svc != nil && err == nil {
		state.Payments, err = ledger(svc, state.Documents)
		if err == nil {
			rep.Payments.Charges = svc.Charges()
		}
	}
	rep.fill(&state, prod, subs, clock.Now().Sub(epoch))
	rep.Elapsed = time.Since(start)
	if progress != nil {
		d.report(d.snapshot("done"))
	}
	if err != nil {
		return rep, fmt.Errorf("simulation seed %d: %w", cfg.Seed, err)
	}
	return rep, nil
}

// fill completes the report from the final state and the run's records.
func (r *Report) fill(s *State, prod *producer, subs []*subscription, virtual time.Duration) {
	idx := newIndex(s)
	r.Violations = idx.check()
	failed := make(map[string]bool)
	for _, v := range r.Violations {
		failed[v.Invariant] = true
	}
	for _, inv := range Invariants() {
		if failed[inv.Name] {
			r.InvariantsFailed = append(r.InvariantsFailed, inv.Name)
		} else {
			r.InvariantsHeld = append(r.InvariantsHeld, inv.Name)
		}
	}
	for _, m := range s.Sent {
		if m.Kind == Status {
			r.Status.Sent++
			if m.Enqueued {
				r.Status.Enqueued++
			}
		}
		r.Sends++
		if m.Enqueued {
			r.Enqueued++
		} else {
			r.Dropped++
			if m.Kind == Reuse && !m.Resend {
				r.DroppedReuses++
			}
		}
	}
	r.Deliveries = s.Queue.Delivered
	r.LockLost = s.Queue.LockLost
	r.DeadLetters = make(map[string]int)
	for _, m := range s.Queue.DeadLetters {
		r.DeadLetters[m.DeadLetterReason]++
		if m.Subject == order.SubjectOrderStatusChanged {
			r.Status.DeadLettered++
		}
	}
	for _, ds := range idx.orders {
		r.OrderDocuments += len(ds)
	}
	for _, ds := range idx.events {
		r.EventDocuments += len(ds)
	}
	tr := subs[0].tr
	r.Outcomes, _ = tr.outcomes()
	r.Status.Applied, r.Status.Stale, r.Status.BeforeOrder = r.Outcomes.Applied, r.Outcomes.Stale, r.Outcomes.BeforeOrder
	r.DuplicateCauses = tr.attribute()
	tr.mu.Lock()
	r.Faults = tr.faultCount
	pc := tr.payCount
	tr.mu.Unlock()
	if s.Payments != nil {
		r.Payments.Enabled = true
		r.Payments.Captures, r.Payments.CapturesFailed, r.Payments.Replays = pc.Captures, pc.Failed, pc.Replays
		for _, ds := range idx.payments {
			for _, d := range ds {
				if d.state == order.PaymentCompleted {
					r.Payments.Completed++
				}
			}
		}
	}
	for _, s2 := range subs[1:] {
		o, _ := s2.tr.outcomes()
		snap := s2.out.q.Snapshot()
		ir := InboxReport{Consumer: s2.out.consumer, Enqueued: int(snap.Sent), Deliveries: snap.Delivered, Outcomes: o,
			DuplicateCauses: s2.tr.attribute(), DeadLettered: len(snap.DeadLetters)}
		for _, e := range idx.loyalty {
			if e.consumer == s2.out.consumer {
				ir.Entries++
			}
		}
		for _, m := range idx.markers {
			if m.consumer == s2.out.consumer {
				ir.Markers++
			}
		}
		s2.tr.mu.Lock()
		fc := s2.tr.faultCount
		s2.tr.mu.Unlock()
		ir.Faults = fc.Crash + fc.LostSettlement + fc.LockExpiry + fc.Transient + fc.Ambiguous
		r.Inbox = append(r.Inbox, ir)
	}
	r.Faults.ProducerRetry = prod.faults.ProducerRetry
	for _, l := range prod.late {
		switch l.kind {
		case Reuse:
			r.Faults.Reuse++
		default:
			r.Faults.LateRetry++
		}
	}
	r.Faults.Malformed = r.Malformed
	r.VirtualTime = virtual
}

// driver moves the run along: it waits for quiescence and moves the virtual
// clock, and it reports progress.
type driver struct {
	cfg      Config
	subs     []*subscription
	clock    *sbqueue.VirtualClock
	changed  chan struct{} // every tracker's signal
	start    time.Time
	progress func(Progress)

	progressMu sync.Mutex // serialises progress calls

	mu    sync.Mutex
	phase string
}

// setPhase starts phase p and reports it.
func (d *driver) setPhase(p string) {
	d.mu.Lock()
	d.phase = p
	d.mu.Unlock()
	if d.progress != nil {
		d.report(d.snapshot(p))
	}
}

// report calls the progress callback, never concurrently.
func (d *driver) report(p Progress) {
	if d.progress == nil {
		return
	}
	d.progressMu.Lock()
	defer d.progressMu.Unlock()
	d.progress(p)
}

func (d *driver) snapshot(phase string) Progress {
	var p Progress
	for _, s := range d.subs {
		snap := s.out.q.Snapshot()
		p.Sent += int(snap.Sent)
		p.Settled += snap.Completed + snap.DeadLettered
		p.Deliveries += snap.Delivered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if phase == "" {
		phase = d.phase
	}
	p.Phase, p.Elapsed = phase, time.Since(d.start)
	return p
}

// startProgress calls d.progress every ProgressInterval until the returned
// function is called.
func (d *driver) startProgress() (stop func()) {
	if d.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.report(d.snapshot(""))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// errStalled reports a run in which nothing happened for StallTimeout.
var errStalled = errors.New("stalled: nothing settled although messages remain")

// quiescent reports whether nothing can happen on any queue until the
// clock moves, and whether some lock is left to lapse.
func (d *driver) quiescent() (quiet, locks bool) {
	for _, s := range d.subs {
		// A delivery in flight will signal when it settles. Otherwise read
		// the queue, then the tracker again: a lock the tracker does not
		// know as left to lapse is a delivery in flight or about to be
		// registered, which will signal too.
		if s.tr.busy() {
			return false, false
		}
		snap := s.out.q.Snapshot()
		locked := make([][16]byte, 0, len(snap.Locked))
		for _, m := range snap.Locked {
			locked = append(locked, m.LockToken)
		}
		if len(snap.Active) > 0 || !s.tr.idle(locked) {
			return false, false
		}
		locks = locks || len(locked) > 0
	}
	return true, locks
}

// drain returns when every queue is empty: every message completed or
// dead-lettered. Whenever no delivery is in flight, no message is
// available and every lock left was left by a crashed delivery or one
// backing off, it moves the virtual clock by one lock duration so that
// those locks lapse.
func (d *driver) drain(ctx context.Context) error {
	stall := time.NewTimer(d.cfg.StallTimeout)
	defer stall.Stop()
	for {
		if quiet, locks := d.quiescent(); quiet {
			if !locks {
				return nil
			}
			// Forget first: a delivery that crashes after the clock
			// moves must stay known as crashed.
			for _, s := range d.subs {
				s.tr.forgetCrashed()
			}
			d.clock.Advance(d.cfg.LockDuration)
			continue
		}
		select {
		case <-d.changed:
			stall.Reset(d.cfg.StallTimeout)
		case <-stall.C:
			var inflight, crashed, active, locked int
			for _, s := range d.subs {
				snap := s.out.q.Snapshot()
				active, locked = active+len(snap.Active), locked+len(snap.Locked)
				s.tr.mu.Lock()
				inflight, crashed = inflight+s.tr.inflight, crashed+len(s.tr.crashed)
				s.tr.mu.Unlock()
			}
			return fmt.Errorf("%w: %d messages available, %d locked (%d known left to lapse), %d deliveries in flight",
				errStalled, active, locked, crashed, inflight)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
