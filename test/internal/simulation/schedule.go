package simulation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// The scheduled path: a status change that arrives before its order is not
// abandoned until MaxDeliveryCount but retried by a copy the worker
// schedules on the order writers' queue (worker.Options.Scheduler), as
// cmd/orderworker does. The queue model holds the copy until its time
// (sbqueue.Queue.Schedule: duplicate detection at scheduling, a new
// sequence number at its enqueue); the copy is a message of its own, with
// deliveries of its own, which the checks follow back to the status change
// it retries (its worker.PropertyOriginalMessageID): it must end applied,
// or dead-lettered only when its order was never stored.

// scheduleRecorder is the workers' Scheduler: the queue model's sender,
// with every scheduling in the history of the order it is about, and
// FaultRates.ScheduleFailure: a scheduling that fails before the broker
// schedules anything, as a ServerBusy answer or a link detached before the
// request went out does. It is safe for concurrent use.
type scheduleRecorder struct {
	q      *sbqueue.Queue
	hist   *history
	faults *scheduleFaults
}

// scheduleFaults decides FaultRates.ScheduleFailure for every worker of a
// run: per scheduling of a copy (its MessageId and how often it was
// scheduled before), charged to the order's budget. It is safe for
// concurrent use.
type scheduleFaults struct {
	plan *plan

	mu     sync.Mutex
	calls  map[string]uint64 // schedulings so far, by the copy's MessageId
	failed int
}

func newScheduleFaults(p *plan) *scheduleFaults {
	return &scheduleFaults{plan: p, calls: make(map[string]uint64)}
}

// fails reports whether the scheduling of copy id, about order orderID,
// fails.
func (f *scheduleFaults) fails(orderID, id string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	f.calls[id]++
	n := f.calls[id]
	f.mu.Unlock()
	if !f.plan.inject(faultScheduleFailure, orderID, fnv64a(id), n) {
		return false
	}
	f.mu.Lock()
	f.failed++
	f.mu.Unlock()
	return true
}

