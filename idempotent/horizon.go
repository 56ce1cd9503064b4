package idempotent

import (
	"fmt"
	"math"
	"time"
)

// UnboundedRetention is the retention MinRetention reports when no finite
// retention is safe: the queue's messages never expire, so a copy can wait
// in a backlog for ever. As a marker retention it means "never expires"
// (an inbox marker with ttl -1).
const UnboundedRetention = time.Duration(math.MaxInt64)

// RedeliveryHorizon holds the broker settings that bound how long after a
// message was first processed another copy with the same MessageId can
// still be delivered. A deduplication marker (or a downstream idempotency
// key) that is forgotten earlier than that reopens the duplicate window:
// the late copy would be processed again.
type RedeliveryHorizon struct {
	LockDuration             time.Duration // the queue's lock duration
	MaxDeliveryCount         int           // the queue's max delivery count (informational: TTL bounds a copy's life, not deliveries)
	MessageTimeToLive        time.Duration // the queue's default message TTL; 0 (or below) means unlimited
	DuplicateDetectionWindow time.Duration // the queue's duplicate-detection history window
	// ResubmissionHorizon is how long after a copy of a message is
	// dead-lettered an operator may still resubmit it, or resubmit again a
	// resubmission of it that was dead-lettered in turn. Service Bus moves
	// an expired message to the dead-letter queue only while a receiver
	// pulls from the queue, so it should include the longest time the
	// queue may have no receiver.
	ResubmissionHorizon time.Duration
}

// MinRetention returns the shortest safe retention of a deduplication marker
// (an inbox marker's TTL, a downstream's idempotency key retention) and the computation, spelled out for the
// error message of a worker that refuses to start. When the message TTL is
// unlimited it returns UnboundedRetention: a copy can wait in a backlog for
// ever (lock duration × max delivery count bounds nothing once the queue is
// backlogged), so no finite retention is safe.
//
// With the message TTL T, the window W, the resubmission horizon H and the
// lock duration D, measured from the first processing of a message (at the
// earliest, when its first copy is enqueued), copies can still arrive:
//
//   - redeliveries of the first copy: within T;
//   - a producer retry sent just after the window (the latest one the broker
//     does not drop; producers stop retrying within W of the first send):
//     enqueued at W, delivered within W + T;
//   - a dead-letter resubmission of the first copy: dead-lettered within
//     T + 2D (a delivery that began just before the copy expired ends, or
//     its lock lapses, within 2D: the worker renews the lock only until its
//     message deadline, which is below D), resubmitted within H of that
//     (however often it is dead-lettered again), delivered within T:
//     2T + 2D + H;
//   - the producer retry dead-lettered and resubmitted: W + 2T + 2D + H.
//
// The last path is the longest, so the minimum is W + 2T + 2D + H. The
// enumeration of every path is in the package's tests, which check this
// formula against it.
func (h RedeliveryHorizon) MinRetention() (time.Duration, string) {
	if h.MessageTimeToLive <= 0 {
		return UnboundedRetention, "the queue's message TTL is unlimited: a copy of a message can wait in a backlog for ever, so no finite retention is safe"
	}
	t, d := h.MessageTimeToLive, h.LockDuration
	min := satAdd(h.DuplicateDetectionWindow, t, t, d, d, h.ResubmissionHorizon)
	why := fmt.Sprintf("the latest copy is a producer retry sent just after the duplicate-detection window %v (W), dead-lettered after its message TTL %v (T) "+
		"plus twice the lock duration %v (D), resubmitted within the resubmission horizon %v (H) and delivered within T again: minimum = W + 2T + 2D + H = %v",
		h.DuplicateDetectionWindow, t, d, h.ResubmissionHorizon, min)
	if min == UnboundedRetention {
		why += " (overflows: unbounded)"
	}
	return min, why
}

// satAdd returns the sum of ds, or UnboundedRetention if it overflows.
func satAdd(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if d > 0 && sum > UnboundedRetention-d {
			return UnboundedRetention
		}
		sum += max(d, 0)
	}
	return sum
}

// CheckRetention returns an error, showing the computation, when the
// retention of deduplication markers is shorter than h's minimum. It is
// CheckRetentionOf("deduplication markers", retention).
func (h RedeliveryHorizon) CheckRetention(retention time.Duration) error {
	return h.CheckRetentionOf("deduplication markers", retention)
}

// CheckRetentionOf returns an error, showing the computation and how to fix
// it, when retention, how long what (inbox markers, a downstream's
// idempotency keys) is remembered, is shorter than h's minimum. When the
// message TTL is unlimited only UnboundedRetention (remembered for ever)
// passes.
func (h RedeliveryHorizon) CheckRetentionOf(what string, retention time.Duration) error {
	min, why := h.MinRetention()
	if retention >= min {
		return nil
	}
	if min == UnboundedRetention {
		return fmt.Errorf("retention of %s %v cannot be safe: %s; set a default message TTL on the queue (and tell the worker the same value), "+
			"then retain %s for the minimum computed from it", what, retention, why, what)
	}
	return fmt.Errorf("retention of %s %v is below the safe minimum %v: a late copy of a message could be processed again after its %s were forgotten (%s)",
		what, retention, min, what, why)
}
