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
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Config configures a run. The zero value of each field selects its
// default, except Faults and Seed, whose zero values mean no faults and
// seed 0, and the Disable fields, whose zero values run every part.
//
// Every duration is on the clock the run uses: time.Now and Go's timers.
// Inside a testing/synctest bubble that is the bubble's virtual clock, so
// the defaults (30 s locks, a 10 minute duplicate-detection window, a key
// retention of an hour, resubmissions hours later) cost no wall time; on
// the wall clock use a compressed scale (see CompressedTimeScale).
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
	// inbox consumers ("loyalty" and "audit") on subscriptions of their own
	// of the topic the outbox relay publishes to (DisableInbox turns the
	// relay off too).
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

	// The queues' properties. Defaults: 30s, 10, 10m. The workers are
	// configured with the same lock duration, as cmd/orderworker does.
	LockDuration             time.Duration
	MaxDeliveryCount         int
	DuplicateDetectionWindow time.Duration

	// ShutdownGrace is the workers' shutdown grace period. Default 30s, the
	// worker's default.
	ShutdownGrace time.Duration

	// KeyRetention is how long the payments service remembers an
	// idempotency key after its charge. Default 1h.
	KeyRetention time.Duration
	// ResubmitEarly and ResubmitLate are when the operator resubmits
	// dead-lettered messages (see FaultRates.ResubmitEarly): that long
	// after the queues drained. ResubmitEarly must exceed the
	// duplicate-detection window (a resubmission inside it is dropped);
	// ResubmitLate must exceed KeyRetention, so that every key charged
	// before it is forgotten. Defaults: 2 × DuplicateDetectionWindow, and
	// KeyRetention + DuplicateDetectionWindow.
	ResubmitEarly time.Duration
	ResubmitLate  time.Duration

	// The outbox relay's timers, as cmd/orderrelay's RELAY_LEASE_DURATION,
	// RELAY_POLL_INTERVAL and RELAY_CALL_TIMEOUT. Defaults: the relay's,
	// relay.DefaultLeaseDuration, DefaultPollInterval and
	// DefaultCallTimeout.
	RelayLeaseDuration time.Duration
	RelayPollInterval  time.Duration
	RelayCallTimeout   time.Duration

	// MarkerTTL is the time-to-live of the inbox markers.
	// Default: the minimum retention for the queues' settings,
	// order.RedeliveryHorizon.MinRetention. A shorter TTL is accepted, to
	// show what it breaks. (The inbox consumers' queues get no
	// resubmissions.)
	MarkerTTL time.Duration

	// Consumer builds the order consumer under test, once per worker.
	// Default: DefaultConsumer, the project's consumer. Tests plug in
	// broken consumers to show that the checker catches them.
	Consumer func(Env) worker.Handler

	// InboxConsumer builds the inbox consumer of the subscription named
	// subscription, once per worker. Default: DefaultInboxConsumer.
	InboxConsumer func(subscription string, e Env) worker.Handler

	// RelaySender, if not nil, wraps the sender of every relay instance.
	// Tests plug in broken relays to show that the checker catches them.
	RelaySender func(relay.Sender) relay.Sender

	// Logger receives the workers' logs. Default: discarded.
	Logger *slog.Logger

	// Telemetry is every worker's telemetry, with Queue set to the
	// worker's queue ("orders", or an inbox consumer's name). Default:
	// none, as orderworker -simulate runs, which exports nothing.
	Telemetry worker.Telemetry

	// ProgressInterval is how often Run reports progress. Default 100ms.
	ProgressInterval time.Duration

	// StoreLatency and PaymentLatency are how long every store call and
	// every request to the payments service takes, so that handlers take
	// time and deliveries overlap as they do against real services.
	// Defaults 5ms and 20ms; negative means none.
	StoreLatency   time.Duration
	PaymentLatency time.Duration

	// StallTimeout ends a run in which nothing is settled for this long
	// while messages remain, which can only be a bug. Default 20 lock
	// durations: the longest legitimate quiet spell is a lock lapsing.
	StallTimeout time.Duration
	// TimeLimit bounds the whole run. Default: the planned waits (the
	// duplicate-detection window and both resubmission delays) plus 100
	// lock durations per delivery a message may have.
	TimeLimit time.Duration
}

