package simulation

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// FaultRates are the probabilities of the injected faults, each between 0
// and 1. A rate applies per opportunity: per order for the faults that shape
// what the producer sends, per delivery, per settlement or per store call for
// the others.
type FaultRates struct {
	// ProducerRetry: the producer sends a message twice in a row, as after a
	// lost acknowledgement. The broker's duplicate detection drops the copy.
	ProducerRetry float64
	// RetryOutsideWindow: the producer sends a valid order again after the
	// duplicate-detection window has passed; the worker receives both.
	RetryOutsideWindow float64
	// Crash: the worker dies between handling a delivery (its write done)
	// and settling it. The settlement never reaches the broker and the
	// message stays locked until its lock lapses.
	Crash float64
	// LostSettlement: a settlement is not applied and is reported as lock
	// lost; the broker redelivers the message at once.
	LostSettlement float64
	// LockExpiry: a delivery's lock lapses while its handler runs, so a
	// competing handler can receive the message concurrently.
	LockExpiry float64
	// Transient: a store call fails with 429 or 503 before it writes.
	Transient float64
	// Ambiguous: an order's write commits but the caller sees a timeout.
	Ambiguous float64
	// Outage: every store call for an order fails, so each of its messages
	// exhausts MaxDeliveryCount and is dead-lettered by the broker.
	Outage float64
	// Reuse: the producer sends an order's id again with other content,
	// after the duplicate-detection window.
	Reuse float64
	// Malformed: an order is sent as a body that can never be processed
	// (not JSON, missing fields, a wrong total, or an orderId other than its
	// MessageId).
	Malformed float64
	// Poison: a valid order, with status changes, whose own document
	// cannot be used once it is created (see poison.go): it reads back
	// undecodable, or every read and patch of it fails with 500, a
	// StoreError (a dependency failure by its reason) retried on every
	// delivery until the broker dead-letters it at MaxDeliveryCount; the
	// store answers every other call. The order is spared every other
	// fault.
	Poison float64

	// OutOfOrder: an order's status changes are sent shuffled, some of them
	// before the order itself (per order that has status changes).
	OutOfOrder float64
	// PaymentFailure: a capture request fails with 500, 503 or 429 before
	// the payments service charges anything.
	PaymentFailure float64
	// PaymentTimeout: a capture request is charged (or replayed), then its
	// answer is lost: the service drops the connection, or the client times
	// out. The consumer cannot tell whether the charge happened.
	PaymentTimeout float64
	// PaymentCrash: the worker dies after the capture call returned and
	// before the payment record is marked completed. The record stays in
	// progress and the message locked until the lock (and with it the
	// claim's lease) lapses.
	PaymentCrash float64
	// PaymentMarkFailure: the write that marks a payment record completed,
	// after a successful capture, fails once with 503 before writing. The
	// record stays claimed (in progress) by the delivery, which is
	// abandoned.
	PaymentMarkFailure float64
	// PaymentRecordOutage: once an order's capture succeeded, its payment
	// record cannot be written at all (every write fails with 503) until
	// the queues have drained: a partition the store cannot write for the
	// rest of the message's deliveries. The message exhausts
	// MaxDeliveryCount and is dead-lettered with the record in progress
	// although the order was charged; an operator's resubmission then
	// finds the claim, after the payments service may have forgotten its
	// key. Like Outage, it is not bounded by MaxFaultsPerMessage.
	PaymentRecordOutage float64

	// ReplicaLag: an order's reads by the order writers are served as
	// Cosmos DB serves reads without the session token of the order's
	// writes (a token evicted from the store's cache, a read by another
	// process): under Session consistency they may see the partition up to
	// replicaLagVersions writes behind, and never behind a write older than
	// a tenth of the lock, until one of them sees the newer state
	// (memstore's replica-lag mode). A create that conflicts may
	// then read no order, and no payment record, for an order that
	// exists. Per order; not bounded by MaxFaultsPerMessage.
	ReplicaLag float64

	// ResubmitEarly and ResubmitLate: an operator resubmits a message from
	// the order writers' dead-letter queue (receives it, sends a copy with
	// the same MessageId, completes the dead-lettered message), per
	// message: in the early round (Config.ResubmitEarly after the queues
	// drained, before the payments service forgets most keys) with
	// probability ResubmitEarly, and of what is in the dead-letter queue
	// then, in the late one (Config.ResubmitLate after they drained again,
	// after the key retention) with probability ResubmitLate. An operator
	// who resubmits every MaxDeliveryCountExceeded message after an
	// incident sets ResubmitLate to 1.
	ResubmitEarly float64
	ResubmitLate  float64

	// WorkerRestart: after a settlement on the order writers' queue, the
	// worker that settled it is shut down as on SIGTERM (its context
	// cancelled, its handlers given the shutdown grace, its receiver
	// closed) and replaced by a new worker on a new receiver; at most
	// twice per worker.
	WorkerRestart float64

	// The outbox relay's faults, per batch it sends (RelayPause: per read
	// of the change feed that returned changes), each at most three times a
	// run. RelayCrash: the relay is SIGKILLed after the topic accepted a
	// batch, before its checkpoint; its leases expire and another instance
	// republishes the page. RelayStop: it gets SIGTERM while sending (its
	// context cancelled mid-page): it finishes the page, checkpoints and
	// releases its leases. RelayPause: it freezes after reading a page for
	// a lease duration plus the duplicate-detection window, then publishes
	// the page (to the subscribers: the window has passed) and finds its
	// lease taken. RelayLostAck: a batch is sent and its answer lost; the
	// relay sends the page again, and the topic drops the copies.
	RelayCrash, RelayStop, RelayPause, RelayLostAck float64

	// Faults that strike before success: the call fails and nothing
	// happened, so only the order in which the code commits (schedule
	// before complete, publish before checkpoint) keeps the message.
	//
	// ScheduleFailure: a worker's ScheduleMessages of a delayed retry
	// fails without scheduling anything (a ServerBusy, a detached link),
	// per scheduling; the worker must keep the original (abandon it) so
	// that a redelivery schedules again. Charged to the order's budget.
	ScheduleFailure float64
	// RelaySendFailure: a relay's batch send fails before the topic sees
	// it (a ServerBusy, a detached link), per batch; nothing is published,
	// and the relay must not have checkpointed the page. RelayCrashBeforeSend:
	// the relay is SIGKILLed as it starts publishing a page it has read
	// (its first batch of the page), before the topic sees anything; its
	// leases expire and another instance publishes the page from the last
	// checkpoint. Each at most three times a run, as the other relay
	// faults.
	RelaySendFailure, RelayCrashBeforeSend float64

	// Dependency outages (see outage.go), per settlement on the order
	// writers' queue, each at most once a run and one at a time, for
	// Config.OutageDuration: StoreOutage, the whole store;
	// StoreWriteOutage, the store's writes only; CaptureOutage, the
	// payments service's captures, all three of which the breakers'
	// probes see; PartitionOutage, one key range of the store, which only
	// the spread rule sees, on a queue with a backlog (DefaultFaultRates
	// leaves it out: see outage.go).
	StoreOutage, StoreWriteOutage, PartitionOutage, CaptureOutage float64
}

