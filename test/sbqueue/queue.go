package sbqueue

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

var (
	// ErrLockLost is returned when a settlement or lock renewal names a lock
	// that is unknown, has expired, or whose message was already settled or
	// redelivered under another token.
	ErrLockLost = errors.New("sbqueue: message lock lost")

	// ErrDeadLetterQueue is returned for operations a dead-letter queue does
	// not allow: sending to it and dead-lettering its messages.
	ErrDeadLetterQueue = errors.New("sbqueue: operation not allowed on a dead-letter queue")
)

// Counters are cumulative counts of what happened on one queue.
type Counters struct {
	Sent              int64 // messages enqueued (for a dead-letter queue: messages dead-lettered into it)
	DuplicatesDropped int64 // sends accepted and dropped by duplicate detection
	Delivered         int64 // deliveries, including redeliveries
	Completed         int64 // successful Complete calls
	Abandoned         int64 // successful Abandon calls
	Released          int64 // successful Release calls
	DeadLettered      int64 // messages moved to the dead-letter queue, for any reason
	Expired           int64 // messages whose time-to-live passed
	LockExpired       int64 // locks that lapsed (including by ExpireLock and ExpireLocks)
	Renewed           int64 // successful RenewLock calls
	LockLost          int64 // settlements and renewals rejected with ErrLockLost
	// ScheduledAccepted counts messages accepted by Schedule (each also
	// counts in Sent once it is enqueued); ScheduledCancelled those
	// CancelScheduled removed before their time.
	ScheduledAccepted, ScheduledCancelled int64
}

// Snapshot is a consistent copy of a queue's contents and counters.
type Snapshot struct {
	Active      []ReceivedMessage // available messages, by sequence number
	Locked      []ReceivedMessage // locked messages with their lock, by sequence number
	DeadLetters []ReceivedMessage // the dead-letter queue's messages, available and locked, by sequence number; empty for a dead-letter queue
	Scheduled   []ReceivedMessage // messages waiting for their scheduled enqueue time, by the sequence number Schedule returned

	// BlockedReceivers is the number of Receive calls waiting for a message
	// at the time of the snapshot.
	BlockedReceivers int

	Counters
}

// shared is the state a queue shares with its dead-letter queue: one mutex
// guards both, so that a message moves between them atomically.
type shared struct {
	mu sync.Mutex
	// changed is closed, and set to nil, when either queue gains an
	// available message. Waiters create it on demand.
	changed chan struct{}
}

// wait returns a channel closed at the next change. Requires s.mu.
func (s *shared) wait() <-chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// notify wakes every waiter. Requires s.mu.
func (s *shared) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Queue is one Service Bus queue, or the dead-letter sub-queue of one, with
// PeekLock semantics. Its methods are safe for concurrent use; each one is
// atomic with respect to the others.
type Queue struct {
	name  string
	opts  QueueOptions
	clock Clock
	s     *shared
	dlq   *Queue // nil on a dead-letter queue
	main  *Queue // the queue whose dead-letter queue this is; nil on a main queue
	topic *Topic // the topic of a subscription and of its dead-letter queue; nil for a queue

	// Guarded by s.mu.
	nextSeq      int64 // last sequence number assigned; used on the main queue only
	avail        entryHeap
	expiring     entryHeap // available entries with a TTL, by expiry
	locked       map[[16]byte]*entry
	earliestLock time.Time // no lock in locked expires before this
	dedup        dedupHistory
	counters     Counters
	blocked      int     // Receive calls waiting for a message
	links        []*link // receive links of Receivers, in attach order
	nextLink     int     // where dispatch starts looking for credit
	sched        scheduledQueue
}

func newQueue(name string, o QueueOptions, clock Clock) *Queue {
	s := &shared{}
	q := newEntity(name, o, clock, s)
	q.dlq = newEntity(name+DeadLetterQueueSuffix, QueueOptions{LockDuration: o.LockDuration}, clock, s)
	q.dlq.main = q
	return q
}