// count returns the schedulings that failed.
func (f *scheduleFaults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// errScheduleFailed is a scheduling that failed before the broker
// scheduled anything.
var errScheduleFailed = errors.New("simulated ServerBusy: the broker scheduled nothing")

var _ worker.Scheduler = (*scheduleRecorder)(nil)

// ScheduleMessages implements worker.Scheduler.
func (s *scheduleRecorder) ScheduleMessages(ctx context.Context, ms []*azservicebus.Message, at time.Time, o *azservicebus.ScheduleMessagesOptions) ([]int64, error) {
	var seqs []int64
	var err error
	if len(ms) > 0 && ms[0].MessageID != nil && s.faults.fails(orderOf(ms[0]), *ms[0].MessageID) {
		err = fmt.Errorf("schedule %d messages: %w", len(ms), errScheduleFailed)
	} else {
		seqs, err = s.q.NewSender().ScheduleMessages(ctx, ms, at, o)
	}
	for _, m := range ms {
		var id string
		if m.MessageID != nil {
			id = *m.MessageID
		}
		orderID := orderOf(m)
		if err != nil {
			s.hist.add(orderID, "", "scheduling %s for +%v failed: %v", id, time.Until(at).Round(time.Millisecond), err)
		} else {
			s.hist.add(orderID, "", "scheduled %s for +%v", id, time.Until(at).Round(time.Millisecond))
		}
	}
	return seqs, err
}

// orderOf returns the order a message to schedule is about: its
// CorrelationId, else the order its MessageId names.
func orderOf(m *azservicebus.Message) string {
	if m.CorrelationID != nil {
		return *m.CorrelationID
	}
	if m.MessageID != nil {
		return orderOfMessage(*m.MessageID)
	}
	return ""
}

// waitOrderDelay waits Config.OrderDelay, if set, before an order whose
// status changes went first.
func (p *producer) waitOrderDelay(ctx context.Context) error {
	if p.orderDelay <= 0 {
		return nil
	}
	t := time.NewTimer(p.orderDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scheduledPending reports whether a queue holds a scheduled message, a
// retry still to come.
func (d *driver) scheduledPending() bool {
	for _, s := range d.subs {
		if _, _, scheduled := s.out.q.Len(); scheduled > 0 {
			return true
		}
	}
	return false
}

// retryOf returns the MessageId of the message m is a scheduled copy of,
// and whether it is one: its MessageId is the one the worker derives from
// its properties.
func retryOf(m sbqueue.ReceivedMessage) (string, bool) {
	return retryOfProps(m.MessageID, m.ApplicationProperties)
}

// retryOfProps is retryOf for a message with MessageId id and application
// properties props.
func retryOfProps(id string, props map[string]any) (string, bool) {
	orig, ok := props[worker.PropertyOriginalMessageID].(string)
	n, ok2 := props[worker.PropertyRetryAttempt].(int64)
	since, ok3 := props[worker.PropertyRetrySince].(int64)
	if !ok || !ok2 || !ok3 || id != worker.RetryMessageID(orig, time.UnixMilli(since), int(n)) {
		return "", false
	}
	return orig, true
}

// resubmissionOf returns the MessageId and properties under which the
// operator resubmits a dead-lettered message with id and props: a
// scheduled copy is resubmitted as the message it retries (its original
// MessageId, without the retry properties), the status change the
// producer sent; anything else as it is.
func resubmissionOf(id string, props map[string]any) (string, map[string]any) {
	orig, ok := retryOfProps(id, props)
	if !ok {
		return id, props
	}
	delete(props, worker.PropertyOriginalMessageID)
	delete(props, worker.PropertyRetryAttempt)
	delete(props, worker.PropertyRetrySince)
	return orig, props
}

// copiesEnqueued is how many scheduled copies a queue enqueued: each counts
// in its Sent besides the producer's messages.
func copiesEnqueued(q sbqueue.Snapshot) int64 {
	return q.ScheduledAccepted - q.ScheduledCancelled - int64(len(q.Scheduled))
}

// retryFate is what became of the scheduled copies of one message: the
// last one dead-lettered, if any, and whether one is still in the queue.
type retryFate struct {
	dead    sbqueue.ReceivedMessage
	isDead  bool
	pending bool
}

// retryFates collects the fates of the scheduled copies in q, by the
// MessageId of the message they retry.
func retryFates(q sbqueue.Snapshot) map[string]retryFate { return fatesBy(q, retryOf) }

// fatesBy collects the fates of the scheduled copies in q by key: of
// returns a copy's key, and false for a message that is no copy.
func fatesBy[K comparable](q sbqueue.Snapshot, of func(sbqueue.ReceivedMessage) (K, bool)) map[K]retryFate {
	out := make(map[K]retryFate)
	for _, m := range q.DeadLetters {
		if k, ok := of(m); ok {
			f := out[k]
			f.dead, f.isDead = m, true
			out[k] = f
		}
	}
	for _, list := range [][]sbqueue.ReceivedMessage{q.Active, q.Locked, q.Scheduled} {
		for _, m := range list {
			if k, ok := of(m); ok {
				f := out[k]
				f.pending = true
				out[k] = f
			}
		}
	}
	return out
}

// RetryAccounting counts the scheduled copies of one queue: enqueued at
// their time, then completed, dead-lettered (and still in the dead-letter
// queue), resubmitted from the dead-letter queue by the operator, or
// still in the queue (available, locked or waiting for their time).
type RetryAccounting struct {
	Enqueued, Completed, DeadLettered, Resubmitted, Pending int64
}

// accountRetries follows the scheduled copies through the final state q;
// resubmitted is how many of them the operator resubmitted, which took
// them out of the dead-letter queue.
func accountRetries(q sbqueue.Snapshot, resubmitted int64) RetryAccounting {
	r := RetryAccounting{Resubmitted: resubmitted}
	r.Enqueued = copiesEnqueued(q)
	for _, m := range q.DeadLetters {
		if _, ok := retryOf(m); ok {
			r.DeadLettered++
		}
	}
	for _, list := range [][]sbqueue.ReceivedMessage{q.Active, q.Locked} {
		for _, m := range list {
			if _, ok := retryOf(m); ok {
				r.Pending++
			}
		}
	}
	r.Completed = r.Enqueued - r.DeadLettered - r.Resubmitted - r.Pending
	r.Pending += int64(len(q.Scheduled))
	return r
}