// CompressedTimeScale returns c with the time scale that `orderworker
// -simulate` uses on the wall clock: 1 s locks (the shortest Service Bus
// allows), a 1 s duplicate-detection window, a 3 s key retention, and
// resubmissions 1.5 s and 3.5 s after the queues drained; the worker's shutdown
// grace is 2 s; store calls take 1 ms and payment requests 3 ms; the relay's
// leases last 3 s, it polls every 100 ms and its calls time out after 1 s. Fields
// already set are kept.
func (c Config) CompressedTimeScale() Config {
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.LockDuration, time.Second)
	def(&c.DuplicateDetectionWindow, time.Second)
	def(&c.KeyRetention, 3*time.Second)
	def(&c.ResubmitEarly, 1500*time.Millisecond)
	def(&c.ResubmitLate, c.KeyRetention+500*time.Millisecond)
	def(&c.ShutdownGrace, 2*time.Second)
	def(&c.StoreLatency, time.Millisecond)
	def(&c.PaymentLatency, 3*time.Millisecond)
	def(&c.RelayLeaseDuration, 3*time.Second)
	def(&c.RelayPollInterval, 100*time.Millisecond)
	def(&c.RelayCallTimeout, time.Second)
	return c
}

// Env is what a consumer under test is built from.
type Env struct {
	// Store is the store, with the plan's store faults. It is shared by
	// every consumer of the run, as one Cosmos DB container is.
	Store Store
	// Orders is the same store as the order Processor's Store: its batches
	// count as order writes and its reads as order reads, with the faults
	// of those. Nil: Store.
	Orders order.Store
	// Now is the clock: time.Now, which the queues' locks follow too.
	Now func() time.Time
	// Payments is the gateway to the payments service, with the plan's
	// payment faults; nil when payments are disabled.
	Payments order.PaymentGateway
	// Lease is how long a payment claim protects a capture in progress:
	// the workers' message timeout, as cmd/orderworker passes it.
	Lease time.Duration
	// KeyRetention is how long the payments service remembers an
	// idempotency key after its charge.
	KeyRetention time.Duration
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
		opts = append(opts, order.WithPaymentOptions(order.PaymentOptions{
			Gateway: e.Payments, Lease: e.Lease, Owner: e.Owner, KeyRetention: e.KeyRetention,
		}))
	}
	orders := e.Orders
	if orders == nil {
		orders = e.Store
	}
	return order.NewProcessor(orders, e.Now, opts...)
}

// DefaultInboxConsumer returns the project's inbox consumer for a
// subscription: an order.InboxConsumer named after it.
func DefaultInboxConsumer(subscription string, e Env) worker.Handler {
	return &order.InboxConsumer{Name: subscription, Store: e.Store, MarkerTTL: e.MarkerTTL, Now: e.Now}
}

// inboxConsumers are the names of the inbox consumers' subscriptions.
var inboxConsumers = [...]string{"loyalty", "audit"}

