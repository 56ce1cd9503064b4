package simulation

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Dependency outages: windows of time in which a dependency every message
// needs fails, as a region, a replica set or an acquirer does, and then
// comes back. Unlike FaultRates.Outage (one order's storage down for good,
// which only its messages meet), such an outage is the dependency's, not
// the messages': a worker that keeps receiving through it spends the
// deliveries of every message it receives, and the broker dead-letters them
// for MaxDeliveryCountExceeded although nothing is wrong with them. The
// circuit breaker (worker.Options.Gate) exists to stop that; the invariant
// NoDeadLetterDuringOutage holds it to it.
//
// Each kind stands for a real behaviour, and says which calls fail and
// whether the breakers' probes see it: the store's (cosmosstore.Store.Probe,
// a point read and a delete of a missing item, under key probeKey; see
// faultStore.Probe) and, for the order writers, the payments service's
// (payments.Client.Ping, POST /payments/probe), as cmd/orderworker's:
//
//   - OutageStore: the store answers nothing (503 to every call, the probe
//     included): a region or account outage. The probe sees it.
//   - OutageStoreWrites: the store fails every write (creates, batches,
//     replaces, patches, deletes) with 503 and answers reads: a
//     write-region outage, a role cut to Data Reader. The probe's delete
//     sees it.
//   - OutagePartition: every call whose partition key falls in one key
//     range (a quarter of the keys, by hash, as a physical partition holds
//     a range of the hashed keys) fails with 503; the rest of the store
//     answers: a physical partition down, or throttled hot. The probe sees
//     it only when the range holds probeKey; otherwise only the spread
//     rule does, on a queue where enough entities fail.
//   - OutageCaptures: the payments service answers every capture, and
//     every probe, with 503 before charging, while it answers lookups and
//     its health check: an acquirer outage behind a healthy API. The
//     payments probe sees it.
//
// The plan starts an outage after a settlement on the order writers'
// queue, as it restarts workers (FaultRates.StoreOutage and the others are
// per settlement), at most once per kind and one at a time, and ends it
// Config.OutageDuration later, on the run's clock.
//
// A breaker asks its probe at the first dependency failure of a
// redelivered message, so an outage its probe sees costs a message at most
// one delivery per worker sharing its queue, and one more (outageSlack),
// on a quiet queue too. An outage only the spread rule sees needs a worker
// to see Spread entities failing again: on a queue that holds only a
// trickle when it begins (an inbox consumer's), it cannot be told from a
// few poison messages, and the broker dead-letters them as poison. So
// DefaultFaultRates and the seed sweep leave OutagePartition out, and
// TestOutagesDeadLetterNothing runs it on the order writers' queue with a
// backlog, as cmd/orderworker is deployed.
const (
	OutageStore       = "store"
	OutageStoreWrites = "store writes"
	OutagePartition   = "store partition"
	OutageCaptures    = "payments captures"
)

// outageSlack is the deliveries of a message the plan's fault budget
// leaves to dependency outages, with workers sharing its queue: one per
// worker, and one more. A worker's circuit breaker asks its probe at the
// first dependency failure of a redelivered message, and opens if the
// outage fails it; so each worker spends at most one delivery of the
// message, and the message's first delivery may fail before that, on a
// worker that has not seen it fail before. 0 when r has none.
func (r FaultRates) outageSlack(workers int) int {
	if r.StoreOutage > 0 || r.StoreWriteOutage > 0 || r.PartitionOutage > 0 || r.CaptureOutage > 0 {
		return workers + 1
	}
	return 0
}

// outageKinds are the kinds in the order the plan considers them.
var outageKinds = [...]string{OutageStore, OutageStoreWrites, OutagePartition, OutageCaptures}

// partitionRanges is how many key ranges the store's partition keys hash
// into: a partition outage takes one of them down.
const partitionRanges = 4

