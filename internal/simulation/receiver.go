package simulation

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// faultReceiver is a worker.Receiver around the queue model's receiver that
// injects the plan's delivery faults:
//
//   - LockExpiry: as a delivery is handed to the worker its lock lapses
//     (sbqueue.Queue.ExpireLock), so the message is available again while the
//     handler runs and a competing handler may receive it concurrently; the
//     first handler's settlement then fails with lock lost.
//   - Crash: the worker dies between handling and settling. The settlement
//     never reaches the broker, the call fails, and the message stays locked
//     until its lock lapses, which the driver brings about by moving the
//     virtual clock once nothing else can happen.
//   - LostSettlement: the settlement is not applied and is reported as
//     azservicebus.CodeLockLost; the lock ends at once, so the broker
//     redelivers the message.
//   - PaymentCrash: the worker died in its handler, after the capture call
//     and before the payment record was marked completed (see faultStore);
//     its settlement never reaches the broker, as for Crash.
//
// Settlement faults are drawn for every kind of settlement (complete,
// abandon, dead-letter), and charged to the message's order (its
// CorrelationId), which its status changes share.
//
// It also models the worker's retry backoff where the backoff is the point:
// a delivery abandoned because a status change arrived before its order
// (order.ReasonOrderNotYetCreated) or because another delivery holds the
// payment claim (order.ReasonPaymentInProgress) is not abandoned at once,
// which on the virtual clock would redeliver it before anything changed and
// burn its deliveries; its lock is left to lapse instead, so the broker
// redelivers it one lock duration later, after the claim's lease. Like *azservicebus.Receiver, ReceiveMessages must
// not be called concurrently; the other methods may be.
type faultReceiver struct {
	inner *sbqueue.Receiver
	q     *sbqueue.Queue
	plan  *plan
	tr    *tracker
}

var _ worker.Receiver = (*faultReceiver)(nil)

// errCrashed is what a settlement returns when the worker "died" before it:
// in a real crash the call would never return, and the broker sees the same.
var errCrashed = errors.New("simulated crash: the worker died before the settlement reached the broker")

// ReceiveMessages implements worker.Receiver.
func (r *faultReceiver) ReceiveMessages(ctx context.Context, maxMessages int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	msgs, err := r.inner.ReceiveMessages(ctx, maxMessages, o)
	for _, m := range msgs {
		d := &delivery{messageID: m.MessageID, orderID: m.MessageID, deliveryCount: m.DeliveryCount, token: m.LockToken}
		if m.CorrelationID != nil {
			d.orderID = *m.CorrelationID
		}
		if m.SequenceNumber != nil {
			d.seq = *m.SequenceNumber
		}
		r.tr.received(d, m.Body)
		if r.plan.inject(faultLockExpiry, d.orderID, uint64(d.seq), uint64(d.deliveryCount)) && r.q.ExpireLock(d.token) {
			r.tr.count(func(c *FaultCounts) { c.LockExpiry++ })
			r.tr.mu.Lock()
			d.lockExpired = true
			r.tr.mu.Unlock()
		}
	}
	return msgs, err
}

// CompleteMessage implements worker.Receiver.
func (r *faultReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error {
	return r.settle(m, false, func() error { return r.inner.CompleteMessage(ctx, m, o) })
}

// AbandonMessage implements worker.Receiver.
func (r *faultReceiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	return r.settle(m, true, func() error { return r.inner.AbandonMessage(ctx, m, o) })
}

// DeadLetterMessage implements worker.Receiver.
func (r *faultReceiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	return r.settle(m, false, func() error { return r.inner.DeadLetterMessage(ctx, m, o) })
}

// RenewMessageLock implements worker.Receiver. It injects nothing.
func (r *faultReceiver) RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error {
	return r.inner.RenewMessageLock(ctx, m, o)
}

// settle applies the plan's settlement fault to m's settlement, or applies
// the settlement.
func (r *faultReceiver) settle(m *azservicebus.ReceivedMessage, abandon bool, apply func() error) error {
	d := r.tr.byLockToken(m.LockToken)
	if d == nil { // not received through this simulation: nothing to inject
		return apply()
	}
	defer r.tr.settled(d)
	r.tr.mu.Lock()
	expired, crashed := d.lockExpired, d.crashed
	backoff := abandon && !expired && d.handled && d.result.Outcome == order.Transient &&
		(d.result.Reason == order.ReasonOrderNotYetCreated || d.result.Reason == order.ReasonPaymentInProgress)
	d.backoff = backoff
	r.tr.mu.Unlock()
	switch {
	case crashed: // the worker died in the handler: nothing reaches the broker
		return errCrashed
	case expired: // the settlement fails anyway: spend no fault on it
		return apply()
	case backoff: // the lock lapses instead: see the type's comment
		return nil
	}
	seq, dc := uint64(d.seq), uint64(d.deliveryCount)
	switch {
	case r.plan.inject(faultCrash, d.orderID, seq, dc):
		r.tr.count(func(c *FaultCounts) { c.Crash++ })
		r.tr.mu.Lock()
		d.crashed = true
		r.tr.mu.Unlock()
		return errCrashed
	case r.plan.inject(faultLostSettlement, d.orderID, seq, dc):
		r.tr.count(func(c *FaultCounts) { c.LostSettlement++ })
		r.tr.mu.Lock()
		d.lostSettlement = true
		r.tr.mu.Unlock()
		r.q.ExpireLock(d.token)
		return &azservicebus.Error{Code: azservicebus.CodeLockLost}
	}
	return apply()
}

// trackingHandler hands each delivery to the consumer under test with the
// delivery in its context, where the fault store finds it, and records the
// result.
type trackingHandler struct {
	inner worker.Handler
	tr    *tracker
}

var _ worker.Handler = (*trackingHandler)(nil)

// Process implements worker.Handler.
func (h *trackingHandler) Process(ctx context.Context, m order.Message) order.Result {
	d := h.tr.handlerStarted(m.Body)
	res := h.inner.Process(withDelivery(ctx, d), m)
	if d != nil {
		h.tr.handled(d, res)
	}
	return res
}
