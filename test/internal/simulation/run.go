package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

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
	tm := newTiming(cfg, start)
	stopProbe, probeDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(probeDone); tm.probe(stopProbe) }()
	defer func() {
		select {
		case <-stopProbe:
		default:
			close(stopProbe)
		}
		<-probeDone
	}()
	// The compressed time scale (CompressedTimeScale: 1 s locks and windows) is below
	// Service Bus's minimums; a run at production scale is within them.
	ns := sbqueue.NewNamespaceWith(sbqueue.RealClock(), sbqueue.NamespaceOptions{AllowUnrealisticTimings: true})
	p := newPlan(cfg.Seed, cfg.Faults, cfg.MaxFaultsPerMessage)
	if !cfg.DisableStatusChanges {
		p.statuses = cfg.StatusChanges
	}
	gen := ordergen.New(cfg.Seed, "sim")
	rep := &Report{Config: cfg, Orders: cfg.Orders}
	outages := make(map[string]bool)
	poison := make(map[string]poisonKind)
	poisoned := make(map[string]bool)
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
		if op.poison != notPoison {
			poison[gen.ID(i)], poisoned[gen.ID(i)] = op.poison, true
		}
		if op.statuses > 0 {
			rep.Status.Orders++
			if op.statusBefore > 0 || !slices.IsSorted(op.statusOrder) {
				rep.Status.Shuffled++
			}
		}
	}
	rep.OutageOrders = len(outages)
	rep.PoisonOrders = len(poison)
	p.spared = poisoned

	mem := memstore.NewWithClock("/orderId", time.Now)
	if cfg.Faults.ReplicaLag > 0 {
		mem.SetReplicaLag(memstore.ReplicaLag{Versions: replicaLagVersions, Seed: cfg.Seed, Window: cfg.LockDuration / replicaLagWindowDiv})
	}
	outs := newOutages(p, cfg.OutageDuration, start, hist)
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
			s.store.poison = poison
		} else {
			s.out.consumer, s.plan = name, p.subscription(name)
			s.store = newFaultStore(mem, s.plan, s.tr, nil, true)
		}
		s.store.hist, s.store.queue, s.store.latency, s.store.outs = hist, s.out.consumer, cfg.StoreLatency, outs
		subs[i] = s
	}
	var svc *paymentservice.Service
	var gateway order.PaymentGateway
	var gw *faultGateway
	if !cfg.DisablePayments {
		var err error
		if svc, gw, err = newPayments(cfg.KeyRetention, cfg.PaymentLatency, p, subs[0].tr, hist, tm, outs); err != nil {
			return nil, err
		}
		gateway = gw
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	sched := newScheduleFaults(p)
	pool := &workerPool{cfg: cfg, logger: logger, gateway: gateway, paymentsProbe: gw, hist: hist, timing: tm, restart: make(chan *workerSlot, 64),
		outages: outs, schedule: sched}
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
	prod.orderDelay = cfg.OrderDelay
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
	close(stopProbe)
	<-probeDone
	rep.Timing = tm.report()
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
		PaymentRecordOutages: subs[0].store.recordOutages(), PoisonOrders: poisoned,
		OrderOutages: outages, Outages: outs.report(), Deliveries: make(map[string]map[int64]Span)}
	for _, s := range subs {
		state.Untouched = append(state.Untouched, s.tr.untouched(s.out.consumer)...)
		state.Deliveries[s.out.consumer] = s.tr.spans()
	}
	rep.BeforeSuccess = BeforeSuccessReport{ScheduleFailures: sched.count(), Outages: state.Outages}
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
	if cfg.Audit && err == nil {
		queues := []sbqueue.Snapshot{state.Queue}
		for _, sub := range state.Inbox {
			queues = append(queues, sub.Queue)
		}
		excused := make(map[string]bool)
		for id := range outages {
			excused[id] = true
		}
		for id := range poisoned {
			excused[id] = true
		}
		rep.Audit, err = auditStore(ctx, cfg, mem, svc, rr != nil, queues, excused)
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
