package workertest

import (
	"context"
	"errors"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Settlement is what the fake receiver recorded for one settlement call.
type Settlement struct {
	// Kind is complete, abandon or deadletter, or one of them with
	// "-failed" appended when the call failed.
	Kind string
	// Reason and Desc are a dead-letter's reason and description; Desc
	// also holds the error of a settlement refused for its context.
	Reason, Desc string
}

// Receiver is a fake worker.Receiver: it hands out queued messages and
// records settlements and lock renewals. Its hooks inject failures. It is
// safe for concurrent use, like the SDK's receiver; set the hook fields
// before the worker runs.
type Receiver struct {
	msgs chan *azservicebus.ReceivedMessage

	mu          sync.Mutex
	settled     map[string][]Settlement
	renewals    map[string]int
	receiveErrs []error // returned, in order, by the next ReceiveMessages calls
	maxAsked    int
	callsDone   int // ReceiveMessages calls made with a context already done
	calls       int // ReceiveMessages calls made

	// CompleteErr, when set, fails the completion of the messages for
	// which it returns an error.
	CompleteErr func(m *azservicebus.ReceivedMessage) error
	// RenewErr, when set, fails the lock renewals for which it returns
	// an error.
	RenewErr func(m *azservicebus.ReceivedMessage) error
	// OnSettle, when set, is called after every settlement call is
	// recorded, from the goroutine that made it.
	OnSettle func()
}

var _ worker.Receiver = (*Receiver)(nil)

// NewReceiver returns a receiver holding a message for each id (its body
// the id, its delivery count 1), with room for 1,000 queued messages.
func NewReceiver(ids ...string) *Receiver {
	return NewReceiverSize(1000, ids...)
}

// NewReceiverSize is NewReceiver with room for size queued messages.
func NewReceiverSize(size int, ids ...string) *Receiver {
	r := &Receiver{
		msgs:     make(chan *azservicebus.ReceivedMessage, size),
		settled:  map[string][]Settlement{},
		renewals: map[string]int{},
	}
	for _, id := range ids {
		r.Add(id)
	}
	return r
}

// Add queues a message with the given id as its id and body, delivery
// count 1.
func (r *Receiver) Add(id string) {
	r.Send(&azservicebus.ReceivedMessage{MessageID: id, Body: []byte(id), DeliveryCount: 1})
}

// Send queues m as it is. It blocks while the queue is full.
func (r *Receiver) Send(m *azservicebus.ReceivedMessage) {
	r.msgs <- m
}

// Pending returns how many queued messages no receive has handed out.
func (r *Receiver) Pending() int { return len(r.msgs) }

// FailReceives makes the next len(errs) ReceiveMessages calls return
// errs, in order.
func (r *Receiver) FailReceives(errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.receiveErrs = append(r.receiveErrs, errs...)
}

// ReceiveMessages hands out up to n queued messages, waiting for the
// first one until ctx ends.
func (r *Receiver) ReceiveMessages(ctx context.Context, n int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	r.mu.Lock()
	r.calls++
	r.maxAsked = max(r.maxAsked, n)
	if ctx.Err() != nil {
		r.callsDone++
	}
	if len(r.receiveErrs) > 0 {
		err := r.receiveErrs[0]
		r.receiveErrs = r.receiveErrs[1:]
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*azservicebus.ReceivedMessage
	select {
	case m := <-r.msgs:
		if err := ctx.Err(); err != nil {
			// Like the SDK, a receive whose context ended hands out
			// nothing that arrived after the end.
			r.msgs <- m
			return nil, err
		}
		out = append(out, m)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(out) < n {
		select {
		case m := <-r.msgs:
			out = append(out, m)
		default:
			return out, nil
		}
	}
	return out, nil
}

// ReceiveCalls returns how many ReceiveMessages calls were made so far.
func (r *Receiver) ReceiveCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// CallsDone returns how many ReceiveMessages calls were made with a
// context already done.
func (r *Receiver) CallsDone() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.callsDone
}

// MaxAsked returns the most messages one ReceiveMessages call asked for.
func (r *Receiver) MaxAsked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxAsked
}

// Renewals returns how many lock renewals the message with the given id
// had, failed ones included.
func (r *Receiver) Renewals(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewals[id]
}

// Settlements returns the settlement calls made for the message with the
// given id, in order.
func (r *Receiver) Settlements(id string) []Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Settlement(nil), r.settled[id]...)
}

func (r *Receiver) record(m *azservicebus.ReceivedMessage, s Settlement) {
	r.mu.Lock()
	r.settled[m.MessageID] = append(r.settled[m.MessageID], s)
	r.mu.Unlock()
	if r.OnSettle != nil {
		r.OnSettle()
	}
}

// settleCtxErr fails a settlement the way the SDK would with a done
// context, and refuses one without a deadline: every settlement the worker
// makes must be bounded, even after the shutdown grace.
func settleCtxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("fake: settlement without a deadline")
	}
	return nil
}

// CompleteMessage records a completion, or a failed one when ctx is done
// or has no deadline, or CompleteErr fails it.
func (r *Receiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, Settlement{Kind: "complete-failed", Desc: err.Error()})
		return err
	}
	if r.CompleteErr != nil {
		if err := r.CompleteErr(m); err != nil {
			r.record(m, Settlement{Kind: "complete-failed"})
			return err
		}
	}
	r.record(m, Settlement{Kind: "complete"})
	return nil
}

// AbandonMessage records an abandon, or a failed one when ctx is done or
// has no deadline.
func (r *Receiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.AbandonMessageOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, Settlement{Kind: "abandon-failed", Desc: err.Error()})
		return err
	}
	r.record(m, Settlement{Kind: "abandon"})
	return nil
}

// DeadLetterMessage records a dead-letter with its reason and
// description, or a failed one when ctx is done or has no deadline.
func (r *Receiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, Settlement{Kind: "deadletter-failed", Desc: err.Error()})
		return err
	}
	s := Settlement{Kind: "deadletter"}
	if o != nil && o.Reason != nil {
		s.Reason = *o.Reason
	}
	if o != nil && o.ErrorDescription != nil {
		s.Desc = *o.ErrorDescription
	}
	r.record(m, s)
	return nil
}

// RenewMessageLock counts a renewal, failed when RenewErr fails it.
func (r *Receiver) RenewMessageLock(_ context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.RenewMessageLockOptions) error {
	r.mu.Lock()
	r.renewals[m.MessageID]++
	r.mu.Unlock()
	if r.RenewErr != nil {
		return r.RenewErr(m)
	}
	return nil
}