// DefaultFaultRates returns rates that exercise every fault in a run of a
// few hundred orders while most deliveries still succeed, but
// PartitionOutage, which only the breakers' spread rule sees, and only on
// a queue with a backlog (see outage.go).
func DefaultFaultRates() FaultRates {
	return FaultRates{
		ProducerRetry:        0.05,
		RetryOutsideWindow:   0.05,
		Crash:                0.03,
		LostSettlement:       0.03,
		LockExpiry:           0.03,
		Transient:            0.02,
		Ambiguous:            0.02,
		Outage:               0.002,
		Reuse:                0.02,
		Malformed:            0.02,
		Poison:               0.005,
		OutOfOrder:           0.5,
		PaymentFailure:       0.03,
		PaymentTimeout:       0.03,
		PaymentCrash:         0.02,
		PaymentMarkFailure:   0.02,
		PaymentRecordOutage:  0.005,
		ReplicaLag:           0.05,
		WorkerRestart:        0.002,
		RelayCrash:           0.05,
		RelayStop:            0.05,
		RelayPause:           0.02,
		RelayLostAck:         0.05,
		ScheduleFailure:      0.05,
		RelaySendFailure:     0.05,
		RelayCrashBeforeSend: 0.05,
		StoreOutage:          0.002,
		StoreWriteOutage:     0.002,
		CaptureOutage:        0.002,
		ResubmitEarly:        0.5,
		ResubmitLate:         1,
	}
}

