package sbqueue

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotScheduled is returned by CancelScheduled for a sequence number that
// names no message still waiting for its scheduled enqueue time.
var ErrNotScheduled = errors.New("sbqueue: no scheduled message with that sequence number")

// scheduledQueue holds a queue's scheduled messages: by enqueue time, and by
// the sequence number their scheduling returned. It is guarded by the
// queue's shared mutex.
type scheduledQueue struct {
	byTime entryHeap
	bySeq  map[int64]*entry
}

func newScheduledQueue() scheduledQueue {
	return scheduledQueue{
		byTime: entryHeap{
			less: func(a, b *entry) bool {
				if c := a.scheduledAt.Compare(b.scheduledAt); c != 0 {
					return c < 0
				}
				return a.seq < b.seq
			},
			index: func(e *entry) *int { return &e.schedIdx },
		},
		bySeq: make(map[int64]*entry),
	}
}

// Schedule schedules ms to be enqueued at the time at, as Service Bus's
// schedule-message operation does, and returns their sequence numbers, in
// order. Duplicate detection applies now, at scheduling: a message whose
// MessageID was accepted (sent or scheduled) less than
// DuplicateDetectionWindow ago is accepted and dropped (it gets a sequence
// number that names nothing, and counts in DuplicatesDropped), and an
// accepted one starts the window. A scheduled message is not available
// until at; then it is enqueued as if sent at that moment, with a new
// sequence number (the one Schedule returned is valid only while it waits)
// and EnqueuedTime at; its ScheduledEnqueueTime is at. Until then
// CancelScheduled removes it. A time at or before now enqueues at once.
// Scheduled messages appear in Snapshot.Scheduled, not in Peek. If Schedule
// returns an error nothing was scheduled.
func (q *Queue) Schedule(ctx context.Context, ms []Message, at time.Time) ([]int64, error) {
	return q.schedule(ctx, ms, at, nil)
}

// ScheduleReport is Schedule that also reports each message duplicate
// detection dropped: dropped holds their indexes in ms, and window is the
// queue's duplicate-detection window, for the report (as SendBatchReport).
func (q *Queue) ScheduleReport(ctx context.Context, ms []Message, at time.Time) (seqs []int64, dropped []int, window time.Duration, err error) {
	seqs, err = q.schedule(ctx, ms, at, &dropped)
	return seqs, dropped, q.opts.DuplicateDetectionWindow, err
}

func (q *Queue) schedule(ctx context.Context, ms []Message, at time.Time, dropped *[]int) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.main != nil {
		return nil, fmt.Errorf("schedule to %s: %w", q.name, ErrDeadLetterQueue)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("sbqueue: schedule to %s: no messages", q.name)
	}
	entries, err := newEntries(q.name, ms, q.opts.DefaultMessageTimeToLive)
	if err != nil {
		return nil, err
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		q.nextSeq++
		seqs[i] = q.nextSeq
		if q.opts.RequiresDuplicateDetection && q.dedup.isDuplicate(e.msg.MessageID, now, q.opts.DuplicateDetectionWindow) {
			q.counters.DuplicatesDropped++
			if dropped != nil {
				*dropped = append(*dropped, i)
			}
			continue
		}
		e.seq, e.scheduledAt = q.nextSeq, at
		heap.Push(&q.sched.byTime, e)
		q.sched.bySeq[e.seq] = e
		q.counters.ScheduledAccepted++
	}
	q.activate(now)
	q.dispatchPair(now)
	// Blocked receivers re-arm their wake-ups for the new deadline.
	q.s.notify()
	for _, l := range q.links {
		l.signal()
	}
	return seqs, nil
}

// CancelScheduled removes the scheduled messages with sequence numbers
// seqs (those Schedule returned), as Service Bus's cancel-scheduled-message
// operation does. If one of them names no waiting message (never
// scheduled, dropped as a duplicate, enqueued already or cancelled) it
// returns an error wrapping ErrNotScheduled and cancels none.
func (q *Queue) CancelScheduled(seqs []int64) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	for _, s := range seqs {
		if _, ok := q.sched.bySeq[s]; !ok {
			return fmt.Errorf("cancel scheduled message %d in %s: %w", s, q.name, ErrNotScheduled)
		}
	}
	for _, s := range seqs {
		e, ok := q.sched.bySeq[s]
		if !ok {
			continue // listed twice
		}
		delete(q.sched.bySeq, s)
		heap.Remove(&q.sched.byTime, e.schedIdx)
		q.counters.ScheduledCancelled++
	}
	return nil
}

// activate enqueues every scheduled message whose time has come, in the
// order of their times. Requires q.s.mu; the caller dispatches afterwards.
func (q *Queue) activate(now time.Time) {
	for {
		e := q.sched.byTime.peek()
		if e == nil || now.Before(e.scheduledAt) {
			return
		}
		heap.Pop(&q.sched.byTime)
		delete(q.sched.bySeq, e.seq)
		q.nextSeq++
		q.enqueue(e, q.nextSeq, e.scheduledAt)
	}
}

// nextScheduled returns the earliest scheduled enqueue time. Requires
// q.s.mu.
func (q *Queue) nextScheduled() (time.Time, bool) {
	if e := q.sched.byTime.peek(); e != nil {
		return e.scheduledAt, true
	}
	return time.Time{}, false
}

// scheduledViews returns the scheduled messages by sequence number.
// Requires q.s.mu.
func (q *Queue) scheduledViews() []ReceivedMessage {
	if len(q.sched.bySeq) == 0 {
		return nil
	}
	out := make([]ReceivedMessage, 0, len(q.sched.bySeq))
	for _, e := range q.sched.byTime.items {
		out = append(out, e.view(false))
	}
	slices.SortFunc(out, func(a, b ReceivedMessage) int { return cmp.Compare(a.SequenceNumber, b.SequenceNumber) })
	return out
}
