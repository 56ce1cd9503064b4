package worker

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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
//
// It opens only on evidence that the dependency fails, never because the
// same few messages keep failing:
//
//   - A run is the dependency failures (Result.DependencyFailed) since the
//     last success; failures of excused entities (below) are not part of
//     it. When it reaches Threshold and a Probe is configured, the breaker
//     pauses receiving and asks the probe before opening: a failed probe
//     opens it; a successful one means the failures are the messages' own
//     (a stored document that cannot be decoded, a partition that always
//     fails): the breaker stays closed, never having opened, and the
//     entities (Result.Key) of the run are excused. Without a probe the
//     run opens it.
//   - An excused entity's failures are not counted again, so they can
//     neither open the breaker nor reopen it, until a delivery of that
//     entity ends in anything but a retry. Entities are excused when the breaker learns that
//     the dependency answers after it suspected it: the probe succeeded
//     (before opening, or closing it), or a delivery succeeded while it was
//     open or half-open. A half-open trial that fails for an excused
//     entity lets the next trial through instead of reopening. A failure
//     without a Key is an entity of its own, never excused. Past
//     maxExcused entities the breaker forgets them all, which costs an
//     entity that still fails one more probe.
//
// A message whose failure is its own is abandoned after every delivery as
// before, and the broker dead-letters it at MaxDeliveryCount, while the
// other messages flow. Without a probe the breaker cannot tell poison
// messages from an outage until a delivery succeeds: Threshold failures in
// a row open it, and a half-open trial may draw the same poison message.
type breaker struct {
	o       BreakerOptions
	max     int // the worker's concurrency
	log     *slog.Logger
	enabled bool

	mu          sync.Mutex
	state       breakerState
	failures    int                 // the run: dependency failures counted since the last success, check or close
	suspects    map[string]struct{} // the entities of the run
	excused     map[string]struct{} // entities whose failures are their own: not counted
	unkeyed     int                 // failures without a key so far, to name each as an entity of its own
	checking    bool                // closed, receiving paused: the probe decides whether to open
	last        idempotent.Result   // the last counted failure, for the logs
	backoff     time.Duration       // the current open period; 0 after a success
	openedAt    time.Time
	nextAttempt time.Time
	attempts    int  // probes or trials since it opened
	trial       bool // half-open: the trial delivery is out
	changed     chan struct{}
	cancelRx    context.CancelFunc // cancels the receive in progress
	opened      int64
	onState     func(breakerState) // if set, called with every state change, b.mu held
}

// maxExcused bounds the entities the breaker excuses; past it, it forgets
// them all (which costs at most another probe, or without a probe a
// reopening, for an entity that still fails).
const maxExcused = 1024

func newBreaker(o BreakerOptions, max int, log *slog.Logger) *breaker {
	return &breaker{o: o, max: max, log: log, enabled: o.Threshold > 0, changed: make(chan struct{}),
		suspects: make(map[string]struct{}), excused: make(map[string]struct{})}
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
// while it checks whether to open, and returns what the receive loop may do
// next, with a receive context derived from rx; ok is false once ctx ends.
func (b *breaker) admit(ctx, rx context.Context) (g grant, ok bool) {
	if !b.enabled {
		return grant{ctx: rx, max: b.max}, true
	}
	for {
		b.mu.Lock()
		if b.state == breakerClosed && b.checking {
			b.mu.Unlock()
			b.check(ctx)
			if ctx.Err() != nil {
				return grant{}, false
			}
			continue
		}
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

// probe calls the probe under ProbeTimeout.
func (b *breaker) probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	defer cancel()
	return b.o.Probe(pctx)
}

// check asks the probe whether the run of failures that reached the
// threshold is the dependency's: a failed probe opens the breaker, a
// successful one excuses the run's entities and resumes receiving. It runs
// on the receive loop, which receives nothing meanwhile. A success
// recorded meanwhile does not decide it: the probe does.
func (b *breaker) check(ctx context.Context) {
	err := b.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.checking || b.state != breakerClosed {
		return
	}
	b.checking = false
	if err != nil {
		b.open(b.last, err)
		return
	}
	n, keys := b.failures, b.excuse()
	b.log.Info("circuit breaker stays closed: the probe succeeded, so these failures are the messages' own; their entities' failures no longer count",
		"consecutive_failures", n, "keys", keys, "reason", b.last.Reason, "error", b.last.Err)
	b.notify()
}

// excuse moves the suspects to the excused entities and starts a new run;
// it returns some of their keys, for a log. b.mu is held.
func (b *breaker) excuse() []string {
	var keys []string
	if len(b.excused)+len(b.suspects) > maxExcused {
		clear(b.excused)
	}
	for k := range b.suspects {
		b.excused[k] = struct{}{}
		if len(keys) < 10 && !strings.HasPrefix(k, unkeyedPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	clear(b.suspects)
	b.failures = 0
	return keys
}

// unkeyedPrefix starts the name given to a failure without a key: no
// entity's key starts with a NUL.
const unkeyedPrefix = "\x00"

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
	err := b.probe(ctx)
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
		key := res.Key
		if key == "" {
			b.unkeyed++
			key = unkeyedPrefix + strconv.Itoa(b.unkeyed)
		}
		if _, own := b.excused[key]; own {
			return // its failures are its own; a half-open trial goes again
		}
		b.failures++
		b.suspects[key] = struct{}{}
		b.last = res
		switch b.state {
		case breakerClosed:
			switch {
			case b.checking || b.failures < b.o.Threshold:
			case b.o.Probe != nil:
				// Ask the probe before opening: receive nothing meanwhile.
				b.checking = true
				if b.cancelRx != nil {
					b.cancelRx()
				}
				b.notify()
			default:
				b.open(res, nil)
			}
		case breakerHalfOpen:
			b.open(res, nil)
		}
	default:
		if res.Outcome != idempotent.Transient { // the entity's delivery succeeded
			delete(b.excused, res.Key)
		}
		b.backoff = 0
		if b.state != breakerClosed {
			b.close("a delivery succeeded (outcome " + res.Outcome.String() + ")")
		} else if !b.checking { // a check keeps its run for the probe to judge
			clear(b.suspects)
			b.failures = 0
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

// open stops receiving; probeErr is the failure of the probe asked before
// opening, if one was. b.mu is held.
func (b *breaker) open(res idempotent.Result, probeErr error) {
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
	attrs := []any{"consecutive_failures", b.failures, "keys", len(b.suspects), "reason", res.Reason, "error", res.Err, "retry_in", b.backoff.String()}
	if probeErr != nil {
		attrs = append(attrs, "probe_error", probeErr)
	}
	if wasClosed {
		b.log.Warn("circuit breaker open: a dependency is failing; receiving paused", attrs...)
	} else {
		b.log.Warn("circuit breaker open again: the trial delivery failed; receiving paused", attrs...)
	}
}

// close resumes receiving; the entities that failed since the breaker
// opened are excused. b.mu is held.
func (b *breaker) close(why string) {
	b.excuse()
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
