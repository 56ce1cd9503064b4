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
	// failures no longer count towards it (see the package documentation).
	// Default 5.
	Threshold int
	// Spread is the number of distinct entities (Result.Key) failing
	// again, each within the breaker's last SpreadWindow deliveries, that
	// opens the breaker even when the Probe succeeds: the failure is not
	// the messages' own but one the probe cannot see (a store that refuses
	// writes and answers reads, a downstream API whose calls fail while
	// its health endpoint answers, one physical partition down). An
	// entity is failing again when its last three deliveries this breaker
	// saw all failed by a dependency, with no success of it in between, or
	// when a delivery whose DeliveryCount has reached Threshold failed by
	// one (several workers share its queue, each seeing a few): a
	// failure that passes on a later delivery (a throttled call, a
	// timeout) is noise, however many entities it strikes. The successes
	// of other entities do not reset the spread; an entity's own success
	// takes it out. Keep it below the worker's Concurrency: the messages
	// that fail return to the head of the queue and hold their handler
	// slots through the retry backoff, so a worker sees at most
	// Concurrency failing entities before the first of them is
	// dead-lettered. Fewer entities than Spread failing, however often,
	// are poison messages to the breaker, and never open it while the
	// probe succeeds. Zero (or negative) turns the rule off: set it when
	// the probe cannot see every failure the messages meet, to SpreadFor
	// the worker's Concurrency (DefaultSpread from a Concurrency of 6 on).
	Spread int
	// SpreadWindow is how many of the breaker's latest deliveries (those
	// whose results tell, see worker.Decision) an entity's failure counts
	// towards Spread. Default 50.
	SpreadWindow int
	// Probe, if set, is called when Threshold failures in a row, or Spread
	// failing entities, would open the breaker, and while it is open, after
	// each backoff, to learn whether the dependencies answer; a nil error
	// keeps or closes the breaker and receiving resumes, unless Spread
	// entities fail (see TrialBackoff). It must be cheap and must not touch
	// any message. Without a probe the breaker lets one message through
	// after each backoff (half-open) and its result decides, which costs
	// that message one delivery per attempt during an outage.
	Probe func(ctx context.Context) error
	// ProbeTimeout bounds one Probe call. Default 10s.
	ProbeTimeout time.Duration
	// MinBackoff is the wait after the breaker opens before the first probe
	// or trial delivery. It doubles after each failed attempt, and with each
	// reopening until a delivery succeeds, up to MaxBackoff. Defaults 1s
	// and 1m.
	MinBackoff, MaxBackoff time.Duration
	// TrialLimit is how many entities may fail in one trial after Spread
	// opened the breaker although the probe succeeded: a trial that fails
	// lets the next message through at once, so that poison messages at
	// the head of the queue (which may be what opened it) do not keep it
	// open, until TrialLimit entities have failed, which opens it again;
	// the first success closes it, and so does a trial that comes round to
	// an entity again after fewer than Spread failed. A worker with a
	// Scheduler moves each failed trial message off the head of the queue
	// (worker.Admission.DependencyWait); without one, every failed trial
	// message holds a handler slot through its retry backoff, and a trial
	// that waits for a slot draws the first of them again. Default Spread;
	// TrialLimitFor gives DefaultTrialLimit (7), or Concurrency-1 above 8.
	TrialLimit int
	// TrialBackoff is the wait after Spread opened the breaker although the
	// probe succeeded before its first trial: since the probe cannot tell
	// whether the dependency is back, only deliveries can, and each trial
	// costs the messages at the head of the queue a delivery (at most
	// TrialLimit of them), or, with a Scheduler, a scheduled copy. It doubles with each failed trial up to
	// MaxTrialBackoff, and starts again from TrialBackoff once the breaker
	// has stayed closed for TrialBackoff. With the defaults, 10m and 40m, trials come 10, 30, 70
	// and 110 minutes into an outage: an hour costs each message at most
	// five deliveries of the queue's MaxDeliveryCount (three before the
	// breaker opened, two trials), two hours seven. A worker on a
	// compressed clock (a simulation whose lock is a second) scales both.
	TrialBackoff, MaxTrialBackoff time.Duration
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
// It opens on evidence that the dependency fails, never because the same
// few messages keep failing:
//
//   - A run is the dependency failures (Result.DependencyFailed) since the
//     last success; failures of excused entities (below) are not part of
//     it. When it reaches Threshold and a Probe is configured, the breaker
//     pauses receiving and asks the probe before opening: a failed probe
//     opens it; a successful one means the failures are the messages' own
//     (a stored document that cannot be decoded, a partition that always
//     fails), unless Spread entities fail (next rule): the breaker stays
//     closed, never having opened, and the entities (Result.Key) of the
//     run are excused. Without a probe the run opens it.
//   - The spread is the distinct entities failing again (their last three
//     deliveries failed by a dependency) within the breaker's last
//     SpreadWindow deliveries, excused or not; the success of another
//     entity does not reset it. When it reaches Spread, the
//     breaker asks the probe (if any) and opens whatever it answers: a
//     failed probe is an outage the probe sees, and closes it when it
//     answers again; a successful one is an outage it cannot see, which
//     only deliveries can end. Then, after TrialBackoff, it lets one
//     message through at a time (half-open), asking that a message failing
//     by a dependency wait off the head of the queue until after the next
//     trial (worker.Admission.DependencyWait): a success closes it, a
//     dependency failure lets the next message through until TrialLimit
//     entities have failed in the trial, which opens it again for twice
//     the wait. A trial that comes round to an entity again has met every
//     failing message at the head: fewer than Spread entities are poison,
//     and close it; Spread or more open it again.
//   - An excused entity's failures are not counted in a run again, so they
//     can neither make it ask the probe nor, without a probe, reopen it,
//     until a delivery of that entity ends in anything but a retry.
//     Entities are excused when the breaker learns that the dependency
//     answers after it suspected it: the probe succeeded (before opening,
//     or closing it), or a delivery succeeded while it was open or
//     half-open. A half-open trial that fails for an excused entity lets
//     the next trial through instead of reopening. A failure without a
//     Key is an entity of its own, never excused. Past maxExcused
//     entities the breaker forgets them all, which costs an entity that
//     still fails one more probe.
//   - With a Probe, a dependency failure of a redelivered message
//     (DeliveryCount 2 or more), excused or not, makes it ask the probe as
//     a run reaching Threshold does: the message failed before, here or on
//     another worker sharing its queue, and on a quiet queue each breaker
//     may see too few failures for a run; asked at once, each opens at the
//     cost of one delivery of the message.
//
// A message whose failure is its own is abandoned after every delivery as
// before, and the broker dead-letters it at MaxDeliveryCount, while the
// other messages flow. Fewer than Spread entities failing again within
// SpreadWindow deliveries never open the breaker while the probe succeeds;
// Spread or more do, even when every one of them is poison (Spread poison messages
// at once, or at the head of a backlog, pause the worker until a trial
// gets past them). Without a probe the breaker cannot tell poison
// messages from an outage until a delivery succeeds: Threshold failures in
// a row open it, and a half-open trial may draw the same poison message.
type Breaker struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex
	state    State
	failures int                 // the run: dependency failures counted since the last success, check or close
	suspects map[string]struct{} // the entities of the run
	excused  map[string]struct{} // entities whose failures are their own: not counted in a run
	// failing holds the entities whose latest delivery failed by a
	// dependency: how many of their deliveries failed in a row, and the
	// delivery (seq) of the last; entries more than SpreadWindow deliveries
	// old are dropped. Those failing again make the spread.
	failing map[string]failure
	seq     uint64 // telling deliveries recorded
	// passed holds the entities a blind trial got past before a success
	// closed it: not counted in the spread until they succeed.
	passed   map[string]struct{}
	unkeyed  int  // failures without a key so far, to name each as an entity of its own
	checking bool // closed, receiving paused: the probe decides whether to open
	// blind is set while the breaker is open because Spread entities fail
	// although the probe succeeds: trials, not the probe, close it.
	blind        bool
	trialBackoff time.Duration       // the current wait of a blind opening; 0 before the first
	round        map[string]struct{} // the entities that failed in the current blind trial
	closedAt     time.Time
	last         idempotent.Result // the last counted failure, for the logs
	backoff      time.Duration     // the current open period; 0 after a success
	openedAt     time.Time
	nextAttempt  time.Time
	attempts     int  // probes or trials since it opened
	trial        bool // half-open: the trial delivery is out
	changed      chan struct{}
	cancelRx     context.CancelFunc // cancels the receive in progress
	opened       int64
	summarized   int64 // opened at the last Summary
}

