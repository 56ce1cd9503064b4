package worker

import (
	"sync"
	"sync/atomic"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Stats counts what a Worker has done. Outcomes counts the deliveries
// handled by outcome (every outcome a handler returns, known or not);
// DeadLettered and Retried count those whose outcome settles by a
// dead-letter and by an abandon (idempotent.Outcome.Settlement), Retried
// including CutOff, the deliveries the shutdown grace cancelled, and
// Scheduled, those retried by a scheduled copy rather than abandoned
// (ScheduleFailed counts the schedulings that failed: abandoned).
// LockLost counts deliveries whose lock was lost during handling or
// settlement; SettleFailed counts settlements that failed for any reason.
// Renewed and RenewFailed count lock renewals that succeeded and that
// failed for another reason than a lost lock. ReceiveFailed counts failed
// receive calls.
type Stats struct {
	Received                            int64
	Outcomes                            map[idempotent.Outcome]int64
	DeadLettered, Retried, CutOff       int64
	LockLost, SettleFailed              int64
	Renewed, RenewFailed, ReceiveFailed int64
	Scheduled, ScheduleFailed           int64
}

// Processed returns the number of deliveries whose handling ended,
// whatever the outcome.
func (s Stats) Processed() int64 {
	var n int64
	for _, c := range s.Outcomes {
		n += c
	}
	return n
}

// Stats returns the counts so far. It is safe to call while Run runs.
func (w *Worker) Stats() Stats {
	return Stats{
		Received: w.received.Load(), Outcomes: w.outcomes.snapshot(),
		DeadLettered: w.deadLettered.Load(), Retried: w.retried.Load(), CutOff: w.cutOff.Load(),
		LockLost: w.lockLost.Load(), SettleFailed: w.settleFailed.Load(),
		Renewed: w.renewed.Load(), RenewFailed: w.renewFailed.Load(), ReceiveFailed: w.receiveFailed.Load(),
		Scheduled: w.scheduled.Load(), ScheduleFailed: w.scheduleFailed.Load(),
	}
}

// outcomeCounts counts deliveries by outcome: the outcomes of the
// idempotent package in an array of atomics, any other in a map.
type outcomeCounts struct {
	small [32]atomic.Int64
	mu    sync.Mutex
	other map[idempotent.Outcome]int64
}

func (c *outcomeCounts) add(o idempotent.Outcome) {
	if o >= 0 && int(o) < len(c.small) {
		c.small[o].Add(1)
		return
	}
	c.mu.Lock()
	if c.other == nil {
		c.other = make(map[idempotent.Outcome]int64)
	}
	c.other[o]++
	c.mu.Unlock()
}

func (c *outcomeCounts) snapshot() map[idempotent.Outcome]int64 {
	m := make(map[idempotent.Outcome]int64)
	for i := range c.small {
		if n := c.small[i].Load(); n != 0 {
			m[idempotent.Outcome(i)] = n
		}
	}
	c.mu.Lock()
	for o, n := range c.other {
		m[o] = n
	}
	c.mu.Unlock()
	return m
}