// horizon returns the redelivery horizon of the inbox consumers' queues,
// which get no resubmissions.
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
	defDur(&c.ShutdownGrace, 30*time.Second)
	defDur(&c.KeyRetention, time.Hour)
	defDur(&c.ResubmitEarly, 2*c.DuplicateDetectionWindow)
	defDur(&c.ResubmitLate, c.KeyRetention+c.DuplicateDetectionWindow)
	defDur(&c.ProgressInterval, 100*time.Millisecond)
	defDur(&c.StoreLatency, 5*time.Millisecond)
	defDur(&c.PaymentLatency, 20*time.Millisecond)
	defDur(&c.RelayLeaseDuration, relay.DefaultLeaseDuration)
	defDur(&c.RelayPollInterval, relay.DefaultPollInterval)
	defDur(&c.RelayCallTimeout, relay.DefaultCallTimeout)
	defDur(&c.StallTimeout, 20*c.LockDuration)
	defDur(&c.TimeLimit, c.DuplicateDetectionWindow+c.ResubmitEarly+c.ResubmitLate+
		time.Duration(100*c.MaxDeliveryCount)*c.LockDuration)
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
	case c.Concurrency < 1 || c.Concurrency > 5000:
		return fmt.Errorf("simulation: concurrency %d is not between 1 and 5000", c.Concurrency)
	case 2*c.MaxFaultsPerMessage+2 > c.MaxDeliveryCount:
		return fmt.Errorf("simulation: MaxFaultsPerMessage %d must be at most (MaxDeliveryCount %d - 2) / 2, or faults alone could dead-letter a message", c.MaxFaultsPerMessage, c.MaxDeliveryCount)
	case c.LockDuration < time.Second || c.DuplicateDetectionWindow <= 0 || c.MarkerTTL < time.Second:
		return errors.New("simulation: the lock duration must be at least a second (the worker's minimum), the duplicate-detection window positive, and the marker TTL at least a second")
	case c.KeyRetention <= 0 || c.ShutdownGrace <= 0:
		return errors.New("simulation: the key retention and the shutdown grace must be positive")
	case c.ResubmitEarly <= c.DuplicateDetectionWindow:
		return fmt.Errorf("simulation: ResubmitEarly %v must exceed the duplicate-detection window %v, or the resubmissions are dropped as duplicates", c.ResubmitEarly, c.DuplicateDetectionWindow)
	case c.ResubmitLate <= c.KeyRetention:
		return fmt.Errorf("simulation: ResubmitLate %v must exceed the key retention %v", c.ResubmitLate, c.KeyRetention)
	case !(c.StatusChanges >= 0 && c.StatusChanges <= 1):
		return fmt.Errorf("simulation: StatusChanges %v is not between 0 and 1", c.StatusChanges)
	}
	return c.Faults.Validate()
}

// workerOptions returns the options of every worker of the run: those
// cmd/orderworker's run passes (mirrored here, since a main package cannot
// be imported), with the queue's lock duration, the worker's default
// message timeout (80% of it), settle timeout and retry backoff, and the
// one-second return of prefetched messages at shutdown. Only the periodic
// summary is off.
func (c Config) workerOptions(probe func(context.Context) error) worker.Options {
	return worker.Options{
		Concurrency:     c.Concurrency,
		LockDuration:    c.LockDuration,
		ShutdownGrace:   c.ShutdownGrace,
		SummaryInterval: -1,
		// As for *azservicebus.Receiver, which the queue model's receiver
		// stands for (its link credit included).
		ReceiveDrain: time.Second,
		Breaker:      worker.BreakerOptions{Threshold: breakerThreshold, Probe: probe},
		Telemetry:    c.Telemetry,
	}
}

// breakerThreshold is cmd/orderworker's: five consecutive deliveries failed
// by a dependency open the circuit breaker.
const breakerThreshold = 5

// Progress is a snapshot of a running simulation.
type Progress struct {
	Phase      string // "sending", "waiting out the window", "late sends", "draining", "resubmitting", "draining resubmissions", "stopping the relay", "checking" or "done"
	Sent       int    // messages enqueued so far, on every queue
	Settled    int64  // messages completed or dead-lettered so far
	Deliveries int64
	Elapsed    time.Duration // on the run's clock
}

// subscription is one queue of the run with its tracker: the order
// writers' queue, or an inbox consumer's.
type subscription struct {
	name  string
	out   *outlet
	plan  *plan // its faults; the order writers' is the run's plan
	tr    *tracker
	store *faultStore
}