func newEntity(name string, o QueueOptions, clock Clock, s *shared) *Queue {
	return &Queue{
		name:  name,
		opts:  o,
		clock: clock,
		s:     s,
		avail: entryHeap{
			less:  func(a, b *entry) bool { return a.seq < b.seq },
			index: func(e *entry) *int { return &e.availIdx },
		},
		expiring: entryHeap{
			less: func(a, b *entry) bool {
				if c := a.expiresAt.Compare(b.expiresAt); c != 0 {
					return c < 0
				}
				return a.seq < b.seq
			},
			index: func(e *entry) *int { return &e.expiryIdx },
		},
		locked: make(map[[16]byte]*entry),
		sched:  newScheduledQueue(),
	}
}

// Name returns the queue's name; a dead-letter queue's name ends in
// DeadLetterQueueSuffix.
func (q *Queue) Name() string { return q.name }

// Options returns the queue's options with defaults applied. A dead-letter
// queue reports its parent's LockDuration and nothing else: its messages
// never expire, are never dead-lettered and are not checked for duplicates.
// A subscription reports no duplicate detection (RequiresDuplicateDetection
// false, DuplicateDetectionWindow zero): that is its topic's.
func (q *Queue) Options() QueueOptions { return q.opts }

// DeadLetterQueue returns the queue's dead-letter sub-queue, which is
// received from and settled like any queue. It returns nil on a dead-letter
// queue.
func (q *Queue) DeadLetterQueue() *Queue { return q.dlq }

// Send enqueues m. With duplicate detection on, a message whose MessageID
// was accepted less than DuplicateDetectionWindow ago (now - accepted <
// window) is accepted but dropped: Send then returns (false, nil), as
// Service Bus reports success to the sender. A MessageID accepted exactly
// DuplicateDetectionWindow ago or earlier is enqueued, and the window
// restarts from this send.
func (q *Queue) Send(ctx context.Context, m Message) (enqueued bool, err error) {
	n, err := q.SendBatch(ctx, []Message{m})
	return n == 1, err
}

// SendBatch enqueues ms atomically and in order, applying duplicate
// detection to each message (also against earlier messages of the batch).
// It returns how many were enqueued rather than dropped as duplicates. If it
// returns an error, nothing was enqueued.
func (q *Queue) SendBatch(ctx context.Context, ms []Message) (enqueued int, err error) {
	return q.sendBatch(ctx, ms, nil, nil)
}

// SendSequenced is Send that returns the sequence number the queue gave m,
// 0 when duplicate detection dropped it. A sender that tracks what it sent
// by sequence number needs it: numbers are not only taken by its own sends
// (a scheduled message takes one when it is scheduled and another when it
// is enqueued).
func (q *Queue) SendSequenced(ctx context.Context, m Message) (seq int64, err error) {
	var seqs []int64
	_, err = q.sendBatch(ctx, []Message{m}, nil, &seqs)
	if len(seqs) == 1 {
		seq = seqs[0]
	}
	return seq, err
}

// SendBatchReport is SendBatch that also reports each message duplicate
// detection dropped: dropped holds their indexes in ms, and window is the
// queue's duplicate-detection window, for the report. The test broker logs
// and counts them (Service Bus itself tells nobody).
func (q *Queue) SendBatchReport(ctx context.Context, ms []Message) (dropped []int, window time.Duration, err error) {
	_, err = q.sendBatch(ctx, ms, &dropped, nil)
	return dropped, q.opts.DuplicateDetectionWindow, err
}

