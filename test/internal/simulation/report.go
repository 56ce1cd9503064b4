package simulation

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// Report is the outcome of one simulation run.
type Report struct {
	Config Config // the configuration run, with defaults applied

	// Ground truth: what the producer sent. The order counts are fixed by
	// the seed; the message counts of the order writers' queue (Sends,
	// Enqueued, Dropped) are too, except for the operator's resubmissions,
	// which depend on what was dead-lettered.
	Orders       int // orders planned
	Valid        int // orders sent as valid messages
	Malformed    int // orders sent as invalid messages (malformed or orderId ≠ MessageId)
	ReusedIDs    int // valid orders whose id was sent again with other content
	OutageOrders int // valid orders whose every store call failed
	PoisonOrders int // valid orders whose document could not be used (undecodable, or failing every call)
	Sends        int // messages sent to the order writers' queue (Send calls), retries and resubmissions included
	Enqueued     int // of them, messages the queue accepted
	Dropped      int // of them, dropped by duplicate detection: producer retries inside the window, and DroppedReuses
	// DroppedReuses are reused ids the broker dropped because the id was
	// sent (by a late retry) less than a window earlier: duplicate detection
	// compares MessageIds only, never content.
	DroppedReuses int

	// Accounting follows every message sent to the order writers' queue
	// to its end: the proof that nothing was lost.
	Accounting Accounting
	// Resubmissions counts the operator's resubmissions.
	Resubmissions ResubmissionCounts
	// Restarts counts the workers shut down (as on SIGTERM) and replaced.
	Restarts int

	// What happened. These depend on the goroutine interleaving as well
	// as on the seed.
	Deliveries       int64    // messages the queue sent (on link credit), redeliveries and releases included
	LockLost         int64    // settlements and renewals the queue rejected for a lost lock
	Outcomes         Outcomes // per delivery handled, not per message or order
	DuplicateCauses  DuplicateCauses
	DeadLetters      map[string]int // messages in the dead-letter queue, by reason
	Faults           FaultCounts
	OrderDocuments   int
	EventDocuments   int
	Payments         PaymentReport
	Status           StatusReport
	Inbox            []InboxReport // one per inbox consumer
	Relay            RelayReport   // the outbox relay, when the inbox consumers run
	Elapsed          time.Duration // the run's duration on its clock: virtual inside a synctest bubble
	InvariantsHeld   []string      // names of the invariants with no violation
	InvariantsFailed []string      // names of the invariants with a violation

	Violations []Violation
	// Audit is what orderctl audit's checks found in the final store, with
	// Config.Audit; nil otherwise.
	Audit *AuditReport
	// Timing is what the run measured of its own scheduling delay, and the
	// breaches of its timing assumptions: see TimingBroken.
	Timing TimingReport
	// Histories holds the history of each order involved in a violation
	// (at most 10): every send, delivery, outcome, settlement, store call,
	// payment call and resubmission of its messages.
	Histories []OrderHistory

	// BeforeSuccess counts the failed schedulings and the dependency outages.
	BeforeSuccess BeforeSuccessReport
}

// Accounting follows the messages sent to one queue to their ends:
// Sent = Enqueued + Dropped, and every enqueued message ended completed,
// dead-lettered (by reason) or resubmitted from the dead-letter queue (its
// copy is a message of its own, counted as sent), none pending. Completed
// is derived from the ground truth and the final queue; QueueCompleted is
// the queue's own count of completions, which must equal it.
type Accounting struct {
	Sent, Dropped, Enqueued int // messages
	Completed               int
	DeadLettered            map[string]int // still in the dead-letter queue, by reason
	Resubmitted             int            // dead-lettered, then resubmitted by the operator
	Pending                 int            // still in the queue: must be 0
	QueueCompleted          int64
	// Retries follows the copies the workers scheduled (see
	// scheduleRecorder): enqueued at their time, each completed,
	// dead-lettered or still in the queue (scheduled included: must be 0).
	// Their completions are in QueueCompleted, not in Completed.
	Retries RetryAccounting
}

