package simulation

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A run on the wall clock at the compressed time scale assumes that the
// process runs when its timers fire: a handler settles well within its 1 s
// lock (the worker keeps a fifth of it as slack), and a capture reaches the
// payments service within the 3 s key retention of the lookup before it. On
// a machine too busy to run the process for a second or more, those
// assumptions break without any defect: a settlement arrives after its lock
// lapsed, a capture after the service forgot the key, and the checker sees a
// message dead-lettered although handled, or a second charge.
//
// The run therefore measures its own scheduling delay, with a probe: a
// goroutine that sleeps Config.DelayProbeInterval at a time and records how
// much later than asked it woke (a spell, when that is at least the margin,
// a fifth of the lock duration). It also records every breach of a timing
// assumption as it happens: a settlement or lock renewal refused for a lost
// lock that no fault planned, and a charge made for an order already charged
// (the service had forgotten the key). A breach is covered when a spell
// overlaps its window: from the start of the lock (its last renewal) to the
// refusal, or from the payments link's last deadline check of the request to
// the charge. Only measured evidence explains a violation: see
// Report.TimingExplains.

// StallPoint names a point of the run at which Config.Stall is called.
type StallPoint string

// The points of Config.Stall.
const (
	// StallProbe is every wake of the delay probe, before it measures.
	StallProbe StallPoint = "probe"
	// StallSettle is every settlement and lock renewal, before it reaches
	// the queue.
	StallSettle StallPoint = "settle"
	// StallPayment is every request to the payments service, after the
	// link's last check of its deadline and before the service handles it.
	StallPayment StallPoint = "payment"
)

// Breach kinds.
const (
	BreachLock         = "lock"          // a settlement or renewal refused for a lock no fault ended
	BreachKeyRetention = "key retention" // a second charge: a capture reached the service after it forgot the key
)

// TimingReport is what the run measured of its own scheduling.
type TimingReport struct {
	ProbeInterval time.Duration // 0: the probe was off
	Margin        time.Duration // the slack the time scale keeps: a fifth of the lock duration
	MaxDelay      time.Duration // the probe's latest wake, beyond what it asked
	MaxDelayAt    time.Duration // when, since the run's start
	Spells        int           // wakes late by Margin or more
	Breaches      []Breach
}

// Breach is one breach of a timing assumption.
type Breach struct {
	Kind     string // BreachLock or BreachKeyRetention
	OrderID  string
	Queue    string        // the inbox consumer's, "" for the order writers'
	From, At time.Duration // the window, since the run's start
	// Delay is the largest scheduling delay of a spell overlapping the
	// window; 0: none, the breach is not explained by the machine.
	Delay time.Duration
}

// Covered reports whether a measured scheduling delay explains b.
func (b Breach) Covered() bool { return b.Delay > 0 }

// timing is the run's probe and its record of breaches. It is safe for
// concurrent use; a nil *timing records nothing.
type timing struct {
	start    time.Time
	interval time.Duration
	margin   time.Duration
	stall    func(StallPoint, string)

	mu       sync.Mutex
	max      time.Duration
	maxAt    time.Time
	spells   []spell
	breaches []breach
}

type spell struct {
	from, to time.Time
	late     time.Duration
}

type breach struct {
	kind, orderID, queue string
	from, at             time.Time
}

func newTiming(cfg Config, start time.Time) *timing {
	return &timing{start: start, interval: max(cfg.DelayProbeInterval, 0), margin: cfg.LockDuration / 5, stall: cfg.Stall}
}

// at calls the stall hook at point p for order id.
func (t *timing) at(p StallPoint, id string) {
	if t != nil && t.stall != nil {
		t.stall(p, id)
	}
}

// probe measures the scheduling delay until stop is closed; it returns at
// once if the probe is off.
func (t *timing) probe(stop <-chan struct{}) {
	if t.interval <= 0 {
		return
	}
	timer := time.NewTimer(t.interval)
	defer timer.Stop()
	for {
		asked := time.Now()
		timer.Reset(t.interval)
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		t.at(StallProbe, "")
		woke := time.Now()
		late := woke.Sub(asked) - t.interval
		t.mu.Lock()
		if late > t.max {
			t.max, t.maxAt = late, woke
		}
		if late >= t.margin {
			// The probe last ran when it asked: nothing of it ran since.
			t.spells = append(t.spells, spell{from: asked, to: woke, late: late})
		}
		t.mu.Unlock()
	}
}

