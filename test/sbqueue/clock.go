package sbqueue

import (
	"slices"
	"sync"
	"time"
)

// Clock is the model's source of time. A Queue reads it on every operation
// to decide which locks, messages and duplicate-detection records have
// expired, and asks it to wake blocked receivers when the next of those
// deadlines arrives.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now reports the current time on this clock.
	Now() time.Time

	// AtFunc arranges for f to be called once the clock reads t or later.
	// The returned stop function cancels the call if it has not happened
	// yet and reports whether it did so. f must not block.
	AtFunc(t time.Time, f func()) (stop func() bool)
}

// RealClock returns the Clock of the wall clock: Now is time.Now and AtFunc
// uses time.AfterFunc.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AtFunc(t time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(t), f).Stop
}

// VirtualClock is a Clock that moves only when Advance is called, so tests
// can reach a lock expiry or the edge of a duplicate-detection window without
// sleeping. It is safe for concurrent use.
type VirtualClock struct {
	mu     sync.Mutex
	now    time.Time
	nextID uint64
	timers map[uint64]virtualTimer
}

type virtualTimer struct {
	at time.Time
	f  func()
}

var _ Clock = (*VirtualClock)(nil)

// NewVirtualClock returns a VirtualClock that reads start until advanced.
func NewVirtualClock(start time.Time) *VirtualClock {
	return &VirtualClock{now: start, timers: make(map[uint64]virtualTimer)}
}

// Now reports the clock's current time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (a negative d is treated as zero) and
// then calls, on the calling goroutine and in time order, every function
// registered with AtFunc whose time has been reached. So when Advance returns,
// every receiver blocked on a queue using this clock has been told to
// re-check its queue.
func (c *VirtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	var due []virtualTimer
	for id, t := range c.timers {
		if !c.now.Before(t.at) {
			due = append(due, t)
			delete(c.timers, id)
		}
	}
	c.mu.Unlock()

	slices.SortStableFunc(due, func(a, b virtualTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}

// AtFunc arranges for f to be called by the Advance that moves the clock to t
// or later. If the clock already reads t or later, f is called at once in
// its own goroutine.
func (c *VirtualClock) AtFunc(t time.Time, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.now.Before(t) {
		go f()
		return func() bool { return false }
	}
	id := c.nextID
	c.nextID++
	c.timers[id] = virtualTimer{at: t, f: f}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[id]
		delete(c.timers, id)
		return ok
	}
}