// Run sends cfg.Orders orders, and their status changes, through the queue
// model to cfg.Workers real worker loops (package worker, unchanged, with
// the options cmd/orderworker gives it) running the consumer against the
// in-memory store and the payments service, with the faults of cfg.Faults,
// until every message is completed or dead-lettered; then it checks the
// invariants against the final state. Unless cfg.DisableInbox, two
// instances of the outbox relay publish the stored OrderAccepted events
// from the store's change feed to a topic, whose subscriptions, one per
// inbox consumer, each have workers and faults of their own.
//
// Everything runs on real time: time.Now and Go's timers, which the
// queues' locks, the workers' backoff, lock renewal, message deadline and
// shutdown grace, the store's TTLs and the payments service's key
// retention all follow. Run a seeded run inside a testing/synctest bubble
// to have them on virtual time; on the wall clock, use a compressed time
// scale (Config.CompressedTimeScale).
//
// The run has phases. The producer sends every order (with its planned
// immediate retries and status changes) while the workers consume; just
// after the duplicate-detection window it sends the late retries and the
// reused ids; then the run waits until every queue is empty (locks left by
// crashed deliveries lapse on their own) and the relay has checkpointed past
// every stored event. Then the operator resubmits dead-lettered order
// messages twice, ResubmitEarly and ResubmitLate after the queues drained,
// each followed by a drain. Last, the relays get SIGTERM and the
// subscriptions drain once more.
//
// progress, if not nil, is called at the start of each phase, every
// cfg.ProgressInterval and once at the end, never concurrently.
//
// Run returns an error only if the simulation itself failed (bad
// configuration, a worker that stopped, a stall, the time limit, ctx
// done); invariant violations are in the report: see Report.Verdict.
func Run(ctx context.Context, cfg Config, progress func(Progress)) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.TimeLimit, errTimeLimit)
	defer cancel()
	start := time.Now()
	hist := newHistory(start)
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
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

	mem := memstore.NewWithClock(time.Now)
	changed := make(chan struct{}, 1)
	names := []string{"orders"}
	if !cfg.DisableInbox {
		names = append(names, inboxConsumers[:]...)
	}
	subs := make([]*subscription, len(names))
	var topic *sbqueue.Topic
	if len(names) > 1 {
		var err error
		if topic, err = ns.CreateTopic(topicName, sbqueue.TopicOptions{
			RequiresDuplicateDetection: true, DuplicateDetectionWindow: cfg.DuplicateDetectionWindow,
		}); err != nil {
			return nil, err
		}
	}
	for i, name := range names {
		var q *sbqueue.Queue
		var err error
		if i == 0 {
			q, err = ns.CreateQueue(name, sbqueue.QueueOptions{
				LockDuration:               cfg.LockDuration,
				MaxDeliveryCount:           cfg.MaxDeliveryCount,
				RequiresDuplicateDetection: true,
				DuplicateDetectionWindow:   cfg.DuplicateDetectionWindow,
			})
		} else {
			// The inbox consumers' subscriptions of the topic the relay
			// publishes the OrderAccepted events to.
			q, err = topic.CreateSubscription(name, sbqueue.SubscriptionOptions{
				LockDuration: cfg.LockDuration, MaxDeliveryCount: cfg.MaxDeliveryCount,
			})
		}
		if err != nil {
			return nil, err
		}
		s := &subscription{name: name, out: &outlet{q: q, statuses: i == 0, hist: hist}, plan: p, tr: newTracker(changed)}
		if i == 0 {
			s.store = newFaultStore(mem, p, s.tr, outages, false)
		} else {
			s.out.consumer, s.plan = name, p.subscription(name)
			s.store = newFaultStore(mem, s.plan, s.tr, nil, true)
		}
		s.store.hist, s.store.queue, s.store.latency = hist, s.out.consumer, cfg.StoreLatency
		subs[i] = s
	}
	var svc *paymentservice.Service
	var gateway order.PaymentGateway
	var gw *faultGateway
	if !cfg.DisablePayments {
		var err error
		if svc, gw, err = newPayments(cfg.KeyRetention, cfg.PaymentLatency, p, subs[0].tr, hist); err != nil {
			return nil, err
		}
		gateway = gw
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	pool := &workerPool{cfg: cfg, logger: logger, gateway: gateway, hist: hist, restart: make(chan *workerSlot, 64)}
	for i, s := range subs {
		for w := range cfg.Workers {
			sl := &workerSlot{name: fmt.Sprintf("%s-worker-%d", names[i], w), sub: s, orders: i == 0, index: w}
			if err := pool.start(sl); err != nil {
				pool.stopAll()
				return nil, err
			}
			pool.slots = append(pool.slots, sl)
		}
	}
	go pool.supervise()
	var rr *relayRun
	if topic != nil {
		rr = newRelayRun(cfg, mem, topic, p, hist, changed, logger)
		rr.start(ctx)
	}

	d := &driver{cfg: cfg, subs: subs, changed: changed, start: start, progress: progress, relay: rr}
	d.setPhase("sending")
	stopProgress := d.startProgress()
	prod := newProducer([]*outlet{subs[0].out}, gen, p) // the inbox consumers get the relay's events
	err := prod.sendFirst(ctx, cfg.Orders)
	if err == nil && len(prod.late) > 0 {
		// The late sends go just after the window, while the workers
		// still work: a producer's retry after the window, as the
		// redelivery horizon assumes it.
		d.setPhase("waiting out the window")
		err = sleep(ctx, cfg.DuplicateDetectionWindow)
		if err == nil {
			d.setPhase("late sends")
			err = prod.sendLate(ctx)
		}
	}
	if err == nil {
		d.setPhase("draining")
		err = d.drain(ctx)
	}
	subs[0].store.endRecordOutages() // the store is whole again before any resubmission
	op := &operator{out: subs[0].out, plan: p, gw: gw, retention: cfg.KeyRetention, hist: hist}
	for round, delay := range []time.Duration{cfg.ResubmitEarly, cfg.ResubmitLate} {
		if err != nil || cfg.Faults.ResubmitEarly == 0 && cfg.Faults.ResubmitLate == 0 {
			break
		}
		if err = sleep(ctx, delay); err != nil {
			break
		}
		d.setPhase("resubmitting")
		var n int
		if n, err = op.resubmit(ctx, round+1); err == nil && n > 0 {
			d.setPhase("draining resubmissions")
			err = d.drain(ctx)
		}
	}
	if rr != nil {
		// The relays get SIGTERM; a paused one wakes first and publishes
		// its page, which the subscriptions then drain.
		d.setPhase("stopping the relay")
		rerr := rr.stop()
		d.relay = nil
		if err == nil {
			err = rerr
		}
		if err == nil {
			d.setPhase("draining")
			err = d.drain(ctx)
		}
	}
	werr := pool.stopAll()
	d.setPhase("checking")
	stopProgress()
	if err == nil {
		err = werr
	}
	for _, s := range subs {
		if _, unmatched := s.tr.outcomes(); err == nil && unmatched > 0 {
			err = fmt.Errorf("%w: %d of them", errUnmatched, unmatched)
		}
	}
	if err != nil && context.Cause(ctx) == errTimeLimit {
		err = fmt.Errorf("%w (%v)", errTimeLimit, cfg.TimeLimit)
	}

	state := State{Sent: subs[0].out.sent, Queue: subs[0].out.q.Snapshot(), Documents: mem.Items(), Now: time.Now(), MarkerTTL: cfg.MarkerTTL,
		PaymentRecordOutages: subs[0].store.recordOutages()}
	for _, s := range subs {
		state.Untouched = append(state.Untouched, s.tr.untouched(s.out.consumer)...)
	}
	rep.Restarts = pool.restarts
	if rr != nil {
		sent, _ := rr.out.snapshot()
		for _, s := range subs[1:] {
			s.out.sent = sent // each subscription got a copy of everything the topic accepted
			state.Inbox = append(state.Inbox, Subscription{Consumer: s.out.consumer, Sent: sent, Queue: s.out.q.Snapshot()})
		}
		rep.Relay = rr.report()
	}
	if svc != nil && err == nil {
		state.Payments, err = ledger(svc, state.Documents)
		if err == nil {
			rep.Payments.Charges = svc.Charges()
		}
	}
	rep.fill(&state, prod, subs, op)
	rep.Elapsed = time.Since(start)
	for _, id := range rep.OrderIDs(maxHistories) {
		if ev := hist.of(id); len(ev) > 0 {
			rep.Histories = append(rep.Histories, OrderHistory{OrderID: id, Events: ev})
		}
	}
	if progress != nil {
		d.report(d.snapshot("done"))
	}
	if err != nil {
		return rep, fmt.Errorf("simulation seed %d: %w", cfg.Seed, err)
	}
	return rep, nil
}

