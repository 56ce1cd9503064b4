package sbqueue

import (
	"container/heap"
	"time"
)

// link is the receive link of one Receiver, as the broker sees it: the
// credit the receiver has issued and not yet used, and the messages the
// broker sent on that credit that the receiver has not yet handed out (the
// SDK's prefetch buffer). It is guarded by the queue's shared mutex.
//
// The broker sends on credit whether or not anyone is waiting: a message
// sent on a link is locked (and its delivery counted) from that moment, and
// its lock ticks in the buffer. Between two ReceiveMessages calls the SDK
// runs a releaser, which takes every message that arrives and releases it
// (the AMQP "released" outcome: Service Bus does not count the delivery);
// releasing is true while it runs.
type link struct {
	credit    int               // credit the broker holds for the link
	buf       []ReceivedMessage // sent on credit, not yet handed out, oldest first
	releasing bool              // the SDK's releaser runs: arrivals are released at once
	closed    bool
	wake      chan struct{} // closed, and set to nil, when buf gains a message
}

// signal wakes a ReceiveMessages call waiting for the link's buffer.
// Requires the queue's mutex.
func (l *link) signal() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// waitBuf returns a channel closed when the buffer next gains a message.
// Requires the queue's mutex.
func (l *link) waitBuf() <-chan struct{} {
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// localCredit is what the SDK counts as the link's credit: the credit it
// issued minus the messages it took from the link, so the messages in its
// buffer still count (amqpwrap.AMQPReceiverWrapper.Credits).
func (l *link) localCredit() int { return l.credit + len(l.buf) }

// dispatchPair sends available messages on link credit, on q and on the
// other queue of its pair. Requires q.s.mu.
func (q *Queue) dispatchPair(now time.Time) {
	main := q
	if q.main != nil {
		main = q.main
	}
	main.dispatch(now)
	main.dlq.dispatch(now)
}

// dispatch sends available messages of q alone, in sequence order, on the
// credit of its links, taking the links in turn. A message sent to a link
// whose releaser runs is released at once: available again, its delivery
// not counted, the credit used. Every step uses one credit, so dispatch
// ends. Requires q.s.mu and a prior sweep.
func (q *Queue) dispatch(now time.Time) {
	for q.avail.Len() > 0 {
		l := q.nextCredit()
		if l == nil {
			return
		}
		l.credit--
		e := heap.Pop(&q.avail).(*entry)
		if e.expiryIdx >= 0 {
			heap.Remove(&q.expiring, e.expiryIdx)
		}
		rm := q.lock(e, now)
		if l.releasing {
			delete(q.locked, e.token)
			e.token, e.lockedUntil = [16]byte{}, time.Time{}
			e.deliveries--
			q.counters.Released++
			q.makeAvailable(e, now)
			continue
		}
		l.buf = append(l.buf, rm)
		l.signal()
	}
}

// nextCredit returns the next link with credit, round robin, or nil.
// Requires q.s.mu.
func (q *Queue) nextCredit() *link {
	for i := range q.links {
		l := q.links[(q.nextLink+i)%len(q.links)]
		if l.credit > 0 {
			q.nextLink = (q.nextLink + i + 1) % len(q.links)
			return l
		}
	}
	return nil
}

// lock locks the entry e, just taken from the available messages, counts
// its delivery and returns its view. Requires q.s.mu.
func (q *Queue) lock(e *entry, now time.Time) ReceivedMessage {
	e.deliveries++
	e.token = newUUID()
	e.lockedUntil = now.Add(q.opts.LockDuration)
	q.locked[e.token] = e
	if len(q.locked) == 1 || e.lockedUntil.Before(q.earliestLock) {
		q.earliestLock = e.lockedUntil
	}
	q.counters.Delivered++
	return e.view(true)
}

// releaseBuffered releases every message in l's buffer whose lock is still
// held, as the SDK's releaser does with what it finds there, and empties
// the buffer. Requires q.s.mu.
func (q *Queue) releaseBuffered(l *link, now time.Time) {
	for _, rm := range l.buf {
		e, ok := q.locked[rm.LockToken]
		if !ok {
			continue // its lock lapsed in the buffer: already counted
		}
		delete(q.locked, e.token)
		e.token, e.lockedUntil = [16]byte{}, time.Time{}
		e.deliveries--
		q.counters.Released++
		q.makeAvailable(e, now)
	}
	l.buf = nil
}