// sendBatch enqueues ms; it appends the indexes of the duplicates it drops
// to dropped and the sequence number of each message (0 for a dropped one)
// to seqs, when they are not nil.
func (q *Queue) sendBatch(ctx context.Context, ms []Message, dropped *[]int, seqs *[]int64) (enqueued int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if q.main != nil {
		return 0, fmt.Errorf("send to %s: %w", q.name, ErrDeadLetterQueue)
	}
	entries, err := newEntries(q.name, ms, q.opts.DefaultMessageTimeToLive)
	if err != nil {
		return 0, err
	}

	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	for i, e := range entries {
		if q.opts.RequiresDuplicateDetection && q.dedup.isDuplicate(e.msg.MessageID, now, q.opts.DuplicateDetectionWindow) {
			q.counters.DuplicatesDropped++
			if dropped != nil {
				*dropped = append(*dropped, i)
			}
			if seqs != nil {
				*seqs = append(*seqs, 0)
			}
			continue
		}
		q.nextSeq++
		q.enqueue(e, q.nextSeq, now)
		enqueued++
		if seqs != nil {
			*seqs = append(*seqs, q.nextSeq)
		}
	}
	q.dispatchPair(now)
	return enqueued, nil
}

// newEntries validates and copies ms for the entity called name: a message
// without a MessageID gets a random one, and a TimeToLive of zero or above
// defaultTTL (when positive) becomes defaultTTL.
func newEntries(name string, ms []Message, defaultTTL time.Duration) ([]*entry, error) {
	entries := make([]*entry, len(ms))
	for i, m := range ms {
		if m.TimeToLive < 0 {
			return nil, fmt.Errorf("sbqueue: send to %s: negative TimeToLive %v", name, m.TimeToLive)
		}
		m = m.clone()
		if m.MessageID == "" {
			m.MessageID = uuidString(newUUID())
		}
		if defaultTTL > 0 && (m.TimeToLive == 0 || m.TimeToLive > defaultTTL) {
			m.TimeToLive = defaultTTL
		}
		entries[i] = &entry{msg: m, availIdx: -1, expiryIdx: -1, schedIdx: -1}
	}
	return entries, nil
}

// enqueue makes a new entry available with sequence number seq. Requires
// q.s.mu and a prior sweep; the caller dispatches afterwards.
func (q *Queue) enqueue(e *entry, seq int64, now time.Time) {
	e.seq = seq
	e.enqueued = now
	if e.msg.TimeToLive > 0 {
		e.expiresAt = now.Add(e.msg.TimeToLive)
	}
	q.counters.Sent++
	q.makeAvailable(e, now)
}

// dedupHistory is the duplicate-detection record of one queue or topic:
// the MessageIDs accepted within the window. It is guarded by its owner's
// mutex.
type dedupHistory struct {
	seen    map[string]time.Time
	log     []seenRecord // accepted IDs in acceptance order, for pruning
	logHead int
}

type seenRecord struct {
	id string
	at time.Time
}

// isDuplicate applies duplicate detection with window to id at now: it
// reports whether id was accepted less than window ago, and records id
// when it is accepted.
func (h *dedupHistory) isDuplicate(id string, now time.Time, window time.Duration) bool {
	// Prune records that left the window.
	for h.logHead < len(h.log) {
		r := h.log[h.logHead]
		if now.Sub(r.at) < window {
			break
		}
		if at, ok := h.seen[r.id]; ok && at.Equal(r.at) {
			delete(h.seen, r.id)
		}
		h.log[h.logHead] = seenRecord{}
		h.logHead++
	}
	if h.logHead > len(h.log)/2 {
		h.log = append(h.log[:0], h.log[h.logHead:]...)
		h.logHead = 0
	}
	if at, ok := h.seen[id]; ok && now.Sub(at) < window {
		return true
	}
	if h.seen == nil {
		h.seen = make(map[string]time.Time)
	}
	h.seen[id] = now
	h.log = append(h.log, seenRecord{id: id, at: now})
	return false
}

// Receive locks and returns up to max available messages, in sequence-number
// order. If none is available it blocks until one is, or until ctx is done,
// in which case it returns ctx.Err(). If ctx is already done it returns
// ctx.Err() without locking anything.
func (q *Queue) Receive(ctx context.Context, max int) ([]ReceivedMessage, error) {
	if max <= 0 {
		return nil, fmt.Errorf("sbqueue: receive from %s: max must be positive, got %d", q.name, max)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.s.mu.Lock()
		now := q.sweep()
		if msgs := q.take(max, now); len(msgs) > 0 {
			q.s.mu.Unlock()
			return msgs, nil
		}
		// Arm the wake-ups before releasing the lock, so that a receiver
		// counted as blocked is sure to be woken.
		q.block(ctx, q.s.wait())
		q.s.mu.Unlock()
	}
}

