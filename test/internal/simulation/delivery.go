package simulation

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// delivery is what the simulation knows about one delivery of one queued
// copy of a message. messageID, seq, deliveryCount and token are set before
// the delivery is registered and never change; the other fields are guarded
// by tracker.mu.
type delivery struct {
	messageID     string
	orderID       string // the message's CorrelationId: the order its faults are charged to
	seq           int64  // the copy's sequence number
	deliveryCount uint32
	token         [16]byte
	received      uint64 // tracker tick at receipt
	settled       uint64 // tracker tick when its settlement returned; 0 while in flight
	receivedAt    time.Time
	settledAt     time.Time // zero while in flight, or if it never settled (a crash)

	lockExpired    bool // LockExpiry struck it
	crashed        bool // Crash struck its settlement
	lostSettlement bool // LostSettlement struck its settlement
	ambiguous      bool // its write committed and was reported as a timeout
	paymentCrash   bool // PaymentCrash struck after its capture: it dies at its next payment record write
	started        bool // the handler started
	handled        bool // the handler returned
	result         idempotent.Result
}

// tracker joins the three views of a delivery the simulation has: the
// receiver's (token, sequence number), the handler's (the idempotent.Message) and
// the store's (the write). It also tells the driver when a delivery ends.
// It is safe for concurrent use.
type tracker struct {
	mu         sync.Mutex
	tick       uint64
	all        []*delivery
	byToken    map[[16]byte]*delivery
	byBody     map[*byte]*delivery // deliveries whose handler has not started
	inflight   int                 // received, settlement not yet returned
	creators   map[string]*delivery
	unmatched  int // handler calls the tracker could not match to a delivery
	changed    chan struct{}
	faultCount FaultCounts
	payCount   paymentCounts
}

// newTracker returns a tracker that signals changed (buffered, shared by the
// trackers of one run) whenever a settlement returns.
func newTracker(changed chan struct{}) *tracker {
	return &tracker{
		byToken:  make(map[[16]byte]*delivery),
		byBody:   make(map[*byte]*delivery),
		creators: make(map[string]*delivery),
		changed:  changed,
	}
}

// signal wakes the driver. Requires t.mu.
func (t *tracker) signal() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// received registers a delivery. body is the delivery's own copy of the
// message body: the queue model copies the body for every delivery and the
// worker hands that slice to its handler unchanged, so the address of its
// first byte identifies the delivery when the handler runs.
func (t *tracker) received(d *delivery, body []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tick++
	d.received, d.receivedAt = t.tick, time.Now()
	t.all = append(t.all, d)
	t.byToken[d.token] = d
	if len(body) > 0 {
		t.byBody[&body[0]] = d
	}
	t.inflight++
}

// handlerStarted returns the delivery whose body is body, or nil.
func (t *tracker) handlerStarted(body []byte) *delivery {
	if len(body) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.byBody[&body[0]]
	if d == nil {
		t.unmatched++
		return nil
	}
	delete(t.byBody, &body[0])
	d.started = true
	return d
}

// untouched returns the deliveries whose handler never started, for the
// subscription of consumer ("" for the order writers').
func (t *tracker) untouched(consumer string) []Untouched {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Untouched
	for _, d := range t.all {
		if !d.started {
			out = append(out, Untouched{Consumer: consumer, MessageID: d.messageID, OrderID: d.orderID, Seq: d.seq, DeliveryCount: d.deliveryCount})
		}
	}
	return out
}

func (t *tracker) handled(d *delivery, res idempotent.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.handled = true
	d.result = res
}

// wrote records that d's create committed the order orderID.
func (t *tracker) wrote(d *delivery, orderID string, ambiguous bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ambiguous {
		t.faultCount.Ambiguous++
	}
	if d == nil {
		return
	}
	d.ambiguous = ambiguous
	if t.creators[orderID] == nil {
		t.creators[orderID] = d
	}
}

// settled records the end of d: its settlement call returned, or its lock
// renewal found the lock lost (the worker then settles nothing). A second
// call for d does nothing.
func (t *tracker) settled(d *delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.settled != 0 {
		return
	}
	t.tick++
	d.settled, d.settledAt = t.tick, time.Now()
	delete(t.byToken, d.token)
	t.inflight--
	t.signal()
}

// Span is when the deliveries of one queued message happened: from the
// receipt of its first to the end of its last (its receipt, if it never
// settled), on the run's clock.
type Span struct{ First, Last time.Time }

