package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// workerSlot is one of the run's workers, which a WorkerRestart replaces
// by a new worker on a new receiver.
type workerSlot struct {
	name   string
	sub    *subscription
	orders bool // on the order writers' queue: the only one with restarts
	index  int

	// Guarded by workerPool.mu.
	generation int
	restarting bool
	cancel     context.CancelFunc
	done       chan struct{}
	recv       *sbqueue.Receiver
	settled    uint64
	errs       []error
}

// workerPool runs the workers and restarts them as the plan says: it
// cancels the worker's context as SIGTERM does, waits for Run to return
// (the worker drains its handlers within its shutdown grace), closes its
// receiver as cmd/orderworker does, and starts a new worker on a new
// receiver.
type workerPool struct {
	cfg     Config
	logger  *slog.Logger
	gateway order.PaymentGateway
	// paymentsProbe is the payments service's probe of the order writers'
	// breakers; nil without payments.
	paymentsProbe *faultGateway
	hist          *history
	timing        *timing
	restart       chan *workerSlot
	// outages starts the run's dependency outages after settlements, and
	// schedule fails the workers' schedulings, as the plan says.
	outages  *outages
	schedule *scheduleFaults

	mu       sync.Mutex
	slots    []*workerSlot
	stopping bool
	restarts int
}

// maxRestartsPerWorker bounds the restarts of one worker slot.
const maxRestartsPerWorker = 2

// start starts a worker in sl. Requires that sl runs none.
func (p *workerPool) start(sl *workerSlot) error {
	s := sl.sub
	owner := sl.name
	if sl.generation > 0 {
		owner = fmt.Sprintf("%s.%d", sl.name, sl.generation)
	}
	env := Env{Store: s.store, Orders: orderView{s.store}, Now: time.Now, Payments: p.gateway, Lease: p.cfg.LockDuration, KeyRetention: p.cfg.KeyRetention,
		Owner: owner, MarkerTTL: p.cfg.MarkerTTL}
	var h worker.Handler
	if sl.orders {
		h = p.cfg.Consumer(env)
	} else {
		h = p.cfg.InboxConsumer(s.name, env)
	}
	r := s.out.q.NewReceiver()
	fr := &faultReceiver{inner: r, q: s.out.q, plan: s.plan, tr: s.tr, hist: p.hist, queue: s.out.consumer, timing: p.timing, lock: p.cfg.LockDuration}
	if sl.orders {
		fr.afterSettle = func() { p.settled(sl) }
	}
	logger := p.logger.With("queue", s.name, "worker", sl.index, "generation", sl.generation)
	// As cmd/orderworker's: the store's Probe, and for the order writers,
	// who capture payments, the payments service's too.
	probe := s.store.Probe
	if sl.orders && p.paymentsProbe != nil {
		probe = func(ctx context.Context) error { return errors.Join(s.store.Probe(ctx), p.paymentsProbe.Ping(ctx)) }
	}
	opts, rcv, err := p.cfg.workerOptions(probe, s.name, fr, logger)
	if err != nil {
		return err
	}
	if sl.orders {
		opts.Scheduler = &scheduleRecorder{q: s.out.q, hist: p.hist, faults: p.schedule}
		if p.cfg.Scheduler != nil {
			opts.Scheduler = p.cfg.Scheduler(opts.Scheduler)
		}
	}
	wk, err := worker.New(rcv, &trackingHandler{inner: h, tr: s.tr, hist: p.hist, queue: s.out.consumer}, logger, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.mu.Lock()
	sl.cancel, sl.done, sl.recv = cancel, done, r
	p.mu.Unlock()
	go func() {
		defer close(done)
		if err := wk.Run(ctx); err != nil {
			p.mu.Lock()
			sl.errs = append(sl.errs, err)
			p.mu.Unlock()
		}
	}()
	return nil
}

// settled counts a settlement of sl's worker and asks for its restart if
// the plan says so. It never blocks: it runs on a handler goroutine.
func (p *workerPool) settled(sl *workerSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl.settled++
	p.outages.settled(sl.name, sl.settled)
	if p.stopping || sl.restarting || sl.generation >= maxRestartsPerWorker || !sl.sub.plan.restarts(sl.name, sl.settled) {
		return
	}
	select {
	case p.restart <- sl:
		sl.restarting = true
	default:
	}
}

// supervise restarts the slots asked for until stopAll.
func (p *workerPool) supervise() {
	for sl := range p.restart {
		p.mu.Lock()
		stopping := p.stopping
		cancel, done, recv := sl.cancel, sl.done, sl.recv
		p.mu.Unlock()
		if stopping {
			p.mu.Lock()
			sl.restarting = false
			p.mu.Unlock()
			continue
		}
		cancel()
		<-done
		_ = recv.Close(context.Background())
		p.mu.Lock()
		sl.generation++
		p.restarts++
		stopping = p.stopping
		p.mu.Unlock()
		if !stopping {
			if err := p.start(sl); err != nil {
				p.mu.Lock()
				sl.errs = append(sl.errs, err)
				p.mu.Unlock()
			}
		}
		p.mu.Lock()
		sl.restarting = false
		p.mu.Unlock()
	}
}

// stopAll stops every worker, as at the end of the run, closes their
// receivers and returns their errors.
func (p *workerPool) stopAll() error {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	var errs []error
	for {
		// A restart in progress finishes (and starts nothing) first.
		p.mu.Lock()
		busy := slices.ContainsFunc(p.slots, func(sl *workerSlot) bool { return sl.restarting })
		p.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.mu.Lock()
	slots := slices.Clone(p.slots)
	p.mu.Unlock()
	for _, sl := range slots { // every worker gets SIGTERM at once
		p.mu.Lock()
		sl.cancel()
		p.mu.Unlock()
	}
	for _, sl := range slots {
		p.mu.Lock()
		done, recv := sl.done, sl.recv
		p.mu.Unlock()
		<-done
		_ = recv.Close(context.Background()) // as cmd/orderworker closes its receiver
		p.mu.Lock()
		errs = append(errs, sl.errs...)
		p.mu.Unlock()
	}
	close(p.restart)
	return errors.Join(errs...)
}
