package otelworker_test

import (
	"context"
	"errors"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/worker"
)

// settlement is what the fake receiver recorded for one settlement call.
type settlement struct {
	kind         string // complete, abandon, deadletter
	reason, desc string
}

// fakeReceiver hands out queued messages and records settlements. Hooks
// inject failures. It is safe for concurrent use, like the SDK's receiver.
type fakeReceiver struct {
	msgs chan *azservicebus.ReceivedMessage

	mu          sync.Mutex
	settled     map[string][]settlement
	renewals    map[string]int
	receiveErrs []error // returned, in order, by the next ReceiveMessages calls
	maxAsked    int
	callsDone   int // ReceiveMessages calls made with a context already done
	calls       int // ReceiveMessages calls made

	completeErr func(m *azservicebus.ReceivedMessage) error
	renewErr    func(m *azservicebus.ReceivedMessage) error
	onSettle    func()
}

var _ worker.Receiver = (*fakeReceiver)(nil)

func newFakeReceiver(ids ...string) *fakeReceiver {
	r := &fakeReceiver{
		msgs:     make(chan *azservicebus.ReceivedMessage, 1000),
		settled:  map[string][]settlement{},
		renewals: map[string]int{},
	}
	for _, id := range ids {
		r.add(id)
	}
	return r
}

func (r *fakeReceiver) add(id string) {
	r.msgs <- &azservicebus.ReceivedMessage{MessageID: id, Body: []byte(id), DeliveryCount: 1}
}

func (r *fakeReceiver) ReceiveMessages(ctx context.Context, max int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	r.mu.Lock()
	r.calls++
	r.maxAsked = maxInt(r.maxAsked, max)
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
	for len(out) < max {
		select {
		case m := <-r.msgs:
			out = append(out, m)
		default:
			return out, nil
		}
	}
	return out, nil
}

// receiveCalls returns how many ReceiveMessages calls were made so far.
func (r *fakeReceiver) receiveCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *fakeReceiver) record(m *azservicebus.ReceivedMessage, s settlement) {
	r.mu.Lock()
	r.settled[m.MessageID] = append(r.settled[m.MessageID], s)
	r.mu.Unlock()
	if r.onSettle != nil {
		r.onSettle()
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

func (r *fakeReceiver) CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, settlement{kind: "complete-failed", desc: err.Error()})
		return err
	}
	if r.completeErr != nil {
		if err := r.completeErr(m); err != nil {
			r.record(m, settlement{kind: "complete-failed"})
			return err
		}
	}
	r.record(m, settlement{kind: "complete"})
	return nil
}

func (r *fakeReceiver) AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.AbandonMessageOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, settlement{kind: "abandon-failed", desc: err.Error()})
		return err
	}
	r.record(m, settlement{kind: "abandon"})
	return nil
}

func (r *fakeReceiver) DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	if err := settleCtxErr(ctx); err != nil {
		r.record(m, settlement{kind: "deadletter-failed", desc: err.Error()})
		return err
	}
	s := settlement{kind: "deadletter"}
	if o != nil && o.Reason != nil {
		s.reason = *o.Reason
	}
	if o != nil && o.ErrorDescription != nil {
		s.desc = *o.ErrorDescription
	}
	r.record(m, s)
	return nil
}

func (r *fakeReceiver) RenewMessageLock(_ context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.RenewMessageLockOptions) error {
	r.mu.Lock()
	r.renewals[m.MessageID]++
	r.mu.Unlock()
	if r.renewErr != nil {
		return r.renewErr(m)
	}
	return nil
}

func (r *fakeReceiver) settlements(id string) []settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]settlement(nil), r.settled[id]...)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