// maxHistories bounds the order histories a failing report carries.
const maxHistories = 10

// errTimeLimit ends a run that took longer than Config.TimeLimit.
var errTimeLimit = errors.New("simulation: time limit reached")

// sleep waits d on the run's clock, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// fill completes the report from the final state and the run's records.
func (r *Report) fill(s *State, prod *producer, subs []*subscription, op *operator) {
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
	r.Resubmissions = op.counts
	r.Accounting = account(s.Sent, s.Queue)
	for i, in := range r.Inbox {
		r.Inbox[i].Accounting = account(s.Inbox[i].Sent, s.Inbox[i].Queue)
		_ = in
	}
}

// driver moves the run along: it waits until the queues are empty, and it
// reports progress. It never moves a clock: locks lapse, backoffs end and
// keys expire on their own timers.
type driver struct {
	cfg      Config
	subs     []*subscription
	relay    *relayRun     // nil without inbox consumers, or once stopped
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

// empty reports whether every queue is empty (nothing available, nothing
// locked, which includes messages sent on link credit) and no delivery is
// in flight, and how many messages were settled so far.
func (d *driver) empty() (bool, int64) {
	empty, settled := true, int64(0)
	for _, s := range d.subs {
		snap := s.out.q.Snapshot()
		settled += snap.Completed + snap.DeadLettered + snap.Abandoned
		if len(snap.Active) > 0 || len(snap.Locked) > 0 || s.tr.busy() {
			empty = false
		}
	}
	if empty && d.relay != nil && !d.relay.caughtUp(context.Background()) {
		empty = false // an event stored is not yet published
	}
	return empty, settled
}

// drain returns when every queue is empty: every message completed or
// dead-lettered. It looks whenever a settlement returns, and every half
// lock duration, since a message can also be dead-lettered by its lock
// lapsing. It fails if nothing is settled for StallTimeout.
func (d *driver) drain(ctx context.Context) error {
	tick := time.NewTicker(d.cfg.LockDuration / 2)
	defer tick.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		empty, settled := d.empty()
		if empty {
			return nil
		}
		if settled != last {
			last, lastAt = settled, time.Now()
		} else if time.Since(lastAt) >= d.cfg.StallTimeout {
			var inflight, active, locked int
			for _, s := range d.subs {
				snap := s.out.q.Snapshot()
				active, locked = active+len(snap.Active), locked+len(snap.Locked)
				s.tr.mu.Lock()
				inflight += s.tr.inflight
				s.tr.mu.Unlock()
			}
			return fmt.Errorf("%w for %v: %d messages available, %d locked, %d deliveries in flight",
				errStalled, d.cfg.StallTimeout, active, locked, inflight)
		}
		select {
		case <-d.changed:
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

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
	hist    *history
	restart chan *workerSlot

	mu       sync.Mutex
	slots    []*workerSlot
	stopping bool
	restarts int
}

// maxRestartsPerWorker bounds the restarts of one worker slot.
const maxRestartsPerWorker = 2

// start starts a worker in sl. Requires that sl runs none.
func (p *workerPool) start(sl *workerSlot) error {
	s := p.sub(sl)
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
	fr := &faultReceiver{inner: r, q: s.out.q, plan: s.plan, tr: s.tr, hist: p.hist, queue: s.out.consumer}
	if sl.orders {
		fr.afterSettle = func() { p.settled(sl) }
	}
	opts := p.cfg.workerOptions(s.store.Ping)
	opts.Telemetry.Queue = s.name
	wk, err := worker.New(fr, &trackingHandler{inner: h, tr: s.tr, hist: p.hist, queue: s.out.consumer},
		p.logger.With("queue", s.name, "worker", sl.index, "generation", sl.generation), opts)
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

func (p *workerPool) sub(sl *workerSlot) *subscription { return sl.sub }

// settled counts a settlement of sl's worker and asks for its restart if
// the plan says so. It never blocks: it runs on a handler goroutine.
func (p *workerPool) settled(sl *workerSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl.settled++
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