// Balanced reports whether every message is accounted for.
func (a Accounting) Balanced() bool {
	dead := 0
	for _, n := range a.DeadLettered {
		dead += n
	}
	r := a.Retries
	return a.Sent == a.Enqueued+a.Dropped && a.Enqueued == a.Completed+dead+a.Resubmitted && a.Pending == 0 &&
		int64(a.Completed)+r.Completed == a.QueueCompleted && r.Pending == 0 && r.Enqueued == r.Completed+r.DeadLettered+r.Resubmitted+r.Pending
}

// account follows sent through the final state q.
func account(sent []Sent, q sbqueue.Snapshot) Accounting {
	a := Accounting{DeadLettered: make(map[string]int), QueueCompleted: q.Completed}
	dead := make(map[int64]string, len(q.DeadLetters))
	for _, m := range q.DeadLetters {
		dead[m.SequenceNumber] = m.DeadLetterReason
	}
	pending := make(map[int64]bool)
	for _, m := range append(slices.Clone(q.Active), q.Locked...) {
		pending[m.SequenceNumber] = true
	}
	enqueued := make(map[int64]bool, len(sent))
	for _, m := range sent {
		if m.Enqueued {
			enqueued[m.Seq] = true
		}
	}
	var copies int64 // resubmissions of a dead-lettered copy, whose number no producer message has
	for _, m := range sent {
		if m.Resubmission && !enqueued[m.ResubmittedOf] {
			copies++
		}
	}
	a.Retries = accountRetries(q, copies)
	for _, m := range sent {
		a.Sent++
		if !m.Enqueued {
			a.Dropped++
			continue
		}
		a.Enqueued++
		reason, isDead := dead[m.Seq]
		switch {
		case pending[m.Seq]:
			a.Pending++
		case isDead:
			a.DeadLettered[reason]++
		case m.Resubmitted && !m.ResubmittedCopy: // its copy's resubmission is the copy's
			a.Resubmitted++
		default:
			a.Completed++
		}
	}
	return a
}

// Outcomes counts the handler's decisions, one per delivery handled.
type Outcomes struct {
	Created, Duplicate, Mismatch, Invalid, Transient int
	Applied, Stale                                   int // status changes

	// Transient outcomes by reason.
	BeforeOrder        int // a status change arrived before its order
	PaymentBusy        int // another delivery held the payment claim
	PaymentUnavailable int // the capture call failed
}

// PaymentReport sums up the payment capture.
type PaymentReport struct {
	Enabled        bool
	Captures       int // capture calls by the consumer
	CapturesFailed int // of them, failed: the message was retried
	Replays        int // answers the payments service replayed from its key store: no charge
	Charges        int // charges the payments service made
	Completed      int // payment records completed
}

// StatusReport sums up the status changes.
type StatusReport struct {
	Orders       int // orders with status changes
	Shuffled     int // of them, with changes sent out of order
	Sent         int // status messages sent, resends included
	Enqueued     int
	Applied      int // deliveries that applied a newer version
	Stale        int // deliveries of a version not newer than the stored one: completed, nothing written
	BeforeOrder  int // deliveries that arrived before their order: retried
	DeadLettered int // status messages dead-lettered (their order never stored)
}

// InboxReport sums up one inbox consumer's subscription.
type InboxReport struct {
	Consumer        string
	Enqueued        int // messages its queue accepted
	Deliveries      int64
	Outcomes        Outcomes
	DuplicateCauses DuplicateCauses
	Entries         int // its effects stored: order.LoyaltyEntry documents carrying its name
	Markers         int // live markers
	DeadLettered    int
	Faults          int // delivery and store faults injected into its queue and store
	Accounting      Accounting
}

// paymentCounts counts the consumer's capture calls as the simulation sees
// them.
type paymentCounts struct {
	Captures, Failed, Replays int
}

