package breaker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Options configure a Breaker. The zero value of each field selects its
// default.
type Options struct {
	// Threshold is the number of consecutive deliveries failed by a
	// dependency (idempotent.Result.DependencyFailed) that opens the
	// breaker, or with a Probe makes it ask the probe first: a successful
	// probe keeps it closed, and the entities (Result.Key) of those
	// failures no longer count (see the package documentation). Default 5.
	Threshold int
	// Probe, if set, is called when Threshold failures in a row would open
	// the breaker, and while it is open, after each backoff, to learn
	// whether the dependencies answer; a nil error keeps or closes the
	// breaker and receiving resumes. It must be cheap and must not touch
	// any message. Without a probe the breaker lets one message
	// through after each backoff (half-open) and its result decides, which
	// costs that message one delivery per attempt during an outage.
	Probe func(ctx context.Context) error
	// ProbeTimeout bounds one Probe call. Default 10s.
	ProbeTimeout time.Duration
	// MinBackoff is the wait after the breaker opens before the first probe
	// or trial delivery. It doubles after each failed attempt, and with each
	// reopening until a delivery succeeds, up to MaxBackoff. Defaults 1s
	// and 1m.
	MinBackoff, MaxBackoff time.Duration
	// OnChange, if set, is called with every change of state, with the
	// breaker's lock held: it must not call the Breaker. A metric of the
	// state hangs on it (see package worker/otelworker).
	OnChange func(State)
}

// State is a Breaker's state.
type State int

// The states of a Breaker.
const (
	Closed   State = iota // receiving
	Open                  // not receiving; waiting to probe
	HalfOpen              // without a probe: one trial delivery at a time
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	default:
		return "closed"
	}
}

// Breaker stops a worker's receive loop while a dependency fails: a
// worker.Gate. The receive loop calls Admit before every receive; handlers
// call Record with every result. It is safe for concurrent use; one
// Breaker serves one Worker.
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
type Breaker struct {
	o   Options
	log *slog.Logger

	mu          sync.Mutex
	state       State
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
	summarized  int64 // opened at the last Summary
}

var (
	_ worker.Gate       = (*Breaker)(nil)
	_ worker.Summarizer = (*Breaker)(nil)
)

// maxExcused bounds the entities the breaker excuses; past it, it forgets
// them all (which costs at most another probe, or without a probe a
// reopening, for an entity that still fails).
const maxExcused = 1024