// block waits, counted as a blocked receiver, until ctx ends, wake is
// closed or the queue's next deadline (a lock's or a message's expiry, the
// end of a duplicate-detection record) arrives. It requires q.s.mu, which it
// releases while it waits and holds again when it returns; wake must be
// armed before the call, under the lock, so that no change is missed.
func (q *Queue) block(ctx context.Context, wake <-chan struct{}) {
	var timer <-chan struct{}
	stop := func() bool { return false }
	if next, ok := q.nextDeadline(); ok {
		c := make(chan struct{})
		timer = c
		stop = q.clock.AtFunc(next, func() { close(c) })
	}
	q.blocked++
	q.s.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-timer:
	}
	stop()
	q.s.mu.Lock()
	q.blocked--
}

// TryReceive is Receive without blocking: it locks and returns up to max
// messages available now, possibly none.
func (q *Queue) TryReceive(max int) []ReceivedMessage {
	if max <= 0 {
		return nil
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	return q.take(max, q.sweep())
}

// take locks up to max available messages. Requires q.s.mu.
func (q *Queue) take(max int, now time.Time) []ReceivedMessage {
	n := min(max, q.avail.Len())
	if n == 0 {
		return nil
	}
	out := make([]ReceivedMessage, 0, n)
	for range n {
		e := heap.Pop(&q.avail).(*entry)
		if e.expiryIdx >= 0 {
			heap.Remove(&q.expiring, e.expiryIdx)
		}
		out = append(out, q.lock(e, now))
	}
	return out
}

// Complete settles the delivery holding token: the message is removed.
func (q *Queue) Complete(token [16]byte) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	if _, err := q.unlock(token); err != nil {
		return err
	}
	q.counters.Completed++
	return nil
}

// Abandon releases the lock token holds, after merging propertiesToModify
// into the message's application properties. The delivery counts: if the
// message has been delivered MaxDeliveryCount times it moves to the
// dead-letter queue with reason ReasonMaxDeliveryCountExceeded, otherwise it
// is available again and its next delivery has DeliveryCount one higher.
func (q *Queue) Abandon(token [16]byte, propertiesToModify map[string]any) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	e, err := q.unlock(token)
	if err != nil {
		return err
	}
	mergeProperties(&e.msg, propertiesToModify)
	q.counters.Abandoned++
	q.returnCounted(e, now)
	q.dispatchPair(now)
	return nil
}

// Release releases the lock token holds without counting the delivery (the
// AMQP "released" outcome): the message is available again and its next
// delivery has the same DeliveryCount as this one.
func (q *Queue) Release(token [16]byte) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	e, err := q.unlock(token)
	if err != nil {
		return err
	}
	e.deliveries--
	q.counters.Released++
	q.makeAvailable(e, now)
	q.dispatchPair(now)
	return nil
}

// DeadLetter moves the message whose lock token holds to the dead-letter
// queue, after merging propertiesToModify into its application properties.
// The dead-letter copy carries reason and description both as fields and as
// the application properties PropertyDeadLetterReason and
// PropertyDeadLetterErrorDescription. On a dead-letter queue it returns an
// error wrapping ErrDeadLetterQueue and leaves the lock held.
func (q *Queue) DeadLetter(token [16]byte, reason, description string, propertiesToModify map[string]any) error {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	if q.dlq == nil {
		if _, ok := q.locked[token]; !ok {
			q.counters.LockLost++
			return ErrLockLost
		}
		return fmt.Errorf("dead-letter in %s: %w", q.name, ErrDeadLetterQueue)
	}
	e, err := q.unlock(token)
	if err != nil {
		return err
	}
	mergeProperties(&e.msg, propertiesToModify)
	q.deadLetter(e, reason, description, now)
	q.dispatchPair(now)
	return nil
}