// DuplicateCauses explains each Duplicate outcome: why the message was
// delivered again although its order existed. A message sent again by the
// producer is a producer retry; a redelivery of the same queued message is
// explained by the delivery before it.
type DuplicateCauses struct {
	ProducerRetry  int // another queued copy of the message created it: a retry sent after the duplicate-detection window
	LockLoss       int // the delivery before it lost its lock or its settlement
	ConcurrentRace int // the delivery that created the order was being handled at the same time: one of their locks had lapsed
	CrashRecovery  int // the worker crashed after the delivery before it, before settling
	AmbiguousWrite int // an earlier delivery's write committed but reported a timeout, so it was retried
	TransientRetry int // the delivery before it was abandoned after a transient store failure
	Unexplained    int // none of the above: the simulation could not tell
}

// Total returns the number of duplicates.
func (c DuplicateCauses) Total() int {
	return c.ProducerRetry + c.LockLoss + c.ConcurrentRace + c.CrashRecovery + c.AmbiguousWrite + c.TransientRetry + c.Unexplained
}

// FaultCounts counts the faults injected.
type FaultCounts struct {
	ProducerRetry  int // immediate resends by the producer
	LateRetry      int // resends after the duplicate-detection window
	Reuse          int // ids sent again with other content
	Malformed      int // invalid messages sent
	Crash          int // settlements lost to a worker crash
	LostSettlement int // settlements reported as lock lost
	LockExpiry     int // locks that lapsed while the handler ran
	Transient      int // store calls failed before writing
	Ambiguous      int // committed writes reported as timeouts
	OutageErrors   int // store calls failed by an outage
	PoisonReads    int // reads and patches of a poison order's document that came back undecodable or failed
	PaymentFailure int // capture requests failed with 5xx or 429 before charging
	PaymentDrop    int // capture requests answered by a dropped connection after the charge
	PaymentTimeout int // capture requests whose answer was lost to a client timeout
	PaymentCrash   int // workers that died between the capture and the completed mark
	// PaymentMarkFailure counts completed marks of payment records that
	// failed once before writing.
	PaymentMarkFailure int
	// PaymentRecordOutage counts orders whose payment record could not be
	// written after their capture until the queues drained.
	PaymentRecordOutage int
	// ReplicaLag counts reads (FaultRates.ReplicaLag) served by a replica
	// behind the latest write of their partition; ReplicaLagMissing those
	// of them that found no document where one exists.
	ReplicaLag, ReplicaLagMissing int
}

// ErrViolations is matched by Verdict's error when an invariant failed.
var ErrViolations = errors.New("invariants violated")

// Verdict returns nil if every invariant held, or an error matching
// ErrViolations that names the seed to replay and the orders involved. When
// every violation is explained by measured scheduling delay
// (TimingBroken), the error matches ErrTiming instead: the run proves
// nothing either way.
func (r *Report) Verdict() error {
	if len(r.Violations) == 0 {
		return nil
	}
	if r.TimingBroken() {
		return fmt.Errorf("simulation seed %d: %s: %w", r.Config.Seed, r.timingNotice(), ErrTiming)
	}
	return fmt.Errorf("simulation seed %d: %d violations of %s, orders %s: %w",
		r.Config.Seed, len(r.Violations), strings.Join(r.InvariantsFailed, ", "), strings.Join(r.OrderIDs(10), ", "), ErrViolations)
}

