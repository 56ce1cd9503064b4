package sbqueue

// Len returns how many messages the queue holds, available, locked (a
// locked message includes one sent on a receiver's link credit) and
// scheduled, with every deadline that has passed applied first, as
// Snapshot does. It copies no message and takes constant time, so a driver
// can test for an empty queue after every settlement; len(s.Active),
// len(s.Locked) and len(s.Scheduled) of a Snapshot s taken at the same
// moment are the same numbers.
func (q *Queue) Len() (available, locked, scheduled int) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.sweep()
	return q.avail.Len(), len(q.locked), len(q.sched.bySeq)
}
