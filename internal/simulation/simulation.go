package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Config configures a run. The zero value of each field selects its
// default, except Faults and Seed, whose zero values mean no faults and
// seed 0.
type Config struct {
	Orders      int        // orders to send. Default 1000.
	Workers     int        // competing workers on the queue. Default 3.
	Concurrency int        // handlers per worker. Default 8.
	Seed        uint64     // plans the orders and every fault
	Faults      FaultRates // see FaultRates; DefaultFaultRates exercises every fault

	// MaxFaultsPerMessage bounds the faults injected into one message id
	// (Outage aside), so that every message reaches a clean delivery before
	// MaxDeliveryCount. Default MaxDeliveryCount/2.
	MaxFaultsPerMessage int

	// The queue's properties, on its virtual clock. Defaults: 30s, 10, 10m.
	LockDuration             time.Duration
	MaxDeliveryCount         int
	DuplicateDetectionWindow time.Duration

	// Consumer builds the consumer under test on the store. Default: the
	// project's consumer, order.NewProcessor. Tests plug in broken
	// consumers to show that the checker catches them.
	Consumer func(order.Store) worker.Handler

	// Logger receives the workers' logs. Default: discarded.
	Logger *slog.Logger

	// ProgressInterval is how often Run reports progress. Default 100ms.
	ProgressInterval time.Duration

	// StallTimeout ends a run in which nothing is settled for this long
	// while messages remain, which can only be a bug. Default 30s.
	StallTimeout time.Duration
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
	def(&c.MaxFaultsPerMessage, max(c.MaxDeliveryCount/2, 1))
	defDur(&c.LockDuration, 30*time.Second)
	defDur(&c.DuplicateDetectionWindow, sbqueue.DefaultDuplicateDetectionWindow)
	defDur(&c.ProgressInterval, 100*time.Millisecond)
	defDur(&c.StallTimeout, 30*time.Second)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Orders < 0:
		return fmt.Errorf("simulation: %d orders", c.Orders)
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("simulation: %d workers is not between 1 and 64", c.Workers)
	case c.MaxFaultsPerMessage >= c.MaxDeliveryCount:
		return fmt.Errorf("simulation: MaxFaultsPerMessage %d must be below MaxDeliveryCount %d, or faults alone could dead-letter a message", c.MaxFaultsPerMessage, c.MaxDeliveryCount)
	case c.LockDuration <= 0 || c.DuplicateDetectionWindow <= 0:
		return errors.New("simulation: lock duration and duplicate-detection window must be positive")
	}
	return c.Faults.Validate()
}