// Validate reports the first rate outside [0, 1].
func (r FaultRates) Validate() error {
	for _, f := range r.fields() {
		if !(f.rate >= 0 && f.rate <= 1) { // also rejects NaN
			return fmt.Errorf("simulation: fault rate %s = %v is not between 0 and 1", f.name, f.rate)
		}
	}
	return nil
}

type namedRate struct {
	name string
	rate float64
}

func (r FaultRates) fields() []namedRate {
	return []namedRate{
		{"ProducerRetry", r.ProducerRetry}, {"RetryOutsideWindow", r.RetryOutsideWindow},
		{"Crash", r.Crash}, {"LostSettlement", r.LostSettlement}, {"LockExpiry", r.LockExpiry},
		{"Transient", r.Transient}, {"Ambiguous", r.Ambiguous}, {"Outage", r.Outage},
		{"Reuse", r.Reuse}, {"Malformed", r.Malformed}, {"Poison", r.Poison}, {"OutOfOrder", r.OutOfOrder},
		{"PaymentFailure", r.PaymentFailure}, {"PaymentTimeout", r.PaymentTimeout}, {"PaymentCrash", r.PaymentCrash},
		{"PaymentMarkFailure", r.PaymentMarkFailure}, {"PaymentRecordOutage", r.PaymentRecordOutage}, {"ResubmitEarly", r.ResubmitEarly}, {"ResubmitLate", r.ResubmitLate},
		{"WorkerRestart", r.WorkerRestart}, {"ReplicaLag", r.ReplicaLag},
		{"RelayCrash", r.RelayCrash}, {"RelayStop", r.RelayStop}, {"RelayPause", r.RelayPause}, {"RelayLostAck", r.RelayLostAck},
		{"ScheduleFailure", r.ScheduleFailure}, {"RelaySendFailure", r.RelaySendFailure}, {"RelayCrashBeforeSend", r.RelayCrashBeforeSend},
		{"StoreOutage", r.StoreOutage}, {"StoreWriteOutage", r.StoreWriteOutage}, {"PartitionOutage", r.PartitionOutage}, {"CaptureOutage", r.CaptureOutage},
	}
}

// fault names a fault that is decided during the run rather than when the
// producer's messages are planned.
type fault uint64

const (
	faultLockExpiry fault = iota + 1
	faultCrash
	faultLostSettlement
	faultTransientCreate
	faultTransientRead
	faultAmbiguous
	faultTransientDocument // a document read, batch or replace (status changes, payment records, inbox)
	faultPaymentFailure
	faultPaymentTimeout // the link's half of PaymentTimeout
	faultPaymentDrop    // the service's half of PaymentTimeout
	faultPaymentCrash
	faultMarkFailure
	faultRecordOutage
	faultResubmit // not charged to the budget: see resubmits
	faultRestart  // not charged to the budget: see restarts
	faultReplicaLag
	faultScheduleFailure
	faultDependencyOutage // not charged to the budget: see outages
)

// replicaLagVersions bounds how many writes behind a lagging read may be
// (FaultRates.ReplicaLag), and replicaLagWindowDiv how long: a write reaches
// every replica within a tenth of the lock duration (3 s at 30 s locks),
// far longer than Cosmos DB's replication takes within a region, yet short
// enough that a redelivery, which comes at the earliest after the
// retry backoff, may still meet a lagging read right after a conflict.
const (
	replicaLagVersions  = 3
	replicaLagWindowDiv = 10
)