// OrderIDs returns the distinct order ids involved in violations, at most
// max of them (all if max <= 0), sorted.
func (r *Report) OrderIDs(max int) []string {
	var ids []string
	for _, v := range r.Violations {
		if v.OrderID != "" {
			ids = append(ids, v.OrderID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if max > 0 && len(ids) > max {
		ids = append(ids[:max:max], fmt.Sprintf("… %d more", len(ids)-max))
	}
	return ids
}

// maxViolationsShown bounds the violations WriteTo lists.
const maxViolationsShown = 20

// WriteTo writes the report for a person to read at a glance. It implements
// io.WriterTo.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	c := r.Config
	faults := "on"
	if c.Faults == (FaultRates{}) {
		faults = "off"
	}
	// The figures are a table whose columns fit its longest label and
	// value; it is written once every row is known.
	var tbl table
	line, row := tbl.line, tbl.row
	line("Simulation, seed %d: %d orders, %d workers x %d handlers, faults %s", c.Seed, r.Orders, c.Workers, c.Concurrency, faults)
	line("  %d valid, %d invalid, %d ids reused, %d under a store outage; %v on the run's clock",
		r.Valid, r.Malformed, r.ReusedIDs, r.OutageOrders, r.Elapsed.Round(time.Millisecond))
	line("  Time scale: lock %v, duplicate-detection window %v, payment key retention %v, resubmissions %v and %v after the queues drained",
		c.LockDuration, c.DuplicateDetectionWindow, c.KeyRetention, c.ResubmitEarly, c.ResubmitLate)
	line("  The seed fixes the plan: the orders, what is sent, and which delivery, settlement, store call or")
	line("  payment call each fault strikes. It does not fix how the workers' goroutines interleave, so the")
	line("  figures marked * vary between replays of one seed; the invariants must hold under every interleaving.")
	line("")
	a := r.Accounting
	line("Messages on the order writers' queue (each sent message followed to its end)")
	row("sent", a.Sent, fmt.Sprintf("producer sends, retries included, and %d resubmissions*", r.Resubmissions.Early+r.Resubmissions.Late))
	row("  dropped by duplicate detection", a.Dropped, fmt.Sprintf("%d producer retries inside the window, %d reused ids", r.Dropped-r.DroppedReuses, r.DroppedReuses))
	row("  enqueued", a.Enqueued, "")
	row("    completed", a.Completed, fmt.Sprintf("the queue counted %d completions", a.QueueCompleted))
	dead := 0
	for _, reason := range sortedKeys(a.DeadLettered) {
		row("    dead-lettered, "+reason, a.DeadLettered[reason], "")
		dead += a.DeadLettered[reason]
	}
	row("    resubmitted from dead letters", a.Resubmitted, "each copy counted as sent")
	row("    still in the queue", a.Pending, "")
	if rt := a.Retries; rt.Enqueued > 0 || rt.Pending > 0 {
		row("  scheduled retries enqueued", rt.Enqueued, fmt.Sprintf("%d completed, %d dead-lettered, %d resubmitted, %d still in the queue", rt.Completed, rt.DeadLettered, rt.Resubmitted, rt.Pending))
	}
	balance := "balanced: sent = enqueued + dropped; enqueued = completed + dead-lettered + resubmitted"
	if !a.Balanced() {
		balance = "NOT BALANCED"
	}
	row("  accounting", "", balance)
	line("")
	line("Deliveries*")
	row("sent by the queue", r.Deliveries, "on link credit, redeliveries and releases included")
	row("settlements lost to a lost lock", r.LockLost, "")
	line("")
	line("Outcomes* (one per delivery handled, not per message or order)")
	row("deliveries that created an order", r.Outcomes.Created, "")
	row("duplicates completed", r.Outcomes.Duplicate, "nothing written")
	dc := r.DuplicateCauses
	row("  after a producer retry", dc.ProducerRetry, "")
	row("  after a lost lock or settlement", dc.LockLoss, "")
	row("  in a concurrent race", dc.ConcurrentRace, "")
	row("  after a worker crash", dc.CrashRecovery, "")
	row("  after an ambiguous write", dc.AmbiguousWrite, "")
	row("  after a transient failure", dc.TransientRetry, "")
	if dc.Unexplained > 0 {
		row("  unexplained", dc.Unexplained, "no cause above found: no other delivery created the order, or the one before ended cleanly")
	}
	row("deliveries of a mismatch", r.Outcomes.Mismatch, "id reused for other content")
	row("deliveries of an invalid message", r.Outcomes.Invalid, "")
	row("retries", r.Outcomes.Transient, "transient failures, abandoned after the worker's backoff")
	if r.Status.Orders > 0 {
		row("status changes applied / stale", fmt.Sprintf("%d / %d", r.Outcomes.Applied, r.Outcomes.Stale), "")
	}
	line("")
	line("Dead-letter queue at the end* (messages, by reason)")
	for _, reason := range []string{order.ReasonOrderIDReused, idempotent.ReasonInvalidMessage, idempotent.ReasonMessageIDMismatch, sbqueue.ReasonMaxDeliveryCountExceeded} {
		row(reason, r.DeadLetters[reason], "")
	}
	for _, reason := range sortedKeys(r.DeadLetters) {
		switch reason {
		case order.ReasonOrderIDReused, idempotent.ReasonInvalidMessage, idempotent.ReasonMessageIDMismatch, sbqueue.ReasonMaxDeliveryCountExceeded:
		default:
			row(fmt.Sprintf("%q", reason), r.DeadLetters[reason], "")
		}
	}
	line("")
	line("Faults injected")
	f := r.Faults
	row("producer retries", fmt.Sprintf("%d + %d", f.ProducerRetry, f.LateRetry), "inside + outside the window")
	row("ids reused / invalid messages", fmt.Sprintf("%d / %d", f.Reuse, f.Malformed), "")
	row("crashes before settling", f.Crash, "")
	row("lost settlements", f.LostSettlement, "")
	row("locks lapsed while handling", f.LockExpiry, "")
	row("transient store errors", f.Transient+f.OutageErrors, fmt.Sprintf("%d from outages", f.OutageErrors))
	row("ambiguous writes", f.Ambiguous, "committed, reported as timeouts")
	if c.Faults.ReplicaLag > 0 {
		row("reads behind the latest write", f.ReplicaLag, fmt.Sprintf("%d found no document that exists (Session consistency without the token)", f.ReplicaLagMissing))
	}
	if r.PoisonOrders > 0 {
		row("poison orders", r.PoisonOrders, fmt.Sprintf("document undecodable or failing: %d calls", f.PoisonReads))
	}
	if r.Payments.Enabled {
		row("payment 5xx/429 before charging", f.PaymentFailure, "")
		row("payment answers lost after charging", f.PaymentDrop+f.PaymentTimeout, fmt.Sprintf("%d dropped connections, %d client timeouts", f.PaymentDrop, f.PaymentTimeout))
		row("crashes before the payment mark", f.PaymentCrash, "record left in progress")
		row("payment marks failed once", f.PaymentMarkFailure, "record left claimed")
		row("payment records unwritable", f.PaymentRecordOutage, "after the charge, until the queues drained")
	}
	if c.Faults.WorkerRestart > 0 {
		row("workers restarted*", r.Restarts, "shut down as on SIGTERM and replaced")
	}
	if rs := r.Resubmissions; c.Faults.ResubmitEarly > 0 || c.Faults.ResubmitLate > 0 {
		row("resubmissions early / late*", fmt.Sprintf("%d / %d", rs.Early, rs.Late), fmt.Sprintf("%d after their order's key retention, %d dropped as duplicates", rs.AfterKeyRetention, rs.Dropped))
	}
	if r.Status.Orders > 0 {
		row("orders with shuffled status changes", r.Status.Shuffled, "")
	}
	line("")
	if r.Payments.Enabled {
		p := r.Payments
		line("Payments")
		row("capture calls", p.Captures, fmt.Sprintf("%d failed and retried", p.CapturesFailed))
		row("answers replayed by the service", p.Replays, "same key: nothing charged")
		row("charges", p.Charges, "")
		row("payment records completed", p.Completed, "")
		row("retries behind a payment claim", r.Outcomes.PaymentBusy, "")
		line("")
	}
	if r.Status.Orders > 0 {
		st := r.Status
		line("Status changes")
		row("orders with status changes", st.Orders, fmt.Sprintf("%d sent out of order", st.Shuffled))
		row("status messages sent / enqueued", fmt.Sprintf("%d / %d", st.Sent, st.Enqueued), "")
		row("applied", st.Applied, "newer than the stored version")
		row("stale", st.Stale, "not newer: completed, nothing written")
		row("retried, arrived before the order", st.BeforeOrder, "")
		why := "their order was never stored"
		if r.PoisonOrders > 0 {
			why += ", or its document cannot be used (poison)"
		}
		row("dead-lettered", st.DeadLettered, why)
		line("")
	}
	if len(r.Inbox) > 0 {
		ttl := c.MarkerTTL.String()
		if c.MarkerTTL == order.UnboundedRetention {
			ttl = "none: the queues' messages never expire, so no finite TTL is safe"
		}
		line("Inbox consumers (subscriptions of topic %s, fed by the outbox relay; marker TTL %s)", topicName, ttl)
		for _, in := range r.Inbox {
			row(in.Consumer+": created", in.Outcomes.Created, fmt.Sprintf("%d deliveries, %d faults", in.Deliveries, in.Faults))
			row("  duplicates completed", in.Outcomes.Duplicate, "marker found: nothing written")
			row("  effects written / live markers", fmt.Sprintf("%d / %d", in.Entries, in.Markers),
				fmt.Sprintf("an order.LoyaltyEntry (type %q, consumer %q) per order: what each inbox consumer here writes", order.TypeLoyaltyEntry, in.Consumer))
			row("  dead-lettered", in.DeadLettered, "")
			a := in.Accounting
			note := fmt.Sprintf("%d sent = %d enqueued + %d dropped; %d completed, %d dead-lettered", a.Sent, a.Enqueued, a.Dropped, a.Completed, in.DeadLettered)
			if !a.Balanced() {
				note = "NOT BALANCED: " + note
			}
			row("  messages accounted for", "", note)
		}
		line("")
	}
	if rl := r.Relay; rl.Enabled {
		line("Outbox relay (%d instances over %d feed ranges; lease %s, poll %s, call timeout %s)", rl.Instances, feedRanges,
			c.RelayLeaseDuration, c.RelayPollInterval, c.RelayCallTimeout)
		row("events sent to the topic", rl.Sent, fmt.Sprintf("%d in %d batches the relay saw succeed; %d documents skipped (not events), %d unpublishable",
			rl.Published, rl.Batches, rl.Skipped, rl.Unpublishable))
		row("accepted by the topic", rl.TopicEnqueued, fmt.Sprintf("%d republishes dropped by its duplicate detection", rl.DuplicatesDropped))
		row("republished to the subscribers", rl.Republished, "after the window: inbox duplicates")
		row("checkpoints", rl.Checkpoints, fmt.Sprintf("%d leases acquired, %d lost to another instance", rl.Acquired, rl.Lost))
		row("lease takeovers", rl.Takeovers, fmt.Sprintf("%d after expiry, %d after a release", rl.ExpiredTakeovers, rl.Takeovers-rl.ExpiredTakeovers))
		row("relay faults", rl.Crashes+rl.Stops+rl.Pauses+rl.LostAcks+rl.SendFailures+rl.CrashesBeforeSend, fmt.Sprintf("%d SIGKILLs before a checkpoint, %d SIGTERMs mid-page, %d pauses past the lease, %d lost acknowledgements, %d sends failed, %d SIGKILLs before a send",
			rl.Crashes, rl.Stops, rl.Pauses, rl.LostAcks, rl.SendFailures, rl.CrashesBeforeSend))
		line("")
	}
	r.BeforeSuccess.write(line)
	if tr := r.Timing; tr.ProbeInterval > 0 {
		covered := 0
		for _, b := range tr.Breaches {
			if b.Covered() {
				covered++
			}
		}
		line("Scheduling delay* (the run's own, measured every %v; margin %v, a fifth of the lock)", tr.ProbeInterval, tr.Margin)
		row("largest delay", tr.MaxDelay.Round(time.Millisecond), fmt.Sprintf("at %v on the run's clock", tr.MaxDelayAt.Round(time.Millisecond)))
		row("delays above the margin", tr.Spells, "")
		row("timing assumptions broken", len(tr.Breaches), fmt.Sprintf("%d during a delay above the margin: locks lost and keys forgotten that no fault planned", covered))
		line("")
	}
	line("Store (documents)")
	row("order documents", r.OrderDocuments, fmt.Sprintf("for %d valid orders (%d under an outage)", r.Valid, r.OutageOrders))
	row("OrderAccepted events", r.EventDocuments, "")
	line("")
	tbl.writeTo(cw)
	line = func(format string, args ...any) { fmt.Fprintf(cw, format+"\n", args...) }
	line("Invariants")
	for _, inv := range Invariants() {
		mark := "ok  "
		if slices.Contains(r.InvariantsFailed, inv.Name) {
			mark = "FAIL"
		}
		line("  %s %s: %s", mark, inv.Name, inv.Statement)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintf(cw, "\nVerdict: PASS, every invariant holds for %d messages (seed %d)\n", r.Enqueued, c.Seed)
		return cw.n, cw.err
	}
	if r.TimingBroken() {
		fmt.Fprintf(cw, "\nVerdict: TIMING: %s.\n  Not a correctness verdict: each of the %d violations (seed %d) coincides with a breach of a timing assumption\n  overlapped by a measured scheduling delay; orders involved: %s\n",
			r.timingNotice(), len(r.Violations), c.Seed, strings.Join(r.OrderIDs(maxViolationsShown), ", "))
	} else {
		fmt.Fprintf(cw, "\nVerdict: FAIL, %d violations (seed %d); orders involved: %s\n", len(r.Violations), c.Seed, strings.Join(r.OrderIDs(maxViolationsShown), ", "))
	}
	for i, v := range r.Violations {
		if i == maxViolationsShown {
			fmt.Fprintf(cw, "  … and %d more\n", len(r.Violations)-i)
			break
		}
		mark := ""
		if r.TimingExplains(v) {
			mark = " [timing: a measured scheduling delay overlaps a breach of this order]"
		}
		fmt.Fprintf(cw, "  %s%s\n", v, mark)
	}
	for _, h := range r.Histories {
		fmt.Fprintf(cw, "\nHistory of order %s (time on the run's clock; [queue] for an inbox consumer's)\n", h.OrderID)
		for _, e := range h.Events {
			fmt.Fprintf(cw, "  %s\n", e)
		}
	}
	return cw.n, cw.err
}

// table is the report's figures: lines of text, and rows of a label, a
// value and a note, whose columns writeTo sizes to the longest label and
// value.
type table struct {
	entries []tableEntry
}

// tableEntry is a line of text (isLine) or a row.
type tableEntry struct {
	isLine             bool
	text, value, notes string
}

func (t *table) line(format string, args ...any) {
	t.entries = append(t.entries, tableEntry{isLine: true, text: fmt.Sprintf(format, args...)})
}

func (t *table) row(label string, n any, note string) {
	t.entries = append(t.entries, tableEntry{text: label, value: fmt.Sprint(n), notes: note})
}

// writeTo writes the entries, each row as two spaces, the label padded to
// the longest, a space, the value right-aligned to the longest, two spaces
// and the note.
func (t *table) writeTo(w io.Writer) {
	labels, values := 0, 0
	for _, e := range t.entries {
		if !e.isLine {
			labels, values = max(labels, utf8.RuneCountInString(e.text)), max(values, utf8.RuneCountInString(e.value))
		}
	}
	for _, e := range t.entries {
		if e.isLine {
			fmt.Fprintln(w, e.text)
			continue
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-*s %*s  %s", labels, e.text, values, e.value, e.notes), " "))
	}
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}