// breach records a breach of kind for order id on queue, in the window from
// from to now.
func (t *timing) breach(kind, id, queue string, from time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.breaches = append(t.breaches, breach{kind: kind, orderID: id, queue: queue, from: from, at: time.Now()})
}

// report returns what t measured; call it once the probe stopped.
func (t *timing) report() TimingReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := TimingReport{ProbeInterval: t.interval, Margin: t.margin, MaxDelay: t.max, Spells: len(t.spells)}
	if !t.maxAt.IsZero() {
		r.MaxDelayAt = t.maxAt.Sub(t.start)
	}
	for _, b := range t.breaches {
		var delay time.Duration
		for _, s := range t.spells {
			if !s.to.Before(b.from) && !s.from.After(b.at) {
				delay = max(delay, s.late)
			}
		}
		r.Breaches = append(r.Breaches, Breach{Kind: b.kind, OrderID: b.orderID, Queue: b.queue, From: b.from.Sub(t.start), At: b.at.Sub(t.start), Delay: delay})
	}
	return r
}

// breachExplains lists the invariants each kind of breach can make fail
// without a defect: a lost lock makes a redelivery, and enough of them
// dead-letter a handled message (no-message-lost, status-is-highest-version),
// write a payment record more often than its claims allow
// (duplicates-change-nothing), or outlive an inbox marker
// (inbox-once-per-consumer); a forgotten key makes a second charge
// (one-charge-per-order), which the worker then dead-letters for
// reconciliation.
var breachExplains = map[string][]string{
	BreachLock:         {NoMessageLost, StatusIsHighestVersion, DuplicatesChangeNothing, InboxOncePerConsumer},
	BreachKeyRetention: {OneChargePerOrder, NoMessageLost},
}

// TimingExplains reports whether v is explained by the machine's scheduling
// delay rather than by the code: its order had a breach of a timing
// assumption that can make v's invariant fail, and a measured scheduling
// delay of at least the margin overlaps that breach. A violation of no
// order, or of an invariant no breach can break, is never explained.
func (r *Report) TimingExplains(v Violation) bool {
	if v.OrderID == "" {
		return false
	}
	for _, b := range r.Timing.Breaches {
		if b.OrderID == v.OrderID && b.Covered() && slices.Contains(breachExplains[b.Kind], v.Invariant) {
			return true
		}
	}
	return false
}

// TimingBroken reports whether the run has violations and every one of them
// is explained by measured scheduling delay (see TimingExplains): the
// machine was too busy for the time scale, and the run proves nothing
// either way.
func (r *Report) TimingBroken() bool {
	if len(r.Violations) == 0 {
		return false
	}
	for _, v := range r.Violations {
		if !r.TimingExplains(v) {
			return false
		}
	}
	return true
}

// ErrTiming is matched by Verdict's error when every violation of a run is
// explained by measured scheduling delay (Report.TimingBroken): not a
// correctness failure, and not a pass.
var ErrTiming = errors.New("the machine was too busy for the time scale")

// SuggestedScale returns the factor of the time scale that would have
// absorbed the run's largest measured delay within the margin, at least 2.
func (r TimingReport) SuggestedScale() int {
	if r.Margin <= 0 {
		return 2
	}
	return max(2, int((r.MaxDelay+r.Margin-1)/r.Margin)+1)
}

// timingNotice is the one-line explanation of a run whose timing broke.
func (r *Report) timingNotice() string {
	return fmt.Sprintf("the machine was too busy for the compressed time scale (max delay %v vs lock %v, margin %v); rerun with -scale %d or under virtual time (go test ./test/internal/simulation)",
		r.Timing.MaxDelay.Round(time.Millisecond), r.Config.LockDuration, r.Timing.Margin, r.Timing.SuggestedScale())
}