// RenewLock extends the lock token holds to LockDuration from now and
// returns the new expiry.
func (q *Queue) RenewLock(token [16]byte) (lockedUntil time.Time, err error) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	e, ok := q.locked[token]
	if !ok {
		q.counters.LockLost++
		return time.Time{}, ErrLockLost
	}
	e.lockedUntil = now.Add(q.opts.LockDuration)
	q.counters.Renewed++
	return e.lockedUntil, nil
}

// ExpireLock makes the lock token holds expire now, as if the handler had
// overrun it, and reports whether there was such a lock. The message is
// treated as after any lock expiry.
func (q *Queue) ExpireLock(token [16]byte) bool {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	e, ok := q.locked[token]
	if !ok {
		return false
	}
	q.expireLock(e, now)
	q.dispatchPair(now)
	return true
}

// ExpireLocks makes every lock on the queue expire now.
func (q *Queue) ExpireLocks() {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	for _, e := range q.locked {
		q.expireLock(e, now)
	}
	q.dispatchPair(now)
}

// Peek returns up to max messages, available and locked, in sequence-number
// order, without locking them. Lock tokens are zero; LockedUntil is set on
// locked messages and DeliveryCount is the count so far.
func (q *Queue) Peek(max int) []ReceivedMessage {
	if max <= 0 {
		return nil
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	all := q.sortedEntries()
	all = all[:min(max, len(all))]
	out := make([]ReceivedMessage, len(all))
	for i, e := range all {
		out[i] = e.view(false)
		if e.availIdx < 0 {
			out[i].LockedUntil = e.lockedUntil
		}
	}
	return out
}

// Counts returns the queue's counters, with every deadline that has passed
// applied first, as Snapshot does; it copies no message. It holds the
// queue's lock only for the copy of the counters, so progress can be polled
// while a benchmark or test runs without slowing the queue's other callers,
// which Snapshot, copying every message under the lock, does.
func (q *Queue) Counts() Counters {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	return q.counters
}

// Snapshot returns a consistent copy of the queue's contents and counters.
// It copies every message of the queue and its dead-letter queue under the
// queue's lock; use Counts to read the counters alone.
func (q *Queue) Snapshot() Snapshot {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	s := Snapshot{Counters: q.counters, BlockedReceivers: q.blocked, Scheduled: q.scheduledViews()}
	for _, e := range q.sortedEntries() {
		if e.availIdx >= 0 {
			s.Active = append(s.Active, e.view(false))
		} else {
			s.Locked = append(s.Locked, e.view(true))
		}
	}
	if q.dlq != nil {
		for _, e := range q.dlq.sortedEntries() {
			s.DeadLetters = append(s.DeadLetters, e.view(e.availIdx < 0))
		}
	}
	return s
}

// sortedEntries returns the available and locked entries by sequence
// number. Requires q.s.mu.
func (q *Queue) sortedEntries() []*entry {
	all := make([]*entry, 0, q.avail.Len()+len(q.locked))
	all = append(all, q.avail.items...)
	for _, e := range q.locked {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	return all
}

// unlock removes the lock token holds and returns its entry, or counts and
// returns ErrLockLost. Requires q.s.mu and a prior sweep.
func (q *Queue) unlock(token [16]byte) (*entry, error) {
	e, ok := q.locked[token]
	if !ok {
		q.counters.LockLost++
		return nil, ErrLockLost
	}
	delete(q.locked, token)
	e.token = [16]byte{}
	e.lockedUntil = time.Time{}
	return e, nil
}

// expireLock ends e's lock as a lapse. Requires q.s.mu.
func (q *Queue) expireLock(e *entry, now time.Time) {
	delete(q.locked, e.token)
	e.token = [16]byte{}
	e.lockedUntil = time.Time{}
	q.counters.LockExpired++
	q.returnCounted(e, now)
}

// returnCounted returns an unlocked entry whose delivery counts: to the
// dead-letter queue if it has used up its deliveries, else to the available
// messages. Requires q.s.mu.
func (q *Queue) returnCounted(e *entry, now time.Time) {
	if q.dlq != nil && int64(e.deliveries) >= int64(q.opts.MaxDeliveryCount) {
		q.deadLetter(e, ReasonMaxDeliveryCountExceeded,
			fmt.Sprintf("Message could not be consumed after %d delivery attempts.", q.opts.MaxDeliveryCount), now)
		return
	}
	q.makeAvailable(e, now)
}

// makeAvailable adds an unlocked entry to the available messages, or expires
// it at once if its time-to-live has passed. Requires q.s.mu.
func (q *Queue) makeAvailable(e *entry, now time.Time) {
	if q.dlq != nil && !e.expiresAt.IsZero() {
		if !now.Before(e.expiresAt) {
			q.expire(e, now)
			return
		}
		heap.Push(&q.expiring, e)
	}
	heap.Push(&q.avail, e)
	q.s.notify()
}

// expire handles an unlocked entry whose time-to-live has passed. Requires
// q.s.mu.
func (q *Queue) expire(e *entry, now time.Time) {
	q.counters.Expired++
	if q.opts.DeadLetteringOnMessageExpiration {
		q.deadLetter(e, ReasonTTLExpired, descriptionTTLExpired, now)
	}
}

// deadLetter moves an unlocked entry of a main queue to its dead-letter
// queue. Requires q.s.mu.
func (q *Queue) deadLetter(e *entry, reason, description string, now time.Time) {
	if e.msg.ApplicationProperties == nil {
		e.msg.ApplicationProperties = make(map[string]any, 2)
	}
	e.msg.ApplicationProperties[PropertyDeadLetterReason] = reason
	e.msg.ApplicationProperties[PropertyDeadLetterErrorDescription] = description
	e.dlReason, e.dlDescription = reason, description
	e.deliveries = 0
	q.counters.DeadLettered++
	q.dlq.counters.Sent++
	q.dlq.makeAvailable(e, now)
}

// sweep applies every deadline that has passed, on q and on the other queue
// of its pair, and returns the time it used. Requires q.s.mu.
func (q *Queue) sweep() time.Time {
	now := q.clock.Now()
	main := q
	if q.main != nil {
		main = q.main
	}
	main.activate(now)
	main.sweepEntity(now)
	main.dlq.sweepEntity(now)
	q.dispatchPair(now)
	return now
}

// sweepEntity expires the locks and messages of q alone. Requires q.s.mu.
func (q *Queue) sweepEntity(now time.Time) {
	if len(q.locked) > 0 && !now.Before(q.earliestLock) {
		var earliest time.Time
		for _, e := range q.locked {
			if !now.Before(e.lockedUntil) {
				q.expireLock(e, now)
			} else if earliest.IsZero() || e.lockedUntil.Before(earliest) {
				earliest = e.lockedUntil
			}
		}
		q.earliestLock = earliest
	}
	for {
		e := q.expiring.peek()
		if e == nil || now.Before(e.expiresAt) {
			break
		}
		heap.Pop(&q.expiring)
		heap.Remove(&q.avail, e.availIdx)
		q.expire(e, now)
	}
}

// nextDeadline returns the earliest future time at which a lock, a
// time-to-live or a scheduled enqueue time of q's pair can change what is
// available. Requires q.s.mu.
func (q *Queue) nextDeadline() (time.Time, bool) {
	main := q
	if q.main != nil {
		main = q.main
	}
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, x := range []*Queue{main, main.dlq} {
		for _, e := range x.locked {
			consider(e.lockedUntil)
		}
	}
	if main.opts.DeadLetteringOnMessageExpiration {
		if e := main.expiring.peek(); e != nil {
			consider(e.expiresAt)
		}
	}
	if t, ok := main.nextScheduled(); ok {
		consider(t)
	}
	return next, !next.IsZero()
}

// mergeProperties sets props on m's application properties.
func mergeProperties(m *Message, props map[string]any) {
	if len(props) == 0 {
		return
	}
	if m.ApplicationProperties == nil {
		m.ApplicationProperties = make(map[string]any, len(props))
	}
	for k, v := range props {
		m.ApplicationProperties[k] = v
	}
}