// spans returns the span of the deliveries of each queued copy, by its
// sequence number.
func (t *tracker) spans() map[int64]Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int64]Span)
	for _, d := range t.all {
		last := d.receivedAt
		if d.settledAt.After(last) {
			last = d.settledAt
		}
		sp, ok := out[d.seq]
		if !ok || d.receivedAt.Before(sp.First) {
			sp.First = d.receivedAt
		}
		if last.After(sp.Last) {
			sp.Last = last
		}
		out[d.seq] = sp
	}
	return out
}

func (t *tracker) byLockToken(token [16]byte) *delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byToken[token]
}

func (t *tracker) count(f func(*FaultCounts)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.faultCount)
}

func (t *tracker) countPayment(f func(*paymentCounts)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.payCount)
}

// busy reports whether a delivery is in flight.
func (t *tracker) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inflight > 0
}

// markPaymentCrash records that d dies before its payment record is marked
// completed.
func (t *tracker) markPaymentCrash(d *delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.paymentCrash = true
	t.faultCount.PaymentCrash++
}

// diesAtPaymentWrite reports whether d is to die at this payment record
// write, and if so marks it crashed: its settlement will not reach the
// broker either.
func (t *tracker) diesAtPaymentWrite(d *delivery) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !d.paymentCrash {
		return false
	}
	d.crashed = true
	return true
}

// attribute explains every Duplicate outcome by why the message was
// delivered again although its order existed. A delivery of another queued
// copy than the one whose delivery created the order is a producer retry.
// Otherwise it is a redelivery, explained by the delivery before it
// (DeliveryCount one lower) of the same copy: ended by an ambiguous write, a
// crash before settling, a lost lock or settlement, or an abandon after a
// transient failure. A delivery handled while the delivery that created the
// order was also being handled (one of them had its lock lapse) is a
// concurrent race.
func (t *tracker) attribute() DuplicateCauses {
	t.mu.Lock()
	defer t.mu.Unlock()
	type key struct {
		seq   int64
		count uint32
	}
	bySeq := make(map[key]*delivery, len(t.all))
	for _, d := range t.all {
		bySeq[key{d.seq, d.deliveryCount}] = d
	}
	var c DuplicateCauses
	for _, d := range t.all {
		if !d.handled || d.result.Outcome != idempotent.Duplicate {
			continue
		}
		creator := t.creators[d.result.Key]
		prev := bySeq[key{d.seq, d.deliveryCount - 1}]
		switch {
		case creator == nil || creator == d:
			c.Unexplained++
		case creator.seq != d.seq:
			c.ProducerRetry++
		case overlap(creator, d):
			c.ConcurrentRace++
		case prev == nil:
			c.Unexplained++
		case prev.ambiguous:
			c.AmbiguousWrite++
		case prev.crashed:
			c.CrashRecovery++
		case prev.lockExpired || prev.lostSettlement:
			c.LockLoss++
		case prev.handled && prev.result.Outcome == idempotent.Transient:
			c.TransientRetry++
		default:
			c.Unexplained++
		}
	}
	return c
}

// overlap reports whether deliveries a and b were in flight at the same
// time. Requires t.mu.
func overlap(a, b *delivery) bool {
	end := func(d *delivery) uint64 {
		if d.settled == 0 {
			return ^uint64(0)
		}
		return d.settled
	}
	return a.received < end(b) && b.received < end(a)
}

// outcomes counts the handlers' results.
func (t *tracker) outcomes() (o Outcomes, unmatched int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.all {
		if !d.handled {
			continue
		}
		switch d.result.Outcome {
		case idempotent.Created:
			o.Created++
		case idempotent.Duplicate:
			o.Duplicate++
		case idempotent.Mismatch:
			o.Mismatch++
		case idempotent.Invalid:
			o.Invalid++
		case idempotent.Transient:
			o.Transient++
			switch d.result.Reason {
			case order.ReasonOrderNotYetCreated:
				o.BeforeOrder++
			case order.ReasonPaymentInProgress:
				o.PaymentBusy++
			case order.ReasonPaymentUnavailable:
				o.PaymentUnavailable++
			}
		case idempotent.Applied:
			o.Applied++
		case idempotent.Stale:
			o.Stale++
		}
	}
	return o, t.unmatched
}

// deliveryKey carries the delivery being handled from the handler wrapper to
// the store wrapper.
type deliveryKey struct{}

func withDelivery(ctx context.Context, d *delivery) context.Context {
	if d == nil {
		return ctx
	}
	return context.WithValue(ctx, deliveryKey{}, d)
}

func deliveryFrom(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// errUnmatched is reported when handler calls could not be matched to
// deliveries, which would make the duplicate attribution incomplete.
var errUnmatched = errors.New("simulation: handler calls not matched to deliveries (did the worker stop passing the delivery's own body to its handler?)")
