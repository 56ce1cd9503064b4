package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// breakerState is the circuit breaker's state.
type breakerState int

const (
	breakerClosed   breakerState = iota // receiving
	breakerOpen                         // not receiving; waiting to probe
	breakerHalfOpen                     // without a probe: one trial delivery at a time
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half-open"
	default:
		return "closed"
	}
}

// breaker stops the receive loop while a dependency fails. The receive loop
// calls admit before every receive; handlers call record with every result.
// It is safe for concurrent use.
type breaker struct {
	o       BreakerOptions
	max     int // the worker's concurrency
	log     *slog.Logger
	enabled bool

	mu          sync.Mutex
	state       breakerState
	failures    int           // consecutive dependency failures
	backoff     time.Duration // the current open period; 0 after a success
	openedAt    time.Time
	nextAttempt time.Time
	attempts    int  // probes or trials since it opened
	trial       bool // half-open: the trial delivery is out
	changed     chan struct{}
	cancelRx    context.CancelFunc // cancels the receive in progress
	opened      int64
	onState     func(breakerState) // if set, called with every state change, b.mu held
}

func newBreaker(o BreakerOptions, max int, log *slog.Logger) *breaker {
	return &breaker{o: o, max: max, log: log, enabled: o.Threshold > 0, changed: make(chan struct{})}
}

// grant is the breaker's answer to admit: how many messages the loop may
// ask for, and the context to receive with, which the breaker cancels when
// it opens. done must be called when the receive has returned.
type grant struct {
	ctx    context.Context
	max    int
	trial  bool
	cancel context.CancelFunc
	b      *breaker
}

func (g grant) done() {
	if g.cancel == nil {
		return
	}
	g.b.mu.Lock()
	g.b.cancelRx = nil
	g.b.mu.Unlock()
	g.cancel()
}

// admit blocks while the breaker is open, probing after each backoff, and
// returns what the receive loop may do next, with a receive context derived
// from rx; ok is false once ctx ends.
func (b *breaker) admit(ctx, rx context.Context) (g grant, ok bool) {
	if !b.enabled {
		return grant{ctx: rx, max: b.max}, true
	}
	for {
		b.mu.Lock()
		if b.state == breakerClosed || (b.state == breakerHalfOpen && !b.trial) {
			rctx, cancel := context.WithCancel(rx)
			g = grant{ctx: rctx, max: b.max, cancel: cancel, b: b}
			if b.state == breakerHalfOpen {
				b.trial, g.trial, g.max = true, true, 1
			}
			b.cancelRx = cancel
			b.mu.Unlock()
			return g, true
		}
		changed, state, wait := b.changed, b.state, time.Until(b.nextAttempt)
		b.mu.Unlock()

		if state == breakerHalfOpen { // the trial is out: wait for its result
			select {
			case <-ctx.Done():
				return grant{}, false
			case <-changed:
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return grant{}, false
		case <-changed:
			t.Stop()
			continue
		case <-t.C:
		}
		b.attempt(ctx)
	}
}

// attempt probes the dependencies, or lets the breaker go half-open when
// there is no probe. The breaker is open when it is called.
func (b *breaker) attempt(ctx context.Context) {
	if b.o.Probe == nil {
		b.mu.Lock()
		if b.state == breakerOpen {
			b.attempts++
			b.setState(breakerHalfOpen)
			b.log.Info("circuit breaker half-open: letting one message through", "attempt", b.attempts)
		}
		b.mu.Unlock()
		return
	}
	pctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	err := b.o.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != breakerOpen {
		return // a delivery closed it meanwhile
	}
	b.attempts++
	if err == nil {
		b.close("the probe succeeded")
		return
	}
	b.backoff = min(2*b.backoff, b.o.MaxBackoff)
	b.nextAttempt = time.Now().Add(b.backoff)
	b.log.Warn("circuit breaker probe failed: still not receiving", "attempt", b.attempts, "error", err, "retry_in", b.backoff.String())
}

// record takes the result of one delivery. counts is false for results that
// say nothing about the dependencies (the handler was cut off by shutdown or
// lost its lock); trial marks the half-open trial delivery.
func (b *breaker) record(res idempotent.Result, trial, counts bool) {
	if !b.enabled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if trial {
		b.trial = false
		defer b.notify()
	}
	switch {
	case !counts:
	case res.DependencyFailed():
		b.failures++
		switch b.state {
		case breakerClosed:
			if b.failures >= b.o.Threshold {
				b.open(res)
			}
		case breakerHalfOpen:
			b.open(res)
		}
	default:
		b.failures = 0
		b.backoff = 0
		if b.state != breakerClosed {
			b.close("a delivery succeeded (outcome " + res.Outcome.String() + ")")
		}
	}
}

// trialUnused gives back a half-open trial for which no message arrived.
func (b *breaker) trialUnused() {
	b.mu.Lock()
	b.trial = false
	b.notify()
	b.mu.Unlock()
}

// open stops receiving. b.mu is held.
func (b *breaker) open(res idempotent.Result) {
	if b.backoff == 0 {
		b.backoff = b.o.MinBackoff
	} else {
		b.backoff = min(2*b.backoff, b.o.MaxBackoff)
	}
	now := time.Now()
	if b.state == breakerClosed {
		b.openedAt = now
		b.attempts = 0
		b.opened++
	}
	b.nextAttempt = now.Add(b.backoff)
	if b.cancelRx != nil {
		b.cancelRx() // the receive in progress would only bring more failures
	}
	wasClosed := b.state == breakerClosed
	b.setState(breakerOpen)
	attrs := []any{"consecutive_failures", b.failures, "reason", res.Reason, "error", res.Err, "retry_in", b.backoff.String()}
	if wasClosed {
		b.log.Warn("circuit breaker open: a dependency is failing; receiving paused", attrs...)
	} else {
		b.log.Warn("circuit breaker open again: the trial delivery failed; receiving paused", attrs...)
	}
}

// close resumes receiving. b.mu is held.
func (b *breaker) close(why string) {
	b.failures = 0
	b.trial = false
	b.setState(breakerClosed)
	b.log.Info("circuit breaker closed: receiving resumed", "why", why, "open_ms", time.Since(b.openedAt).Milliseconds(), "attempts", b.attempts)
}

// setState changes the state and wakes admit. b.mu is held.
func (b *breaker) setState(s breakerState) {
	b.state = s
	if b.onState != nil {
		b.onState(s)
	}
	b.notify()
}

// notify wakes everyone waiting for a change. b.mu is held.
func (b *breaker) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *breaker) current() breakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *breaker) openedCount() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}