// orderPlan is what the plan decides for one order before anything is sent.
type orderPlan struct {
	malformed     bool
	malformedKind int  // 0-2: ordergen.Malformed kinds; 3: orderId other than the MessageId
	retry         bool // sent twice at once
	lateRetry     bool // sent again after the duplicate-detection window
	lateRetryCopy bool // the late retry is itself sent twice at once
	reuse         bool // the id is sent again with other content, after the window
	reuseRetry    bool // the reuse is itself sent twice at once
	outage        bool // every store call for it fails

	poison poisonKind // its document cannot be used: see poison.go

	// Status changes: versions 2..statuses+1, sent in the order of
	// statusOrder (indexes into the versions); the first statusBefore of
	// them go before the order message itself.
	statuses     int
	statusOrder  []int
	statusBefore int
	statusRetry  uint8 // bit v-2: version v is sent twice at once
	statusLate   uint8 // bit v-2: version v is sent again after the window
}

// plan decides every fault from the seed. Per-order decisions come from a
// PCG stream per order; per-delivery, per-settlement and per-store-call
// decisions are a pure function of the seed, the fault, the message and the
// opportunity's number, so a seed always plans the same faults whatever the
// goroutine interleaving. Only the fault budget (see take) depends on the
// order in which opportunities arise.
//
// A plan is safe for concurrent use.
type plan struct {
	seed      uint64
	rates     FaultRates
	maxFaults int     // per order id, across every fault except Outage
	statuses  float64 // fraction of valid orders with status changes

	// spared are the orders no fault strikes (the poison orders); set
	// before the run starts, read only after.
	spared map[string]bool

	mu     sync.Mutex
	budget map[string]int // faults injected so far, by message id
}

// planStream separates the plan's random streams from ordergen's, which use
// the same seed.
const planStream = 0x5eed_fa17_0000_0000

func newPlan(seed uint64, rates FaultRates, maxFaults int) *plan {
	return &plan{seed: seed, rates: rates, maxFaults: maxFaults, budget: make(map[string]int)}
}

// subscription returns a plan for another subscription of the same
// messages: the same orders, independent delivery and store faults, and a
// budget of its own.
func (p *plan) subscription(name string) *plan {
	q := newPlan(p.seed^mix64(fnv64a(name)), p.rates, p.maxFaults)
	q.statuses = p.statuses
	return q
}

// order decides what the producer does with order i.
func (p *plan) order(i int) orderPlan {
	r := rand.New(rand.NewPCG(p.seed^planStream, uint64(i)))
	// Draw every decision, used or not, so that changing one rate does not
	// shift the others.
	var d [7]float64
	for j := range d {
		d[j] = r.Float64()
	}
	kind := r.IntN(4)
	op := orderPlan{
		malformed:     d[0] < p.rates.Malformed,
		malformedKind: kind,
		retry:         d[1] < p.rates.ProducerRetry,
	}
	if op.malformed {
		return op
	}
	op.lateRetry = d[2] < p.rates.RetryOutsideWindow
	op.lateRetryCopy = op.lateRetry && d[3] < p.rates.ProducerRetry
	op.reuse = d[4] < p.rates.Reuse
	op.reuseRetry = op.reuse && d[5] < p.rates.ProducerRetry
	op.outage = d[6] < p.rates.Outage
	if op.poison = p.poisonDraw(i); op.poison != notPoison {
		// Spared every other fault: a copy of the order itself would
		// read its document too (see poison.go).
		op.lateRetry, op.lateRetryCopy, op.reuse, op.reuseRetry, op.outage = false, false, false, false, false
	}

	// Status changes draw from a stream of their own, so that the faults
	// above stay what they were before status changes existed.
	sr := rand.New(rand.NewPCG(p.seed^planStream^0x57a7, uint64(i)))
	has, shuffled := sr.Float64(), sr.Float64()
	n := 1 + sr.IntN(3)
	perm := sr.Perm(n)
	before := sr.IntN(n + 1)
	var retry, lateRetry [3]float64
	for v := range 3 {
		retry[v], lateRetry[v] = sr.Float64(), sr.Float64()
	}
	if has >= p.statuses && !(op.poison != notPoison && p.statuses > 0) { // a poison order always has status changes
		return op
	}
	op.statuses = n
	op.statusOrder = make([]int, n)
	for v := range n {
		op.statusOrder[v] = v
		if retry[v] < p.rates.ProducerRetry {
			op.statusRetry |= 1 << v
		}
		if lateRetry[v] < p.rates.RetryOutsideWindow {
			op.statusLate |= 1 << v
		}
	}
	if shuffled < p.rates.OutOfOrder {
		op.statusOrder, op.statusBefore = perm, before
	}
	return op
}