var (
	_ worker.Gate       = (*Breaker)(nil)
	_ worker.Summarizer = (*Breaker)(nil)
)

// DefaultSpread is the Spread a deployment with the worker's default
// Concurrency of 8 sets: five entities failing again, against the few
// poison entities a backlog may hold at once.
const DefaultSpread = 5

// SpreadFor returns the Spread for a worker of the given Concurrency:
// DefaultSpread, or below a Concurrency of 6 one less than it (at least
// 2), since a worker whose handler slots all hold failing messages sees no
// other entity before the first of them is dead-lettered.
func SpreadFor(concurrency int) int { return min(DefaultSpread, max(concurrency-1, 2)) }

// DefaultTrialLimit is the least TrialLimit that TrialLimitFor gives: a
// trial passes up to seven failing entities at the head of the queue.
const DefaultTrialLimit = 7

// TrialLimitFor returns the TrialLimit for a worker of the given
// Concurrency: one less than it, and at least DefaultTrialLimit. A worker
// with a Scheduler moves each message that fails in a trial off the head
// of the queue (worker.Admission.DependencyWait), so a trial gets past
// more failing messages than its handler slots; without one, a trial
// meets the first of them again once every slot holds one, which ends it.
func TrialLimitFor(concurrency int) int { return max(concurrency-1, DefaultTrialLimit) }

