package order

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// UnboundedRetention is the retention MinRetention reports when no finite
// retention is safe: the queue's messages never expire, so a copy can wait
// in a backlog for ever. As a marker retention it means "never expires"
// (an inbox marker with ttl -1).
const UnboundedRetention = time.Duration(math.MaxInt64)

// RedeliveryHorizon holds the broker settings that bound how long after a
// message was first processed another copy with the same MessageId can
// still be delivered. A deduplication marker that expires earlier than that
// reopens the duplicate window: the late copy would be processed again.
type RedeliveryHorizon struct {
	LockDuration             time.Duration // the queue's lock duration
	MaxDeliveryCount         int           // the queue's max delivery count
	MessageTimeToLive        time.Duration // the queue's default message TTL; 0 means unlimited
	DuplicateDetectionWindow time.Duration // the queue's duplicate-detection history window
	ResubmissionHorizon      time.Duration // how long after dead-lettering an operator may resubmit a message
}

// MinRetention returns the shortest safe retention of a deduplication marker
// (such as an inbox marker's TTL) and the computation, spelled out for the
// error message of a worker that refuses to start.
//
// The lifetime L of one copy of a message in the queue is its time-to-live;
// when the TTL is unlimited (the Service Bus default) it is approximated by
// LockDuration × MaxDeliveryCount, the time a message takes to exhaust its
// deliveries in a queue that is not backlogged; when both are set, the larger
// is taken. A marker is written at the earliest when the first copy is
// processed, and copies can still arrive:
//
//   - redeliveries of that copy: within L;
//   - a producer retry sent just after the duplicate-detection window W,
//     which the broker no longer drops: within W + L;
//   - a dead-letter resubmission: dead-lettered within L, resubmitted within
//     the resubmission horizon H, then delivered within L: 2L + H.
//
// So the minimum is L + max(W, L + H).
func (h RedeliveryHorizon) MinRetention() (time.Duration, string) {
	lockBound := h.LockDuration * time.Duration(h.MaxDeliveryCount)
	l, lWhy := lockBound, fmt.Sprintf("L = lock duration %v × max delivery count %d = %v (TTL unlimited)", h.LockDuration, h.MaxDeliveryCount, lockBound)
	if h.MessageTimeToLive > 0 {
		l = max(h.MessageTimeToLive, lockBound)
		lWhy = fmt.Sprintf("L = max(message TTL %v, lock duration %v × max delivery count %d = %v) = %v",
			h.MessageTimeToLive, h.LockDuration, h.MaxDeliveryCount, lockBound, l)
	}
	min := l + max(h.DuplicateDetectionWindow, l+h.ResubmissionHorizon)
	var b strings.Builder
	b.WriteString(lWhy)
	fmt.Fprintf(&b, "; minimum = L + max(duplicate-detection window %v, L + resubmission horizon %v) = %v",
		h.DuplicateDetectionWindow, h.ResubmissionHorizon, min)
	return min, b.String()
}

// CheckRetention returns an error, showing the computation, when retention
// is shorter than h's minimum.
func (h RedeliveryHorizon) CheckRetention(retention time.Duration) error {
	min, why := h.MinRetention()
	if retention < min {
		return fmt.Errorf("marker retention %v is below the safe minimum %v: a late copy of a message could be processed again after its marker expired (%s)", retention, min, why)
	}
	return nil
}