// inject reports whether fault f strikes opportunity (a, b) of order id,
// and if so charges it to the order's budget. The budget is the order's:
// its order message and its status changes share it. An order that has used
// its budget suffers no more faults, so its messages reach a clean delivery
// before the broker's MaxDeliveryCount: only an Outage makes a valid message
// exhaust it. (A fault costs a message at most two deliveries: its own, and
// a retry that finds the payment claim the fault left behind still fresh.)
func (p *plan) inject(f fault, id string, a, b uint64) bool {
	if p.roll(f, id, a, b) >= p.rate(f) || p.spared[id] {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.budget[id] >= p.maxFaults {
		return false
	}
	p.budget[id]++
	return true
}

// resubmits reports whether the operator resubmits the dead-lettered
// message with sequence number seq in round (1 early, 2 late). It is an
// operator's decision, not a fault: it spends no budget.
func (p *plan) resubmits(id string, seq int64, round int) bool {
	rate := p.rates.ResubmitEarly
	if round == 2 {
		rate = p.rates.ResubmitLate
	}
	return p.roll(faultResubmit, id, uint64(seq), uint64(round)) < rate
}

// recordOutage reports whether order id's payment record becomes
// unwritable after its capture (PaymentRecordOutage). It spends no budget:
// like Outage, it is meant to exhaust the message's deliveries.
func (p *plan) recordOutage(id string) bool {
	return p.roll(faultRecordOutage, id, 0, 0) < p.rates.PaymentRecordOutage && !p.spared[id]
}

// restarts reports whether the worker in slot restarts after its n-th
// settlement. It is not charged to any order's budget: a restart costs no
// delivery of a correct worker.
func (p *plan) restarts(slot string, n uint64) bool {
	return p.roll(faultRestart, slot, n, 0) < p.rates.WorkerRestart
}

// replicaLag reports whether order id's reads lag (FaultRates.ReplicaLag).
// It spends no budget: a lagging read is how Session consistency serves a
// read without the token, not a failure.
func (p *plan) replicaLag(id string) bool {
	return p.roll(faultReplicaLag, id, 0, 0) < p.rates.ReplicaLag
}

func (p *plan) rate(f fault) float64 {
	switch f {
	case faultLockExpiry:
		return p.rates.LockExpiry
	case faultCrash:
		return p.rates.Crash
	case faultLostSettlement:
		return p.rates.LostSettlement
	case faultTransientCreate, faultTransientRead:
		return p.rates.Transient
	case faultAmbiguous:
		return p.rates.Ambiguous
	case faultTransientDocument:
		return p.rates.Transient
	case faultPaymentFailure:
		return p.rates.PaymentFailure
	case faultPaymentTimeout, faultPaymentDrop:
		return p.rates.PaymentTimeout / 2
	case faultPaymentCrash:
		return p.rates.PaymentCrash
	case faultMarkFailure:
		return p.rates.PaymentMarkFailure
	case faultScheduleFailure:
		return p.rates.ScheduleFailure
	}
	return 0
}

// outageRate is the rate, per settlement, of the dependency outage kind.
func (p *plan) outageRate(kind string) float64 {
	switch kind {
	case OutageStore:
		return p.rates.StoreOutage
	case OutageStoreWrites:
		return p.rates.StoreWriteOutage
	case OutagePartition:
		return p.rates.PartitionOutage
	case OutageCaptures:
		return p.rates.CaptureOutage
	}
	return 0
}

// roll returns a number in [0, 1) determined by the seed, the fault, the
// message id and the opportunity (a, b).
func (p *plan) roll(f fault, id string, a, b uint64) float64 {
	x := mix64(p.seed ^ mix64(fnv64a(id)^uint64(f)<<56) ^ mix64(a+0x9e3779b97f4a7c15*b+uint64(f)))
	return float64(x>>11) / (1 << 53)
}

// fnv64a is the 64-bit FNV-1a hash of s.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the SplitMix64 finaliser: a bijection that spreads every input
// bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