// New returns a closed Breaker. logger may be nil.
func New(o Options, logger *slog.Logger) (*Breaker, error) {
	if o.Threshold == 0 {
		o.Threshold = 5
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 10 * time.Second
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Threshold < 0 || o.ProbeTimeout < 0 || o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("breaker: threshold %d, probe timeout %v, backoff %v to %v: want non-negative values, min at most max", o.Threshold, o.ProbeTimeout, o.MinBackoff, o.MaxBackoff)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{o: o, log: logger, changed: make(chan struct{}),
		suspects: make(map[string]struct{}), excused: make(map[string]struct{})}, nil
}

// Admit blocks while the breaker is open, probing after each backoff, and
// while it checks whether to open, and returns the receive's context,
// derived from rx, which the breaker cancels when it opens; ok is false
// once ctx ends. When it is half-open the Admission is one trial message.
func (b *Breaker) Admit(ctx, rx context.Context) (rctx context.Context, a worker.Admission, ok bool) {
	for {
		b.mu.Lock()
		if b.state == Closed && b.checking {
			b.mu.Unlock()
			b.check(ctx)
			if ctx.Err() != nil {
				return nil, worker.Admission{}, false
			}
			continue
		}
		if b.state == Closed || (b.state == HalfOpen && !b.trial) {
			rctx, cancel := context.WithCancel(rx)
			trial := b.state == HalfOpen
			a = worker.Admission{Done: func(received int) { b.received(cancel, trial, received) }}
			if trial {
				b.trial, a.Trial, a.Max = true, true, 1
			}
			b.cancelRx = cancel
			b.mu.Unlock()
			return rctx, a, true
		}
		changed, state, wait := b.changed, b.state, time.Until(b.nextAttempt)
		b.mu.Unlock()

		if state == HalfOpen { // the trial is out: wait for its result
			select {
			case <-ctx.Done():
				return nil, worker.Admission{}, false
			case <-changed:
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, worker.Admission{}, false
		case <-changed:
			t.Stop()
			continue
		case <-t.C:
		}
		b.attempt(ctx)
	}
}

// received ends an admitted receive: it forgets and cancels its context,
// and gives back a half-open trial for which no message arrived.
func (b *Breaker) received(cancel context.CancelFunc, trial bool, n int) {
	b.mu.Lock()
	b.cancelRx = nil
	if trial && n == 0 {
		b.trial = false
		b.notify()
	}
	b.mu.Unlock()
	cancel()
}

// probe calls the probe under ProbeTimeout.
func (b *Breaker) probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	defer cancel()
	return b.o.Probe(pctx)
}

// check asks the probe whether the run of failures that reached the
// threshold is the dependency's: a failed probe opens the breaker, a
// successful one excuses the run's entities and resumes receiving. It runs
// on the receive loop, which receives nothing meanwhile. A success
// recorded meanwhile does not decide it: the probe does.
func (b *Breaker) check(ctx context.Context) {
	err := b.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.checking || b.state != Closed {
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
func (b *Breaker) excuse() []string {
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
func (b *Breaker) attempt(ctx context.Context) {
	if b.o.Probe == nil {
		b.mu.Lock()
		if b.state == Open {
			b.attempts++
			b.setState(HalfOpen)
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
	if b.state != Open {
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

// Record takes the decision of one delivery. A decision that is not
// Telling (the handler was cut off by shutdown or lost its lock) counts
// for nothing; Trial marks the half-open trial delivery.
func (b *Breaker) Record(d worker.Decision) {
	res, trial, counts := d.Result, d.Trial, d.Telling
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
		case Closed:
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
		case HalfOpen:
			b.open(res, nil)
		}
	default:
		if res.Outcome.Settlement() != idempotent.Abandon { // the entity's delivery succeeded
			delete(b.excused, res.Key)
		}
		b.backoff = 0
		if b.state != Closed {
			b.close("a delivery succeeded (outcome " + res.Outcome.String() + ")")
		} else if !b.checking { // a check keeps its run for the probe to judge
			clear(b.suspects)
			b.failures = 0
		}
	}
}

// open stops receiving; probeErr is the failure of the probe asked before
// opening, if one was. b.mu is held.
func (b *Breaker) open(res idempotent.Result, probeErr error) {
	if b.backoff == 0 {
		b.backoff = b.o.MinBackoff
	} else {
		b.backoff = min(2*b.backoff, b.o.MaxBackoff)
	}
	now := time.Now()
	if b.state == Closed {
		b.openedAt = now
		b.attempts = 0
		b.opened++
	}
	b.nextAttempt = now.Add(b.backoff)
	if b.cancelRx != nil {
		b.cancelRx() // the receive in progress would only bring more failures
	}
	wasClosed := b.state == Closed
	b.setState(Open)
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
func (b *Breaker) close(why string) {
	b.excuse()
	b.trial = false
	b.setState(Closed)
	b.log.Info("circuit breaker closed: receiving resumed", "why", why, "open_ms", time.Since(b.openedAt).Milliseconds(), "attempts", b.attempts)
}

// setState changes the state and wakes admit. b.mu is held.
func (b *Breaker) setState(s State) {
	b.state = s
	if b.o.OnChange != nil {
		b.o.OnChange(s)
	}
	b.notify()
}

// notify wakes everyone waiting for a change. b.mu is held.
func (b *Breaker) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// State returns the breaker's state now.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Paused reports whether the breaker is open or half-open, that is,
// whether the worker has stopped receiving because a dependency fails. A
// readiness probe can report it.
func (b *Breaker) Paused() bool { return b.State() != Closed }

// Opened returns how often the breaker has opened.
func (b *Breaker) Opened() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}

// Summary adds the breaker to the worker's summaries: breaker_opened, how
// often it opened, and breaker, its state. It shows trouble when the
// breaker is not closed or opened since the last summary (when final is
// set: ever).
func (b *Breaker) Summary(final bool) ([]slog.Attr, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	since := b.summarized
	if final {
		since = 0
	}
	b.summarized = b.opened
	return []slog.Attr{slog.Int64("breaker_opened", b.opened), slog.String("breaker", b.state.String())},
		b.opened > since || b.state != Closed
}
