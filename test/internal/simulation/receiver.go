package simulation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// faultReceiver is a worker.Receiver around the queue model's receiver that
// injects the plan's delivery faults:
//
//   - LockExpiry: as a delivery is handed to the worker its lock lapses
//     (sbqueue.Queue.ExpireLock), as when a handler overruns its lock, so
//     the message is available again while the handler runs and a competing
//     handler may receive it concurrently; the first handler's lock renewal
//     or settlement then fails with lock lost.
//   - Crash: the worker dies between handling and settling. The settlement
//     never reaches the broker, the call fails, and the message stays locked
//     until its lock lapses on its own timer.
//   - LostSettlement: the settlement is not applied and is reported as
//     azservicebus.CodeLockLost; the lock ends at once, so the broker
//     redelivers the message.
//   - PaymentCrash: the worker died in its handler, after the capture call
//     and before the payment record was marked completed (see faultStore);
//     its settlement never reaches the broker, as for Crash.
//
// A delivery that crashed renews nothing: its renewals fail (not with lock
// lost), as a dead process's would never be sent. Settlement faults are
// drawn for every kind of settlement (complete, abandon, dead-letter), and
// charged to the message's order (its CorrelationId), which its status
// changes share. Abandons reach the broker as the worker sends them, after
// its real retry backoff.
//
// Like *azservicebus.Receiver, ReceiveMessages must not be called
// concurrently; the other methods may be.
type faultReceiver struct {
	inner *sbqueue.Receiver
	q     *sbqueue.Queue
	plan  *plan
	tr    *tracker
	hist  *history
	queue string // the inbox consumer's name, "" for the order writers
	// afterSettle, if set, is called after every settlement call returns.
	afterSettle func()
	// timing records the lock losses no fault planned; lock is the queue's
	// lock duration.
	timing *timing
	lock   time.Duration
}

var _ worker.Receiver = (*faultReceiver)(nil)

// errCrashed is what a settlement or renewal returns when the worker "died"
// before it: in a real crash the call would never be made, and the broker
// sees the same.
var errCrashed = errors.New("simulated crash: the worker died before the call reached the broker")