// Progress is a snapshot of a running simulation.
type Progress struct {
	Phase      string // "sending", "draining", "late sends", "draining late sends", "checking" or "done"
	Sent       int    // messages enqueued so far
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

// Run sends cfg.Orders orders through the queue model to cfg.Workers real
// worker loops (package worker, unchanged) running the consumer against
// the in-memory store, with the faults of cfg.Faults, until every message is
// completed or dead-lettered; then it checks the invariants against the
// final state.
//
// The run has two rounds. First the producer sends every order (and its
// planned immediate retries) while the workers consume. When nothing is in
// flight and no message is available, locks left by crashed deliveries are
// made to lapse by moving the virtual clock one lock duration, until the
// queue is empty. Then the clock moves past the duplicate-detection window,
// the producer sends the late retries and the reused ids, and the queue is
// drained again.
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
	q, err := sbqueue.NewNamespace(clock).CreateQueue("orders", sbqueue.QueueOptions{
		LockDuration:               cfg.LockDuration,
		MaxDeliveryCount:           cfg.MaxDeliveryCount,
		RequiresDuplicateDetection: true,
		DuplicateDetectionWindow:   cfg.DuplicateDetectionWindow,
	})
	if err != nil {
		return nil, err
	}
	p := newPlan(cfg.Seed, cfg.Faults, cfg.MaxFaultsPerMessage)
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
	}
	rep.OutageOrders = len(outages)

	tr := newTracker()
	mem := memstore.New()
	store := newFaultStore(mem, p, tr, outages)
	consumer := worker.Handler(order.NewProcessor(store, clock.Now))
	if cfg.Consumer != nil {
		consumer = cfg.Consumer(store)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	workers := make([]*worker.Worker, cfg.Workers)
	for i := range workers {
		w, err := worker.New(&faultReceiver{inner: q.NewReceiver(), q: q, plan: p, tr: tr},
			&trackingHandler{inner: consumer, tr: tr}, logger.With("worker", i), worker.Options{
				Concurrency:     cfg.Concurrency,
				LockDuration:    workerLockDuration,
				RetryBackoff:    -1, // redeliveries are instant on the virtual clock
				ShutdownGrace:   10 * time.Second,
				SummaryInterval: -1,
			})
		if err != nil {
			return nil, err
		}
		workers[i] = w
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var wg sync.WaitGroup
	werrs := make([]error, len(workers))
	for i, w := range workers {
		wg.Go(func() { werrs[i] = w.Run(wctx) })
	}

	d := &driver{cfg: cfg, q: q, clock: clock, tr: tr, start: start, progress: progress}
	d.setPhase("sending")
	stopProgress := d.startProgress()
	prod := newProducer(q, clock, gen, p)
	err = prod.sendFirst(ctx, cfg.Orders)
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
	if _, unmatched := tr.outcomes(); err == nil && unmatched > 0 {
		err = fmt.Errorf("%w: %d of them", errUnmatched, unmatched)
	}

	state := State{Sent: prod.sent, Queue: q.Snapshot(), Documents: mem.Items()}
	rep.fill(&state, prod, tr, clock.Now().Sub(epoch))
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
func (r *Report) fill(s *State, prod *producer, tr *tracker, virtual time.Duration) {
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
	}
	for _, ds := range idx.orders {
		r.OrderDocuments += len(ds)
	}
	for _, ds := range idx.events {
		r.EventDocuments += len(ds)
	}
	r.Outcomes, _ = tr.outcomes()
	r.DuplicateCauses = tr.attribute()
	tr.mu.Lock()
	r.Faults = tr.faultCount
	tr.mu.Unlock()
	r.Faults.ProducerRetry = prod.faults.ProducerRetry
	for _, l := range prod.late {
		if l.kind == Reuse {
			r.Faults.Reuse++
		} else {
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
	q        *sbqueue.Queue
	clock    *sbqueue.VirtualClock
	tr       *tracker
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
	s := d.q.Snapshot()
	d.mu.Lock()
	defer d.mu.Unlock()
	if phase == "" {
		phase = d.phase
	}
	return Progress{Phase: phase, Sent: int(s.Sent), Settled: s.Completed + s.DeadLettered, Deliveries: s.Delivered, Elapsed: time.Since(d.start)}
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

// drain returns when the queue is empty: every message completed or
// dead-lettered. Whenever no delivery is in flight, no message is available
// and every lock left was left by a crashed delivery, it moves the virtual
// clock by one lock duration so that those locks lapse.
func (d *driver) drain(ctx context.Context) error {
	stall := time.NewTimer(d.cfg.StallTimeout)
	defer stall.Stop()
	var (
		s      sbqueue.Snapshot
		locked [][16]byte
	)
	for {
		// A delivery in flight will signal when it settles. Otherwise read
		// the queue, then the tracker again: a lock the tracker does not
		// know as crashed is a delivery in flight or about to be
		// registered, which will signal too.
		if d.tr.busy() {
			goto wait
		}
		s = d.q.Snapshot()
		locked = locked[:0]
		for _, m := range s.Locked {
			locked = append(locked, m.LockToken)
		}
		if len(s.Active) == 0 && d.tr.idle(locked) {
			if len(locked) == 0 {
				return nil
			}
			// Forget first: a delivery that crashes after the clock
			// moves must stay known as crashed.
			d.tr.forgetCrashed()
			d.clock.Advance(d.cfg.LockDuration)
			continue
		}
	wait:
		select {
		case <-d.tr.changed:
			stall.Reset(d.cfg.StallTimeout)
		case <-stall.C:
			d.tr.mu.Lock()
			inflight, crashed := d.tr.inflight, len(d.tr.crashed)
			d.tr.mu.Unlock()
			return fmt.Errorf("%w: %d messages available, %d locked (%d known crashed), %d deliveries in flight",
				errStalled, len(s.Active), len(s.Locked), crashed, inflight)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