// maxExcused bounds the entities the breaker excuses, and those of its
// spread; past it, it forgets them all (which costs at most another
// probe, or without a probe a reopening, for an entity that still fails,
// and a spread counted again from none).
const maxExcused = 1024

// New returns a closed Breaker. logger may be nil.
func New(o Options, logger *slog.Logger) (*Breaker, error) {
	if o.Threshold == 0 {
		o.Threshold = 5
	}
	if o.SpreadWindow == 0 {
		o.SpreadWindow = 50
	}
	if o.TrialLimit <= 0 {
		o.TrialLimit = max(o.Spread, 1)
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
	if o.TrialBackoff == 0 {
		o.TrialBackoff = 10 * time.Minute
	}
	if o.MaxTrialBackoff == 0 {
		o.MaxTrialBackoff = max(40*time.Minute, o.TrialBackoff)
	}
	if o.Threshold < 0 || o.ProbeTimeout < 0 || o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff ||
		o.SpreadWindow < 0 || o.TrialBackoff < 0 || o.MaxTrialBackoff < o.TrialBackoff {
		return nil, fmt.Errorf("breaker: threshold %d, spread window %d, probe timeout %v, backoff %v to %v, trial backoff %v to %v: want non-negative values, min at most max",
			o.Threshold, o.SpreadWindow, o.ProbeTimeout, o.MinBackoff, o.MaxBackoff, o.TrialBackoff, o.MaxTrialBackoff)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{o: o, log: logger, changed: make(chan struct{}),
		suspects: make(map[string]struct{}), excused: make(map[string]struct{}),
		failing: make(map[string]failure), passed: make(map[string]struct{}), round: make(map[string]struct{})}, nil
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
				if b.blind {
					// A message failing in this trial waits off the head
					// of the queue until after the next trial, which then
					// meets another message.
					a.DependencyWait = min(2*b.trialBackoff, b.o.MaxTrialBackoff)
				}
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
// threshold, or the spread that reached Spread, is the dependency's: a
// failed probe opens the breaker; a successful one opens it blind when the
// spread has reached Spread, and otherwise excuses the run's entities and
// resumes receiving. It runs on the receive loop, which receives nothing
// meanwhile. A success recorded meanwhile does not decide it: the probe
// does.
func (b *Breaker) check(ctx context.Context) {
	var err error
	if b.o.Probe != nil {
		err = b.probe(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.checking || b.state != Closed {
		return
	}
	b.checking = false
	switch spread := b.spread(); {
	case err != nil || b.o.Probe == nil:
		b.open(b.last, err)
	case b.o.Spread > 0 && spread >= b.o.Spread:
		b.openBlind(spread)
	default:
		n, keys := b.failures, b.excuse()
		b.log.Info("circuit breaker stays closed: the probe succeeded, so these failures are the messages' own; their entities' failures no longer count",
			"consecutive_failures", n, "keys", keys, "failing_entities", spread, "reason", b.last.Reason, "error", b.last.Err)
		b.notify()
	}
}

// redelivered is the DeliveryCount from which a dependency failure asks
// the probe by itself (see Record).
const redelivered = 2

// failingAgain is how many deliveries of an entity in a row must fail for
// it to count in the spread: a throttled call or a timeout that strikes
// a quarter of the deliveries strikes three in a row of one entity one
// time in 64, an outage every time.
const failingAgain = 3

// failure is an entity's run of failed deliveries.
type failure struct {
	n   int    // deliveries failed in a row
	seq uint64 // the breaker's delivery of the last
}

// spread drops the failures more than SpreadWindow deliveries old and
// returns how many entities are failing again among the rest. b.mu is
// held.
func (b *Breaker) spread() int {
	n := 0
	for k, f := range b.failing {
		switch {
		case b.seq-f.seq >= uint64(b.o.SpreadWindow):
			delete(b.failing, k)
		case f.n >= failingAgain:
			if _, ok := b.passed[k]; !ok {
				n++
			}
		}
	}
	return n
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
// there is no probe or it opened blind. The breaker is open when it is
// called.
func (b *Breaker) attempt(ctx context.Context) {
	b.mu.Lock()
	blind := b.blind
	b.mu.Unlock()
	if b.o.Probe == nil || blind {
		var err error
		if b.o.Probe != nil {
			err = b.probe(ctx) // an outage the probe now sees leaves the trials to it
			if ctx.Err() != nil {
				return
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.state != Open {
			return
		}
		b.attempts++
		if err != nil {
			b.blind = false
			b.backoff = min(max(2*b.backoff, b.o.MinBackoff), b.o.MaxBackoff)
			b.nextAttempt = time.Now().Add(b.backoff)
			b.log.Warn("circuit breaker probe failed: still not receiving", "attempt", b.attempts, "error", err, "retry_in", b.backoff.String())
			return
		}
		clear(b.round)
		b.setState(HalfOpen)
		b.log.Info("circuit breaker half-open: letting one message through", "attempt", b.attempts, "blind", blind)
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
	if counts {
		b.seq++
	}
	switch {
	case !counts:
	case res.DependencyFailed():
		key := res.Key
		if key == "" {
			b.unkeyed++
			key = unkeyedPrefix + strconv.Itoa(b.unkeyed)
		}
		if b.o.Spread > 0 {
			if len(b.failing) >= maxExcused {
				clear(b.failing)
			}
			f := b.failing[key]
			n := f.n + 1
			if d.DeliveryCount >= uint32(b.o.Threshold) {
				// Its message failed Threshold deliveries, across the
				// workers sharing its queue: failing again, however few of
				// them this breaker saw.
				n = max(n, failingAgain)
			}
			b.failing[key] = failure{n: n, seq: b.seq}
		}
		if b.blind {
			b.last = res
			if b.state == HalfOpen && trial {
				// A few poison messages at the head of the queue must not
				// keep it open: the next message goes, until TrialLimit
				// entities have failed in this trial, which opens it
				// again. A trial that comes round to an entity again has
				// met all the failing messages at the head: fewer than
				// Spread entities are poison, not an outage, and close it.
				_, again := b.round[key]
				b.round[key] = struct{}{}
				switch n := len(b.round); {
				case again && n < b.o.Spread:
					b.close(fmt.Sprintf("a trial came round to a failing entity again after %d failed: fewer than the spread of %d, so their failures are their own", n, b.o.Spread))
				case again || n >= b.o.TrialLimit:
					b.openBlind(n)
				}
			}
			return
		}
		if b.state == Closed && !b.checking && b.o.Spread > 0 && b.spread() >= b.o.Spread {
			b.last = res
			b.startCheck()
			return
		}
		// A redelivered message that fails by a dependency (it failed
		// before, on this worker or another) is a run by itself: on a
		// quiet queue shared by several workers, no one breaker may see
		// Threshold failures before MaxDeliveryCount, and each breaker
		// that asks at its first such failure opens at the cost of one
		// delivery of the message. The probe decides, each time, excused
		// or not: the outage that excused its entity may have ended and
		// another begun. A poison message costs a probe per delivery from
		// its second on.
		deep := b.o.Probe != nil && d.DeliveryCount >= redelivered
		if _, own := b.excused[key]; own && !(deep && b.state == Closed) {
			return // its failures are its own; a half-open trial goes again
		}
		b.failures++
		b.suspects[key] = struct{}{}
		b.last = res
		switch b.state {
		case Closed:
			if !b.checking && (b.failures >= b.o.Threshold || deep) {
				b.startCheck()
			}
		case HalfOpen:
			b.open(res, nil)
		}
	default:
		delete(b.failing, res.Key)
		if res.Outcome.Settlement() != idempotent.Abandon { // the entity's delivery succeeded
			delete(b.excused, res.Key)
			delete(b.passed, res.Key)
		}
		switch {
		case b.blind && !(b.state == HalfOpen && trial):
			// Open blind, only a trial decides: a delivery received before
			// it opened may succeed for an entity the outage spares.
		case b.state != Closed:
			b.backoff = 0
			b.close("a delivery succeeded (outcome " + res.Outcome.String() + ")")
		default:
			b.backoff = 0
			if !b.checking { // a check keeps its run for the probe to judge
				clear(b.suspects)
				b.failures = 0
			}
		}
	}
}

// startCheck pauses receiving for the probe to decide whether to open, or
// without a probe opens the breaker. b.mu is held.
func (b *Breaker) startCheck() {
	if b.o.Probe == nil {
		b.open(b.last, nil)
		return
	}
	b.checking = true
	if b.cancelRx != nil {
		b.cancelRx()
	}
	b.notify()
}

// open stops receiving; probeErr is the failure of the probe asked before
// opening, if one was. b.mu is held.
func (b *Breaker) open(res idempotent.Result, probeErr error) {
	if b.backoff == 0 {
		b.backoff = b.o.MinBackoff
	} else {
		b.backoff = min(2*b.backoff, b.o.MaxBackoff)
	}
	wasClosed := b.state == Closed
	b.stop(time.Now().Add(b.backoff))
	attrs := []any{"consecutive_failures", b.failures, "keys", len(b.suspects), "failing_entities", len(b.failing),
		"reason", res.Reason, "error", res.Err, "retry_in", b.backoff.String()}
	if probeErr != nil {
		attrs = append(attrs, "probe_error", probeErr)
	}
	if wasClosed {
		b.log.Warn("circuit breaker open: a dependency is failing; receiving paused", attrs...)
	} else {
		b.log.Warn("circuit breaker open again: the trial delivery failed; receiving paused", attrs...)
	}
}

// openBlind stops receiving because n entities fail although the probe,
// if any, succeeds: only trial deliveries can tell when the dependency is
// back. b.mu is held.
func (b *Breaker) openBlind(n int) {
	now := time.Now()
	switch {
	case b.trialBackoff == 0 || b.state == Closed && now.Sub(b.closedAt) > b.o.TrialBackoff:
		b.trialBackoff = b.o.TrialBackoff
	default:
		b.trialBackoff = min(2*b.trialBackoff, b.o.MaxTrialBackoff)
	}
	wasClosed := b.state == Closed
	b.blind = true
	b.stop(now.Add(b.trialBackoff))
	attrs := []any{"failing_entities", n, "spread", b.o.Spread, "window_deliveries", b.o.SpreadWindow,
		"reason", b.last.Reason, "error", b.last.Err, "retry_in", b.trialBackoff.String()}
	if wasClosed {
		b.log.Warn("circuit breaker open: deliveries of many entities fail by a dependency although its probe answers; receiving paused", attrs...)
	} else {
		b.log.Warn("circuit breaker open again: the trial deliveries failed by a dependency; receiving paused", attrs...)
	}
}

// stop opens the breaker until next, cancelling the receive in progress.
// b.mu is held.
func (b *Breaker) stop(next time.Time) {
	if b.state == Closed {
		b.openedAt = time.Now()
		b.attempts = 0
		b.opened++
	}
	b.nextAttempt = next
	if b.cancelRx != nil {
		b.cancelRx() // the receive in progress would only bring more failures
	}
	b.setState(Open)
}

// close resumes receiving; the entities that failed since the breaker
// opened are excused. b.mu is held.
func (b *Breaker) close(why string) {
	b.excuse()
	b.trial = false
	if b.blind {
		// A trial got past these: their failures are their own (poison
		// messages at the head of the queue), and no longer count in the
		// spread, until one of their deliveries succeeds.
		if len(b.passed)+len(b.round) > maxExcused {
			clear(b.passed)
		}
		for k := range b.round {
			b.passed[k] = struct{}{}
		}
	}
	b.blind = false
	clear(b.round)
	clear(b.failing) // the spread starts again: its entities may have passed
	b.closedAt = time.Now()
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