// Outage is one dependency outage of a run, as the plan struck it.
type Outage struct {
	Kind string
	// Range is the key range a partition outage takes down (of
	// partitionRanges); -1 for the other kinds, which strike every key.
	Range int
	// Start and End bound the outage on the run's clock (End is
	// Start + Config.OutageDuration).
	Start, End time.Time
	// Failed counts the calls it failed.
	Failed int
}

// Covers reports whether the outage strikes partition key pk.
func (o Outage) Covers(pk string) bool {
	return o.Range < 0 || int(fnv64a(pk)%partitionRanges) == o.Range
}

// During reports whether the outage overlaps the span from first to last.
func (o Outage) During(first, last time.Time) bool {
	return !first.After(o.End) && !last.Before(o.Start)
}

// String describes the outage for a violation and the report.
func (o Outage) String() string {
	what := o.Kind
	if o.Range >= 0 {
		what += fmt.Sprintf(" (key range %d of %d)", o.Range, partitionRanges)
	}
	return what
}

// BeforeSuccessReport counts the faults of a run that strike before
// success: the schedulings of delayed retries that failed
// (FaultRates.ScheduleFailure) and the dependency outages; the relay's are
// in RelayReport.
type BeforeSuccessReport struct {
	ScheduleFailures int
	Outages          []Outage
}

// outages is the run's record of its dependency outages: which is on now,
// and what each failed. It is safe for concurrent use.
type outages struct {
	plan     *plan
	duration time.Duration
	start    time.Time // the run's start, for the history
	hist     *history

	mu   sync.Mutex
	all  []Outage
	used map[string]bool // kinds struck so far
}

func newOutages(p *plan, duration time.Duration, start time.Time, h *history) *outages {
	return &outages{plan: p, duration: duration, start: start, hist: h, used: make(map[string]bool)}
}

// settled considers, after the n-th settlement of worker slot, starting
// each kind of outage the plan may strike.
func (o *outages) settled(slot string, n uint64) {
	if o == nil {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.all) > 0 && now.Before(o.all[len(o.all)-1].End) {
		return // one at a time
	}
	for i, kind := range outageKinds {
		rate := o.plan.outageRate(kind)
		if o.used[kind] || o.plan.roll(faultDependencyOutage, slot, n, uint64(i)) >= rate {
			continue
		}
		out := Outage{Kind: kind, Range: -1, Start: now, End: now.Add(o.duration)}
		if kind == OutagePartition {
			out.Range = int(o.plan.roll(faultDependencyOutage, slot, n, 99) * partitionRanges)
		}
		o.used[kind] = true
		o.all = append(o.all, out)
		o.hist.add("", "", "fault: outage of the %s from now for %v", out, o.duration)
		return
	}
}

// fails reports whether an outage of one of kinds strikes a call with
// partition key pk (any key when pk is ""), now, and counts the call.
func (o *outages) fails(pk string, kinds ...string) (Outage, bool) {
	if o == nil {
		return Outage{}, false
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.all) == 0 {
		return Outage{}, false
	}
	out := &o.all[len(o.all)-1]
	if now.Before(out.Start) || !now.Before(out.End) || !slices.Contains(kinds, out.Kind) || (pk != "" && !out.Covers(pk)) {
		return Outage{}, false
	}
	out.Failed++
	return *out, true
}

// report returns the outages struck so far.
func (o *outages) report() []Outage {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.all)
}

// errOutage is the 503 a dependency outage answers.
func errOutage(o Outage, op, pk string) error {
	return fmt.Errorf("%s in partition %q during an outage of the %s: %w", op, pk, o, errUnavailable)
}

// write writes the report's section of the faults before success, if any
// struck.
func (b BeforeSuccessReport) write(line func(format string, args ...any)) {
	if b.ScheduleFailures == 0 && len(b.Outages) == 0 {
		return
	}
	line("Faults before success")
	line("  %d schedulings of a delayed retry failed before the broker scheduled anything", b.ScheduleFailures)
	for _, o := range b.Outages {
		line("  an outage of the %s for %v failed %d calls", o, o.End.Sub(o.Start), o.Failed)
	}
	line("")
}