// ReceiveMessages implements worker.Receiver.
func (r *faultReceiver) ReceiveMessages(ctx context.Context, maxMessages int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	msgs, err := r.inner.ReceiveMessages(ctx, maxMessages, o)
	for _, m := range msgs {
		d := &delivery{messageID: m.MessageID, orderID: m.MessageID, deliveryCount: m.DeliveryCount, token: m.LockToken}
		if m.CorrelationID != nil {
			d.orderID = *m.CorrelationID
		} else if id, ok := m.ApplicationProperties["orderId"].(string); ok {
			d.orderID = id // the relay's events name their order so
		}
		if m.SequenceNumber != nil {
			d.seq = *m.SequenceNumber
		}
		r.tr.received(d, m.Body)
		r.hist.add(d.orderID, r.queue, "delivered %s #%d, delivery count %d, lock %s, locked until +%v", d.messageID, d.seq, d.deliveryCount,
			shortToken(d.token), time.Until(deref(m.LockedUntil)).Round(time.Millisecond))
		if r.plan.inject(faultLockExpiry, d.orderID, uint64(d.seq), uint64(d.deliveryCount)) && r.q.ExpireLock(d.token) {
			r.tr.count(func(c *FaultCounts) { c.LockExpiry++ })
			r.tr.mu.Lock()
			d.lockExpired = true
			r.tr.mu.Unlock()
			r.hist.add(d.orderID, r.queue, "fault: lock %s lapsed as the handler starts", shortToken(d.token))
		}
	}
	return msgs, err
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// CompleteMessage implements worker.Receiver.
func (r *faultReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	return r.settle(m, "complete", func() error { return r.inner.CompleteMessage(ctx, m, o) })
}

// AbandonMessage implements worker.Receiver.
func (r *faultReceiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	return r.settle(m, "abandon", func() error { return r.inner.AbandonMessage(ctx, m, o) })
}

// DeadLetterMessage implements worker.Receiver.
func (r *faultReceiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	what := "dead-letter"
	if o != nil && o.Reason != nil {
		what += " (" + *o.Reason + ")"
	}
	return r.settle(m, what, func() error { return r.inner.DeadLetterMessage(ctx, m, o) })
}

// RenewMessageLock implements worker.Receiver. A renewal that finds the
// lock lost ends the delivery for the tracker: the worker then cancels the
// handler and settles nothing.
func (r *faultReceiver) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error {
	d := r.tr.byLockToken(m.LockToken)
	if d == nil {
		return r.inner.RenewMessageLock(ctx, m, o)
	}
	r.timing.at(StallSettle, d.orderID)
	r.tr.mu.Lock()
	crashed, planned := d.crashed, d.lockExpired || d.lostSettlement
	r.tr.mu.Unlock()
	if crashed {
		return errCrashed
	}
	lockStart := deref(m.LockedUntil).Add(-r.lock)
	err := r.inner.RenewMessageLock(ctx, m, o)
	switch {
	case err == nil:
		r.hist.add(d.orderID, r.queue, "renewed lock %s of #%d until +%v", shortToken(d.token), d.seq, time.Until(deref(m.LockedUntil)).Round(time.Millisecond))
	case errors.Is(err, sbqueue.ErrLockLost):
		r.hist.add(d.orderID, r.queue, "renewal of lock %s of #%d: lock lost; the worker cancels the handler and settles nothing", shortToken(d.token), d.seq)
		if !planned {
			r.timing.breach(BreachLock, d.orderID, r.queue, lockStart)
		}
		r.tr.settled(d)
	}
	return err
}

// settle applies the plan's settlement fault to m's settlement, or applies
// the settlement.
func (r *faultReceiver) settle(m *azservicebus.ReceivedMessage, what string, apply func() error) error {
	d := r.tr.byLockToken(m.LockToken)
	if d == nil { // not received through this simulation: nothing to inject
		return apply()
	}
	defer func() {
		r.tr.settled(d)
		if r.afterSettle != nil {
			r.afterSettle()
		}
	}()
	r.timing.at(StallSettle, d.orderID)
	r.tr.mu.Lock()
	expired, crashed, started := d.lockExpired, d.crashed, d.started
	r.tr.mu.Unlock()
	if !started {
		what += " (no handler saw this delivery)"
	}
	logged := func(err error) error {
		res := "ok"
		if err != nil {
			res = err.Error()
		}
		r.hist.add(d.orderID, r.queue, "settle #%d lock %s: %s: %s", d.seq, shortToken(d.token), what, res)
		return err
	}
	switch {
	case crashed: // the worker died in the handler: nothing reaches the broker
		return logged(errCrashed)
	case expired: // the settlement fails anyway: spend no fault on it
		return logged(apply())
	}
	seq, dc := uint64(d.seq), uint64(d.deliveryCount)
	switch {
	case r.plan.inject(faultCrash, d.orderID, seq, dc):
		r.tr.count(func(c *FaultCounts) { c.Crash++ })
		r.tr.mu.Lock()
		d.crashed = true
		r.tr.mu.Unlock()
		return logged(fmt.Errorf("fault: %w", errCrashed))
	case r.plan.inject(faultLostSettlement, d.orderID, seq, dc):
		r.tr.count(func(c *FaultCounts) { c.LostSettlement++ })
		r.tr.mu.Lock()
		d.lostSettlement = true
		r.tr.mu.Unlock()
		r.q.ExpireLock(d.token)
		return logged(&azservicebus.Error{Code: azservicebus.CodeLockLost})
	}
	lockStart := deref(m.LockedUntil).Add(-r.lock)
	err := apply()
	if errors.Is(err, sbqueue.ErrLockLost) { // no fault ended this lock: it lapsed
		r.timing.breach(BreachLock, d.orderID, r.queue, lockStart)
	}
	return logged(err)
}

// trackingHandler hands each delivery to the consumer under test with the
// delivery in its context, where the fault store finds it, and records the
// result.
type trackingHandler struct {
	inner worker.Handler
	tr    *tracker
	hist  *history
	queue string
}

var _ worker.Handler = (*trackingHandler)(nil)

// Process implements worker.Handler.
func (h *trackingHandler) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	d := h.tr.handlerStarted(m.Body)
	res := h.inner.Process(withDelivery(ctx, d), m)
	if d != nil {
		h.tr.handled(d, res)
		line := fmt.Sprintf("handled #%d (count %d): %s", d.seq, d.deliveryCount, res.Outcome)
		if res.Reason != "" {
			line += " " + res.Reason
		}
		if res.Description != "" {
			line += ": " + res.Description
		} else if res.Err != nil {
			line += ": " + res.Err.Error()
		}
		h.hist.add(d.orderID, h.queue, "%s", line)
	}
	return res
}
