package simulation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// driver moves the run along: it waits until the queues are empty, and it
// reports progress. It never moves a clock: locks lapse, backoffs end and
// keys expire on their own timers.
type driver struct {
	cfg      Config
	subs     []*subscription
	relay    *relayRun     // nil without inbox consumers, or once stopped
	changed  chan struct{} // every tracker's signal
	start    time.Time
	progress func(Progress)

	progressMu sync.Mutex // serialises progress calls

	mu    sync.Mutex
	phase string
}

// setPhase starts phase p and reports it.
func (d *driver) setPhase(p string) {
	d.mu.Lock()
	d.phase = p
	d.mu.Unlock()
	if d.progress != nil {
		d.report(d.snapshot(p))
	}
}

// report calls the progress callback, never concurrently.
func (d *driver) report(p Progress) {
	if d.progress == nil {
		return
	}
	d.progressMu.Lock()
	defer d.progressMu.Unlock()
	d.progress(p)
}

func (d *driver) snapshot(phase string) Progress {
	var p Progress
	for _, s := range d.subs {
		c := s.out.q.Counts() // counters alone: a Snapshot copies every message
		p.Sent += int(c.Sent)
		p.Settled += c.Completed + c.DeadLettered
		p.Deliveries += c.Delivered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if phase == "" {
		phase = d.phase
	}
	p.Phase, p.Elapsed = phase, time.Since(d.start)
	return p
}

// startProgress calls d.progress every ProgressInterval until the returned
// function is called.
func (d *driver) startProgress() (stop func()) {
	if d.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d.cfg.ProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.report(d.snapshot(""))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// errStalled reports a run in which nothing happened for StallTimeout.
var errStalled = errors.New("stalled: nothing settled although messages remain")

// empty reports whether every queue is empty (nothing available, nothing
// locked, which includes messages sent on link credit, nothing scheduled)
// and no delivery is in flight, and how many messages were settled so far.
// It runs after every settlement, so it reads counters and lengths only, in
// constant time per queue: a Snapshot would copy and sort every queued
// message.
func (d *driver) empty() (bool, int64) {
	empty, settled := true, int64(0)
	for _, s := range d.subs {
		c := s.out.q.Counts()
		settled += c.Completed + c.DeadLettered + c.Abandoned
		if active, locked, scheduled := s.out.q.Len(); active > 0 || locked > 0 || scheduled > 0 || s.tr.busy() {
			empty = false
		}
	}
	if empty && d.relay != nil && !d.relay.caughtUp(context.Background()) {
		empty = false // an event stored is not yet published
	}
	return empty, settled
}

// drain returns when every queue is empty: every message completed or
// dead-lettered. It looks whenever a settlement returns, and every half
// lock duration, since a message can also be dead-lettered by its lock
// lapsing. It fails if nothing is settled for StallTimeout.
func (d *driver) drain(ctx context.Context) error {
	tick := time.NewTicker(d.cfg.LockDuration / 2)
	defer tick.Stop()
	last, lastAt := int64(-1), time.Now()
	for {
		empty, settled := d.empty()
		if empty {
			return nil
		}
		if settled != last || d.scheduledPending() {
			// A scheduled retry waiting for its time is progress to come.
			last, lastAt = settled, time.Now()
		} else if time.Since(lastAt) >= d.cfg.StallTimeout {
			var inflight, active, locked int
			for _, s := range d.subs {
				a, l, _ := s.out.q.Len()
				active, locked = active+a, locked+l
				s.tr.mu.Lock()
				inflight += s.tr.inflight
				s.tr.mu.Unlock()
			}
			return fmt.Errorf("%w for %v: %d messages available, %d locked, %d deliveries in flight",
				errStalled, d.cfg.StallTimeout, active, locked, inflight)
		}
		select {
		case <-d.changed:
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
