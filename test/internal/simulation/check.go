package simulation

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// State is what the checker holds against the invariants: the producer's
// ground truth and the final state of the queues, their dead-letter queues,
// the store and the payments service. It deliberately contains nothing the
// consumers reported about themselves.
type State struct {
	Sent      []Sent           // every message the producer sent to the order writers' queue, in order
	Queue     sbqueue.Snapshot // the order writers' queue after the run
	Documents []memstore.Item  // every live stored document after the run
	Now       time.Time        // the virtual clock when Documents were read: documents whose TTL passed are gone

	// Payments is the payments service's ledger; nil if the run captured
	// no payments.
	Payments *Ledger

	// Inbox holds the subscription of each inbox consumer; MarkerTTL is the
	// time-to-live of their markers.
	Inbox     []Subscription
	MarkerTTL time.Duration

	// Untouched are the deliveries a worker took from the broker and never
	// handed to a handler, as the receiver (the broker's end) saw them.
	Untouched []Untouched

	// PaymentRecordOutages are the orders whose payment record the store
	// could not write after their capture, until the queues drained
	// (FaultRates.PaymentRecordOutage): their messages may be
	// dead-lettered for MaxDeliveryCountExceeded although charged.
	PaymentRecordOutages map[string]bool

	// PoisonOrders are the orders whose document could not be used
	// (FaultRates.Poison): no status change of theirs can be applied, and
	// every one must end dead-lettered.
	PoisonOrders map[string]bool

	// OrderOutages are the orders whose every store call failed for good
	// (FaultRates.Outage): only their own messages meet it, and each is
	// dead-lettered for MaxDeliveryCountExceeded.
	OrderOutages map[string]bool
	// Outages are the dependency outages the plan struck (outage.go), and
	// Deliveries when the deliveries of every queued message happened, by
	// queue (the inbox consumer's name, "" for the order writers') and
	// sequence number: NoDeadLetterDuringOutage holds the dead-letter
	// queues against them.
	Outages    []Outage
	Deliveries map[string]map[int64]Span
}

// Untouched is a delivery a worker received and never handled.
type Untouched struct {
	Consumer      string // "" for the order writers' queue
	MessageID     string
	OrderID       string
	Seq           int64
	DeliveryCount uint32
}

// Subscription is the queue of one inbox consumer and what was sent to it:
// in a run, the subscription of the relay's topic and every message the
// relay sent to the topic (MessageId the event id, OrderID its order), each
// subscription getting a copy of what the topic accepted.
type Subscription struct {
	Consumer string           // the consumer's name, which its markers and loyalty entries carry
	Sent     []Sent           // in order; its own sequence numbers
	Queue    sbqueue.Snapshot // after the run
}

// Violation is one breach of an invariant.
type Violation struct {
	Invariant string // the Name of the Invariant
	OrderID   string // the order (the message's MessageId) involved
	Seq       int64  // the queued copy involved, if any; 0 otherwise
	Detail    string
}

// String formats v as "invariant: order id (message #seq): detail".
func (v Violation) String() string {
	s := v.Invariant + ": order " + v.OrderID
	if v.Seq != 0 {
		s += fmt.Sprintf(" (message #%d)", v.Seq)
	}
	return s + ": " + v.Detail
}

// Invariant is one property of DESIGN.md §4 that the final state must have.
type Invariant struct {
	Name      string // short and stable, as in Violation.Invariant
	Statement string // what it asserts
	check     func(*index) []Violation
}

// The invariants, by name.
const (
	OneOrderDocument        = "one-order-document"
	OneEvent                = "one-event"
	NoMessageLost           = "no-message-lost"
	RejectsDeadLettered     = "rejects-dead-lettered"
	DuplicatesChangeNothing = "duplicates-change-nothing"
	OneChargePerOrder       = "one-charge-per-order"
	StatusIsHighestVersion  = "status-is-highest-version"
	InboxOncePerConsumer    = "inbox-once-per-consumer"
	// EventReachesEverySubscription: the relay's part.
	EventReachesEverySubscription = "event-reaches-every-subscription"
	NoUntouchedDelivery           = "no-untouched-delivery"
	// NoDeadLetterDuringOutage: the circuit breaker's part.
	NoDeadLetterDuringOutage = "no-dead-letter-during-outage"
)

// Invariants returns the invariants Check verifies, in the order it checks
// them. Together they state DESIGN.md §4: one-order-document and
// no-message-lost make "every valid order ends with exactly one order
// document" (at most one, and present for every completed message);
// one-event makes "each side effect ran exactly once"; rejects-dead-lettered
// and duplicates-change-nothing are the last two points as written. The
// others extend them to the payment capture, status changes, the worker's
// receive loop, the outbox relay and the inbox consumers.
func Invariants() []Invariant {
	return []Invariant{
		{OneOrderDocument, "every order has at most one order document, stored under its own id and partition and holding content the producer sent for it", checkOneOrderDocument},
		{OneEvent, "every stored order has exactly one OrderAccepted event, with the order's request hash, and no event exists without its order", checkOneEvent},
		{NoMessageLost, "every queued message, on every queue, was completed with its effect present, or dead-lettered with a reason that explains it; none is left in a queue", checkNoMessageLost},
		{RejectsDeadLettered, "every message whose id was reused for other content, and every invalid message, is in the dead-letter queue with its reason, on every queue", checkRejectsDeadLettered},
		{DuplicatesChangeNothing, "duplicates write nothing: events, inbox markers and loyalty entries are written once; an order document keeps its creation fields and is written at most once more per status version sent; a payment record at most twice per claim, plus its completion", checkDuplicatesChangeNothing},
		{OneChargePerOrder, "the payments service charged every stored order exactly once (at most once if all its messages were dead-lettered) and nothing else; every completed order message has a completed payment record naming that charge, for the order's amount", checkOneChargePerOrder},
		{StatusIsHighestVersion, "every stored order's status and version are those of the highest version sent for it; every status change was completed with a version at least its own stored, dead-lettered because its order was never stored, or resubmitted by the operator", checkStatusIsHighestVersion},
		{NoUntouchedDelivery, "no worker took a message from the broker without handing it to a handler: a received message is locked, and abandoning it or letting its lock lapse raises its delivery count, so a shutdown must not receive what it will not handle", checkNoUntouchedDelivery},
		{EventReachesEverySubscription, "every stored OrderAccepted event was published by the relay and reached every inbox consumer's subscription, across the relay's crashes, stops, pauses and lease takeovers", checkEventReachesEverySubscription},
		{InboxOncePerConsumer, "every inbox consumer wrote exactly one loyalty entry for every valid order and none for anything else, with its marker, which recorded content sent for the order and is gone only after its TTL; one consumer never suppresses another", checkInboxOncePerConsumer},
		{NoDeadLetterDuringOutage, "no message, on any queue, was dead-lettered for MaxDeliveryCountExceeded while a dependency it needs was down (an outage of the whole store, of its writes, of its order's key range, or of the payment captures an order message makes, overlapped its deliveries): a worker pauses for an outage instead of spending the backlog's deliveries on it; orders whose own storage or payment record failed for good, and poison orders, meet faults only their messages meet, and are not held to it", checkNoDeadLetterDuringOutage},
	}
}

// Check verifies every invariant against s and returns the violations,
// grouped by invariant in the order of Invariants. It reads s only.
func Check(s *State) []Violation { return newIndex(s).check() }

func (idx *index) check() []Violation {
	var out []Violation
	for _, inv := range Invariants() {
		out = append(out, inv.check(idx)...)
	}
	return out
}

// doc is a stored document with the fields the checker reads.
type doc struct {
	item        memstore.Item
	typ         string
	orderID     string
	requestHash string
	consumer    string // markers and loyalty entries
	messageID   string // markers
	state       string // payment records
}

// view is one queue as the checker sees it, with the effect a completed
// message must have left.
type view struct {
	consumer string           // "" for the order writers' queue
	queue    sbqueue.Snapshot // the queue after the run
	enqueued []Sent           // in sequence order
	dead     map[int64]sbqueue.ReceivedMessage
	pending  map[int64]bool // still in the queue, available or locked
	// fates are what became of the delayed-retry copies the workers
	// scheduled, by the sequence number of the message they retry (see
	// end).
	fates map[int64]retryFate
	// stored returns the request hash of the content processed for
	// message id, and whether any was; hash is empty when the effect exists
	// but its content can no longer be told (an inbox marker expired).
	stored func(id string) (hash string, ok bool)
}

func newView(consumer string, sent []Sent, q sbqueue.Snapshot, stored func(string) (string, bool)) *view {
	v := &view{consumer: consumer, queue: q, dead: make(map[int64]sbqueue.ReceivedMessage), pending: make(map[int64]bool), stored: stored}
	for _, m := range sent {
		if m.Enqueued {
			v.enqueued = append(v.enqueued, m)
		}
	}
	slices.SortFunc(v.enqueued, func(a, b Sent) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, m := range q.DeadLetters {
		v.dead[m.SequenceNumber] = m
	}
	// A message the operator resubmitted was dead-lettered with the reason
	// recorded at the resubmission; its copy is a message of its own.
	for _, m := range v.enqueued {
		if _, still := v.dead[m.Seq]; m.Resubmitted && !still {
			v.dead[m.Seq] = sbqueue.ReceivedMessage{Message: sbqueue.Message{MessageID: m.MessageID},
				SequenceNumber: m.Seq, DeadLetterReason: m.DeadLetterReason, DeadLetterErrorDescription: m.DeadLetterDescription}
		}
	}
	for _, m := range q.Active {
		v.pending[m.SequenceNumber] = true
	}
	for _, m := range q.Locked {
		v.pending[m.SequenceNumber] = true
	}
	v.fates = copyFates(v.enqueued, q)
	return v
}

// end returns how message m ended: dead-lettered (with its dead-letter),
// still in the queue, or neither: completed. A message the worker
// completed after it scheduled a delayed-retry copy (a status change
// before its order, a trial of a circuit breaker that failed by a
// dependency) ends as its copies do: in the queue while one is,
// dead-lettered when the last of them was (see copyFates).
func (v *view) end(m Sent) (dl sbqueue.ReceivedMessage, dead, pending bool) {
	if dl, dead = v.dead[m.Seq]; dead {
		return dl, true, false
	}
	if v.pending[m.Seq] {
		return dl, false, true
	}
	if f, ok := v.fates[m.Seq]; ok {
		return f.dead, f.isDead && !f.pending, f.pending
	}
	return dl, false, false
}

// copyFates collects the fates of the scheduled copies in q by the
// sequence number of the message they retry (copyOwner), so that the
// copies of a resubmission, or of a producer's retry, are not taken for
// those of an earlier message with the same MessageId.
func copyFates(enqueued []Sent, q sbqueue.Snapshot) map[int64]retryFate {
	return fatesBy(q, func(m sbqueue.ReceivedMessage) (int64, bool) {
		i := copyOwner(enqueued, m.MessageID, m.ApplicationProperties, m.SequenceNumber)
		if i < 0 {
			return 0, false
		}
		return enqueued[i].Seq, true
	})
}

// copyOwner returns the index in sent of the message that the scheduled
// copy with MessageId id, application properties props and sequence
// number seq retries, or -1 if it is not a copy or retries none of them:
// of the messages enqueued before it with the MessageId it retries, the one
// whose enqueue time is nearest the copy's worker.PropertyRetrySince (the
// original's enqueue time, which every copy of a copy keeps), the last of
// them on a tie.
func copyOwner(sent []Sent, id string, props map[string]any, seq int64) int {
	orig, ok := retryOfProps(id, props)
	if !ok {
		return -1
	}
	since, _ := props[worker.PropertyRetrySince].(int64)
	best, gap := -1, int64(math.MaxInt64)
	for i, s := range sent {
		if !s.Enqueued || s.MessageID != orig || s.Seq >= seq {
			continue
		}
		if d := abs64(s.EnqueuedAt.UnixMilli() - since); d <= gap {
			best, gap = i, d
		}
	}
	return best
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// where names the view's queue in a violation.
func (v *view) where() string {
	if v.consumer == "" {
		return ""
	}
	return " on " + v.consumer + "'s queue"
}

// index is State rearranged for the checks.
type index struct {
	s         *State
	enqueued  []Sent                            // the order writers' queue, in sequence order
	copies    map[string][]Sent                 // enqueued processable copies, by MessageID
	statuses  map[string][]Sent                 // status changes sent (enqueued or not), by order id
	dead      map[int64]sbqueue.ReceivedMessage // the dead-letter queue, by sequence number
	pending   map[int64]bool                    // still in the queue, available or locked
	orders    map[string][]doc                  // order documents, by orderId
	events    map[string][]doc                  // event documents, by orderId
	payments  map[string][]doc                  // payment records, by orderId
	markers   []doc                             // inbox markers
	loyalty   []doc                             // loyalty entries
	malformed []doc                             // documents the checker cannot read
	views     []*view                           // the order writers' queue, then each inbox consumer's
	orderView *view                             // the order writers' queue
}

func newIndex(s *State) *index {
	idx := &index{
		s:        s,
		copies:   make(map[string][]Sent),
		statuses: make(map[string][]Sent),
		orders:   make(map[string][]doc),
		events:   make(map[string][]doc),
		payments: make(map[string][]doc),
	}
	for _, m := range s.Sent {
		if m.Kind == Status {
			idx.statuses[m.OrderID] = append(idx.statuses[m.OrderID], m)
		}
		if m.Enqueued && m.Kind.Processable() {
			idx.copies[m.MessageID] = append(idx.copies[m.MessageID], m)
		}
	}
	for _, it := range s.Documents {
		var f struct {
			Type        string `json:"type"`
			OrderID     string `json:"orderId"`
			RequestHash string `json:"requestHash"`
			Consumer    string `json:"consumer"`
			MessageID   string `json:"messageId"`
			State       string `json:"state"`
		}
		d := doc{item: it}
		if err := json.Unmarshal(it.Body, &f); err != nil {
			idx.malformed = append(idx.malformed, d)
			continue
		}
		d.typ, d.orderID, d.requestHash, d.consumer, d.messageID, d.state = f.Type, f.OrderID, f.RequestHash, f.Consumer, f.MessageID, f.State
		switch d.typ {
		case order.TypeOrder:
			idx.orders[d.orderID] = append(idx.orders[d.orderID], d)
		case order.TypeEvent:
			idx.events[d.orderID] = append(idx.events[d.orderID], d)
		case order.TypePayment:
			idx.payments[d.orderID] = append(idx.payments[d.orderID], d)
		case order.TypeInboxMarker:
			idx.markers = append(idx.markers, d)
		case order.TypeLoyaltyEntry:
			idx.loyalty = append(idx.loyalty, d)
		case relay.TypeLease, relay.TypeManifest:
			// The relay's own documents, under their own ids as partition
			// keys: no consumer's business.
		default:
			idx.malformed = append(idx.malformed, d)
		}
	}
	orders := newView("", s.Sent, s.Queue, idx.stored)
	idx.enqueued, idx.dead, idx.pending, idx.orderView = orders.enqueued, orders.dead, orders.pending, orders
	idx.views = append(idx.views, orders)
	for _, sub := range s.Inbox {
		idx.views = append(idx.views, newView(sub.Consumer, sub.Sent, sub.Queue, idx.inboxStored(sub.Consumer)))
	}
	return idx
}

// inboxStored returns the stored function of consumer's view: the request
// hash its live marker for a message recorded, or, once the marker has
// expired, only whether the consumer wrote a loyalty entry for the order.
// It indexes the consumer's markers and entries once, so that a lookup per
// message costs a map access, not a scan of every marker.
func (idx *index) inboxStored(consumer string) func(string) (string, bool) {
	hashes := make(map[string]string) // message id -> the first marker's request hash
	for _, m := range idx.markers {
		if _, seen := hashes[m.messageID]; m.consumer == consumer && !seen {
			hashes[m.messageID] = m.requestHash
		}
	}
	entries := make(map[string]bool) // order ids with a loyalty entry
	for _, e := range idx.loyalty {
		if e.consumer == consumer {
			entries[e.orderID] = true
		}
	}
	return func(id string) (string, bool) {
		if h, ok := hashes[id]; ok {
			return h, true
		}
		return "", entries[orderOfMessage(id)]
	}
}

// orderOfMessage returns the order an inbox consumer's message is about:
// the order of an OrderAccepted event id, else the MessageId itself (an
// order placement's).
func orderOfMessage(id string) string {
	if rest, ok := strings.CutPrefix(id, order.EventID("")); ok {
		return rest
	}
	return id
}

// paymentDone reports whether order id has a completed payment record, or
// payments are off.
func (idx *index) paymentDone(id string) bool {
	if idx.s.Payments == nil {
		return true
	}
	return slices.ContainsFunc(idx.payments[id], func(d doc) bool { return d.state == order.PaymentCompleted })
}

// charges returns how often the payments service charged order id.
func (idx *index) charges(id string) int {
	if idx.s.Payments == nil {
		return 0
	}
	return idx.s.Payments.Charges[id]
}

// paymentState describes order id's payment record, for a violation.
func (idx *index) paymentState(id string) string {
	for _, d := range idx.payments[id] {
		var rec order.PaymentRecord
		if json.Unmarshal(d.item.Body, &rec) == nil {
			return fmt.Sprintf("record %s, owner %s, claimed at %s, %d claims", rec.State, rec.Owner, rec.ClaimedAt.Format(time.RFC3339Nano), rec.Attempts)
		}
	}
	return "no payment record"
}

// stored returns the request hash of the order document of id: the one
// stored under id itself (checkOneOrderDocument reports any other).
func (idx *index) stored(id string) (hash string, ok bool) {
	for _, d := range idx.orders[id] {
		if d.item.ID == id {
			return d.requestHash, true
		}
	}
	return "", false
}

// sortedKeys returns m's keys in order, so violations come out in a stable
// order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func checkOneOrderDocument(idx *index) []Violation {
	var out []Violation
	add := func(id, format string, args ...any) {
		out = append(out, Violation{Invariant: OneOrderDocument, OrderID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for _, d := range idx.malformed {
		add(d.item.PartitionKey, "document %q is none of the documents the consumers write", d.item.ID)
	}
	for _, id := range sortedKeys(idx.orders) {
		ds := idx.orders[id]
		if len(ds) > 1 {
			ids := make([]string, len(ds))
			for i, d := range ds {
				ids[i] = d.item.ID
			}
			add(id, "%d order documents %q", len(ds), ids)
		}
		for _, d := range ds {
			if d.item.ID != id || d.item.PartitionKey != id {
				add(id, "order document %q in partition %q: want id and partition key %q", d.item.ID, d.item.PartitionKey, id)
			}
			copies := idx.copies[id]
			if len(copies) == 0 {
				add(id, "order document %q exists, but no valid message for the order was queued", d.item.ID)
				continue
			}
			if !slices.ContainsFunc(copies, func(m Sent) bool { return m.RequestHash == d.requestHash }) {
				add(id, "order document has request hash %s, which no message sent for the order has", d.requestHash)
			}
		}
	}
	return out
}

func checkOneEvent(idx *index) []Violation {
	var out []Violation
	add := func(id, format string, args ...any) {
		out = append(out, Violation{Invariant: OneEvent, OrderID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for _, id := range sortedKeys(idx.orders) {
		evs := idx.events[id]
		if len(evs) != 1 {
			add(id, "%d OrderAccepted events for the order, want 1", len(evs))
		}
		hash := idx.orders[id][0].requestHash
		for _, e := range evs {
			if want := order.EventID(id); e.item.ID != want || e.item.PartitionKey != id {
				add(id, "event document %q in partition %q: want id %q in partition %q", e.item.ID, e.item.PartitionKey, want, id)
			}
			if e.requestHash != hash {
				add(id, "event %q has request hash %s, its order %s", e.item.ID, e.requestHash, hash)
			}
		}
	}
	for _, id := range sortedKeys(idx.events) {
		if len(idx.orders[id]) == 0 {
			add(id, "%d OrderAccepted events without an order document", len(idx.events[id]))
		}
	}
	return out
}

func checkNoMessageLost(idx *index) []Violation {
	var out []Violation
	for _, v := range idx.views {
		out = append(out, v.noMessageLost(idx)...)
	}
	return out
}

func (v *view) noMessageLost(idx *index) []Violation {
	var out []Violation
	add := func(m Sent, format string, args ...any) {
		out = append(out, Violation{Invariant: NoMessageLost, OrderID: m.OrderIDOrMessageID(), Seq: m.Seq, Detail: fmt.Sprintf(format, args...) + v.where()})
	}
	if n, c := int64(len(v.enqueued)), copiesEnqueued(v.queue); v.queue.Sent != n+c {
		out = append(out, Violation{Invariant: NoMessageLost, Detail: fmt.Sprintf("the queue enqueued %d messages, the producer %d and the workers' scheduled retries %d%s", v.queue.Sent, n, c, v.where())})
	}
	known := make(map[int64]bool, len(v.enqueued))
	for _, m := range v.enqueued {
		known[m.Seq] = true
		hash, stored := v.stored(m.MessageID)
		dl, dead, pending := v.end(m)
		switch {
		case pending:
			add(m, "%s message still in the queue at the end of the run", m.Kind)
		case dead && (dl.DeadLetterReason == "" || dl.DeadLetterErrorDescription == ""):
			add(m, "dead-lettered with reason %q and description %q: both must explain it", dl.DeadLetterReason, dl.DeadLetterErrorDescription)
		case m.Kind == Status: // checkStatusIsHighestVersion
		case dead && m.Kind.Processable():
			switch dl.DeadLetterReason {
			case order.ReasonOrderIDReused:
				if !stored || hash == m.RequestHash {
					add(m, "dead-lettered as %s, but the stored effect has the message's own content: a duplicate surfaced as an error", dl.DeadLetterReason)
				}
			case sbqueue.ReasonMaxDeliveryCountExceeded:
				// A stored order whose payment never succeeded (the
				// payments service down for good) is dead-lettered, not
				// lost: a resubmission finishes it. But faults are bounded
				// per order so that a correct consumer always reaches a
				// clean delivery: once the service has charged the order,
				// a dead-letter for MaxDeliveryCountExceeded means the
				// consumer spent the message's deliveries without
				// finishing what it could finish.
				switch {
				case !stored || hash != m.RequestHash:
				case v.consumer == "" && idx.s.PoisonOrders[m.MessageID]:
					// Its document cannot be used: a copy delivered again
					// reads it and cannot finish.
				case v.consumer == "" && idx.s.PaymentRecordOutages[m.MessageID]:
					// Its payment record could not be written after the
					// charge for the copy's whole life: no consumer could
					// finish it; a resubmission does (one-charge-per-order
					// checks that it charged nothing more).
				case v.consumer != "" || idx.paymentDone(m.MessageID):
					add(m, "dead-lettered as %s although its effect is stored: a duplicate surfaced as an error", dl.DeadLetterReason)
				case idx.charges(m.MessageID) > 0:
					add(m, "dead-lettered as %s with its payment record unfinished although the payments service had charged the order: its deliveries were spent waiting on a payment claim (%s)", dl.DeadLetterReason, idx.paymentState(m.MessageID))
				}
			case order.ReasonPaymentNeedsReconciliation:
				// The consumer could not tell whether an old claim's capture
				// charged, and handed the order to a person: explained for
				// a stored order (one-charge-per-order checks that it was
				// charged at most once; a resubmission may finish it).
				if !stored {
					add(m, "dead-lettered as %s, but its order is not stored", dl.DeadLetterReason)
				}
			default:
				add(m, "valid order dead-lettered with reason %q (%s)", dl.DeadLetterReason, dl.DeadLetterErrorDescription)
			}
		case dead: // invalid: checkRejectsDeadLettered checks the reason
		case !m.Kind.Processable(): // completed: checkRejectsDeadLettered
		case !stored:
			add(m, "completed, but its effect is not stored: the order is lost")
		case hash != m.RequestHash: // a mismatch completed: checkRejectsDeadLettered
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(v.dead)) {
		if _, retry := retryOf(v.dead[seq]); !known[seq] && !retry { // a retry: checkStatusIsHighestVersion
			m := v.dead[seq]
			out = append(out, Violation{Invariant: NoMessageLost, OrderID: m.MessageID, Seq: seq, Detail: "a dead-lettered message the producer never queued" + v.where()})
		}
	}
	return out
}

// OrderIDOrMessageID returns the order the message is about: OrderID, or
// MessageID when OrderID is not set.
func (m Sent) OrderIDOrMessageID() string {
	if m.OrderID != "" {
		return m.OrderID
	}
	return m.MessageID
}

func checkRejectsDeadLettered(idx *index) []Violation {
	var out []Violation
	for _, v := range idx.views {
		for _, m := range v.enqueued {
			var want string
			switch {
			case m.Kind == Malformed:
				want = idempotent.ReasonInvalidMessage
			case m.Kind == IDMismatch:
				want = idempotent.ReasonMessageIDMismatch
			case m.Kind.Processable():
				if hash, ok := v.stored(m.MessageID); ok && hash != "" && hash != m.RequestHash {
					want = order.ReasonOrderIDReused
				}
			}
			if want == "" || v.pending[m.Seq] { // pending: reported by checkNoMessageLost
				continue
			}
			// A message completed after its delayed-retry copy was
			// scheduled (a circuit breaker's trial) ends as its copies do.
			dl, dead, pending := v.end(m)
			detail := ""
			switch {
			case pending: // reported by checkNoMessageLost
				continue
			case !dead:
				detail = fmt.Sprintf("%s message completed: silently dropped, want it dead-lettered as %s", m.Kind, want)
			case dl.DeadLetterReason != want:
				detail = fmt.Sprintf("%s message dead-lettered as %q, want %s", m.Kind, dl.DeadLetterReason, want)
			default:
				continue
			}
			out = append(out, Violation{Invariant: RejectsDeadLettered, OrderID: m.MessageID, Seq: m.Seq, Detail: detail + v.where()})
		}
	}
	return out
}

func checkDuplicatesChangeNothing(idx *index) []Violation {
	var out []Violation
	add := func(it memstore.Item, format string, args ...any) {
		out = append(out, Violation{Invariant: DuplicatesChangeNothing, OrderID: it.PartitionKey,
			Detail: fmt.Sprintf("document %q ", it.ID) + fmt.Sprintf(format, args...)})
	}
	for _, it := range idx.s.Documents {
		var f struct {
			Type     string `json:"type"`
			OrderID  string `json:"orderId"`
			Attempts int    `json:"attempts"`
		}
		if json.Unmarshal(it.Body, &f) != nil {
			continue // checkOneOrderDocument reports it
		}
		switch f.Type {
		case order.TypeOrder:
			versions := make(map[int64]bool)
			for _, m := range idx.statuses[f.OrderID] {
				versions[m.Version] = true
			}
			if limit := 1 + len(versions); it.Writes > limit {
				add(it, "written %d times: more than once, plus once per status version sent (%d)", it.Writes, len(versions))
			}
			if why := changedCreation(it, idx.events[f.OrderID]); why != "" {
				add(it, "changed after its creation: %s", why)
			}
		case relay.TypeLease, relay.TypeManifest: // rewritten by every renewal and checkpoint
		case order.TypePayment:
			if limit := 2*f.Attempts + 1; it.Writes > limit {
				add(it, "written %d times for %d claims: want at most a claim and a release per claim, plus the completion (%d)", it.Writes, f.Attempts, limit)
			}
		default:
			if it.Writes != 1 {
				add(it, "written %d times", it.Writes)
			}
		}
	}
	return out
}

// changedCreation returns why the order document it no longer holds what
// its creation wrote, or "". Its event, written in the same batch and never
// changed, holds the creation's values; the request hash, recomputed from
// the document, covers the lines and the rest of the content.
func changedCreation(it memstore.Item, events []doc) string {
	var d order.OrderDocument
	if err := json.Unmarshal(it.Body, &d); err != nil {
		return err.Error()
	}
	o := order.Order{OrderID: d.OrderID, CustomerID: d.CustomerID, Currency: d.Currency, Lines: d.Lines, TotalMinor: d.TotalMinor, PlacedAt: d.PlacedAt}
	if h := o.RequestHash(); h != d.RequestHash {
		return fmt.Sprintf("its content hashes to %s, its requestHash is %s", h, d.RequestHash)
	}
	if d.MessageID != d.OrderID {
		return fmt.Sprintf("messageId %q is not the order id", d.MessageID)
	}
	for _, e := range events {
		var ev order.AcceptedEvent
		if json.Unmarshal(e.item.Body, &ev) != nil {
			continue
		}
		switch {
		case ev.RequestHash != d.RequestHash:
			return fmt.Sprintf("requestHash %s, its event's %s", d.RequestHash, ev.RequestHash)
		case !ev.OccurredAt.Equal(d.ProcessedAt):
			return fmt.Sprintf("processedAt %v, its event's %v", d.ProcessedAt, ev.OccurredAt)
		case ev.CustomerID != d.CustomerID || ev.Currency != d.Currency || ev.TotalMinor != d.TotalMinor:
			return "customer, currency or total differs from its event's"
		}
	}
	return ""
}

func checkOneChargePerOrder(idx *index) []Violation {
	l := idx.s.Payments
	if l == nil {
		return nil
	}
	var out []Violation
	add := func(id, format string, args ...any) {
		out = append(out, Violation{Invariant: OneChargePerOrder, OrderID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for _, id := range sortedKeys(idx.orders) {
		var d order.OrderDocument
		if json.Unmarshal(idx.orders[id][0].item.Body, &d) != nil {
			continue
		}
		completed := slices.ContainsFunc(idx.copies[id], func(m Sent) bool {
			_, dead, pending := idx.orderView.end(m)
			return m.RequestHash == d.RequestHash && !dead && !pending
		})
		charges := l.Charges[id]
		switch {
		case completed && charges != 1:
			add(id, "charged %d times, want exactly once", charges)
		case !completed && charges > 1:
			add(id, "charged %d times, want at most once (every message of the order was dead-lettered)", charges)
		}
		recs := idx.payments[id]
		if len(recs) > 1 {
			add(id, "%d payment records", len(recs))
		}
		if len(recs) == 0 {
			if completed {
				add(id, "order message completed, but the order has no payment record")
			}
			continue
		}
		var rec order.PaymentRecord
		if err := json.Unmarshal(recs[0].item.Body, &rec); err != nil {
			add(id, "payment record: %v", err)
			continue
		}
		switch {
		case rec.ID != order.PaymentRecordID(id) || recs[0].item.PartitionKey != id:
			add(id, "payment record %q in partition %q, want %q in %q", rec.ID, recs[0].item.PartitionKey, order.PaymentRecordID(id), id)
		case rec.IdempotencyKey != order.PaymentKey(id):
			add(id, "payment record has idempotency key %q, want %q", rec.IdempotencyKey, order.PaymentKey(id))
		case rec.State != order.PaymentCompleted:
			if completed {
				add(id, "order message completed, but its payment record is %s (owner %s, %d claims)", rec.State, rec.Owner, rec.Attempts)
			}
		default:
			p, ok := l.Payments[rec.PaymentID]
			switch {
			case !ok:
				add(id, "payment record names payment %q, which the payments service never issued", rec.PaymentID)
			case p.OrderID != id || p.AmountMinor != d.TotalMinor || p.Currency != d.Currency:
				add(id, "payment %s is %d %s for order %q, want %d %s for this order", p.PaymentID, p.AmountMinor, p.Currency, p.OrderID, d.TotalMinor, d.Currency)
			}
		}
	}
	for _, id := range sortedKeys(l.Charges) {
		if l.Charges[id] > 0 && len(idx.orders[id]) == 0 {
			add(id, "charged %d times, but no order is stored", l.Charges[id])
		}
	}
	for _, id := range sortedKeys(idx.payments) {
		if len(idx.orders[id]) == 0 {
			add(id, "a payment record without its order")
		}
	}
	return out
}

func checkStatusIsHighestVersion(idx *index) []Violation {
	var out []Violation
	add := func(id string, seq int64, format string, args ...any) {
		out = append(out, Violation{Invariant: StatusIsHighestVersion, OrderID: id, Seq: seq, Detail: fmt.Sprintf(format, args...)})
	}
	version := func(id string) (d order.OrderDocument, ok bool) {
		for _, od := range idx.orders[id] {
			if od.item.ID == id && json.Unmarshal(od.item.Body, &d) == nil {
				return d, true
			}
		}
		return d, false
	}
	for _, id := range sortedKeys(idx.orders) {
		d, ok := version(id)
		if !ok {
			continue
		}
		want := Sent{Version: 1, Status: "accepted"}
		for _, m := range idx.statuses[id] {
			if m.Version > want.Version && !idx.s.PoisonOrders[id] { // no change of a poison order can be applied
				want = m
			}
		}
		if d.Version != want.Version || d.Status != want.Status {
			add(id, want.Seq, "stored version %d (%s), want the highest sent: version %d (%s)", d.Version, d.Status, want.Version, want.Status)
		}
	}
	fates := retryFates(idx.s.Queue)
	for _, m := range idx.enqueued {
		if m.Kind != Status || idx.pending[m.Seq] { // pending: checkNoMessageLost
			continue
		}
		// A change completed after scheduling a retry ends with its copies.
		f := fates[m.MessageID]
		if f.pending {
			add(m.OrderID, m.Seq, "status change to version %d: its scheduled retry is still in the queue at the end of the run", m.Version)
			continue
		}
		if m.Resubmitted && m.DeadLetterReason == sbqueue.ReasonMaxDeliveryCountExceeded {
			// Dead-lettered while its order was not yet stored, or before
			// the order's own retries got it stored, and resubmitted: the
			// copy is checked as a message of its own, and the order's
			// version above shows whether it was applied.
			continue
		}
		d, stored := version(m.OrderID)
		dl, dead := idx.dead[m.Seq]
		if !dead && f.isDead {
			dl, dead = f.dead, true
		}
		if idx.s.PoisonOrders[m.OrderID] {
			// Its order's document cannot be used: it must end
			// dead-lettered (by MaxDeliveryCount, or by the consumer
			// with a reason; checkNoMessageLost checks that it has one).
			if !dead {
				add(m.OrderID, m.Seq, "status change to version %d of a poison order (its document cannot be used) completed, want it dead-lettered", m.Version)
			}
			continue
		}
		switch {
		case dead && dl.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded:
			add(m.OrderID, m.Seq, "status change to version %d dead-lettered as %q (%s)", m.Version, dl.DeadLetterReason, dl.DeadLetterErrorDescription)
		case dead && stored:
			// Before its order: its deliveries, or its scheduled retries,
			// ran out waiting for an order that came.
			add(m.OrderID, m.Seq, "status change to version %d (%s) dead-lettered as %s although its order is stored", m.Version, dl.MessageID, dl.DeadLetterReason)
		case dead: // its order was never stored: explained
		case !stored:
			add(m.OrderID, m.Seq, "status change to version %d completed, but its order is not stored: lost", m.Version)
		case d.Version < m.Version:
			add(m.OrderID, m.Seq, "status change to version %d completed, but the order is at version %d: lost", m.Version, d.Version)
		}
	}
	return out
}

func checkNoUntouchedDelivery(idx *index) []Violation {
	var out []Violation
	for _, u := range idx.s.Untouched {
		where := ""
		if u.Consumer != "" {
			where = " on " + u.Consumer + "'s queue"
		}
		out = append(out, Violation{Invariant: NoUntouchedDelivery, OrderID: u.OrderID, Seq: u.Seq,
			Detail: fmt.Sprintf("delivery %d of %s was received and never handed to a handler%s", u.DeliveryCount, u.MessageID, where)})
	}
	return out
}

func checkInboxOncePerConsumer(idx *index) []Violation {
	var out []Violation
	add := func(id, format string, args ...any) {
		out = append(out, Violation{Invariant: InboxOncePerConsumer, OrderID: id, Detail: fmt.Sprintf(format, args...)})
	}
	consumers := make(map[string]bool)
	for _, sub := range idx.s.Inbox {
		consumers[sub.Consumer] = true
		byOrder := make(map[string][]Sent)   // processable copies on its queue, by the order they are about
		byMessage := make(map[string][]Sent) // the same, by MessageId
		for _, m := range sub.Sent {
			if m.Enqueued && m.Kind.Processable() {
				byOrder[m.OrderIDOrMessageID()] = append(byOrder[m.OrderIDOrMessageID()], m)
				byMessage[m.MessageID] = append(byMessage[m.MessageID], m)
			}
		}
		entries := make(map[string][]doc)
		for _, e := range idx.loyalty {
			if e.consumer == sub.Consumer {
				entries[e.orderID] = append(entries[e.orderID], e)
			}
		}
		marked := make(map[string]bool) // orders with a live marker
		for _, m := range idx.markers {
			if m.consumer != sub.Consumer {
				continue
			}
			copies := byMessage[m.messageID]
			switch {
			case len(copies) == 0:
				add(orderOfMessage(m.messageID), "%s has a marker for %s, but no valid message with this id was queued", sub.Consumer, m.messageID)
			case m.item.ID != order.InboxMarkerID(sub.Consumer, m.messageID) || m.item.PartitionKey != copies[0].OrderIDOrMessageID():
				add(copies[0].OrderIDOrMessageID(), "%s's marker %q in partition %q, want %q in %q", sub.Consumer, m.item.ID, m.item.PartitionKey,
					order.InboxMarkerID(sub.Consumer, m.messageID), copies[0].OrderIDOrMessageID())
			case !slices.ContainsFunc(copies, func(s Sent) bool { return s.RequestHash == m.requestHash }):
				add(copies[0].OrderIDOrMessageID(), "%s's marker has request hash %s, which no message sent for the order has", sub.Consumer, m.requestHash)
			default:
				marked[copies[0].OrderIDOrMessageID()] = true
			}
		}
		for _, id := range sortedKeys(byOrder) {
			es := entries[id]
			if len(es) != 1 {
				add(id, "%s wrote %d loyalty entries for the order, want 1", sub.Consumer, len(es))
			}
			if marked[id] || len(es) == 0 {
				continue
			}
			var e order.LoyaltyEntry
			if json.Unmarshal(es[0].item.Body, &e) == nil && e.AwardedAt.Add(idx.s.MarkerTTL).After(idx.s.Now) {
				add(id, "%s's marker is gone before its TTL %v passed", sub.Consumer, idx.s.MarkerTTL)
			}
		}
		for _, id := range sortedKeys(entries) {
			if len(byOrder[id]) == 0 {
				add(id, "%s wrote %d loyalty entries, but no valid message with this id was queued", sub.Consumer, len(entries[id]))
			}
		}
	}
	for _, d := range append(slices.Clone(idx.markers), idx.loyalty...) {
		if !consumers[d.consumer] {
			add(d.orderID, "%s %q written by %q, which is no inbox consumer's name", d.typ, d.item.ID, d.consumer)
		}
	}
	return out
}

// checkEventReachesEverySubscription holds the relay to its contract: every
// OrderAccepted event stored (one per stored order: one-event) was
// accepted by the topic, with the event's content, at least once, so that
// every subscription got a copy; its effect in each consumer's records is
// inbox-once-per-consumer's to check. The topic accepted nothing that is
// not a stored event.
func checkEventReachesEverySubscription(idx *index) []Violation {
	var out []Violation
	add := func(id, format string, args ...any) {
		out = append(out, Violation{Invariant: EventReachesEverySubscription, OrderID: id, Detail: fmt.Sprintf(format, args...)})
	}
	for _, sub := range idx.s.Inbox {
		got := make(map[string][]Sent) // by order
		for _, m := range sub.Sent {
			if m.Enqueued && m.Kind.Processable() {
				got[m.OrderIDOrMessageID()] = append(got[m.OrderIDOrMessageID()], m)
			}
		}
		for _, id := range sortedKeys(idx.events) {
			for _, e := range idx.events[id] {
				if !slices.ContainsFunc(got[id], func(m Sent) bool { return m.RequestHash == e.requestHash }) {
					add(id, "event %q is stored, but %s's subscription never received it (%d copies of other content): the relay lost it", e.item.ID, sub.Consumer, len(got[id]))
				}
			}
		}
	}
	return out
}

// checkNoDeadLetterDuringOutage holds every dead-letter queue against the
// dependency outages of the run: a message dead-lettered for
// MaxDeliveryCountExceeded whose deliveries overlapped an outage of a
// dependency it needs spent its deliveries on the outage. Which messages
// need what: every message needs the store's writes (an order, a status
// change, an inbox marker), and its order's key range; an order message on
// the order writers' queue needs the payment captures, when payments run.
func checkNoDeadLetterDuringOutage(idx *index) []Violation {
	if len(idx.s.Outages) == 0 {
		return nil
	}
	var out []Violation
	for _, v := range idx.views {
		bySeq := make(map[int64]Sent, len(v.enqueued))
		for _, m := range v.enqueued {
			bySeq[m.Seq] = m
		}
		spans := idx.s.Deliveries[v.consumer]
		for _, seq := range slices.Sorted(maps.Keys(v.dead)) {
			dl := v.dead[seq]
			if dl.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded {
				continue
			}
			orderID, capture := dl.CorrelationID, false
			if m, ok := bySeq[seq]; ok {
				orderID, capture = m.OrderIDOrMessageID(), m.Kind.Processable()
			} else if orig, retry := retryOf(dl); retry && orderID == "" {
				orderID = orderOfMessage(orig)
			}
			if orderID == "" {
				orderID = orderOfMessage(dl.MessageID)
			}
			if v.consumer == "" && (idx.s.OrderOutages[orderID] || idx.s.PoisonOrders[orderID] || idx.s.PaymentRecordOutages[orderID]) {
				continue
			}
			sp, ok := spans[seq]
			if !ok {
				continue // never delivered: checkNoMessageLost
			}
			for _, o := range idx.s.Outages {
				needs := o.Covers(orderID)
				if o.Kind == OutageCaptures {
					needs = v.consumer == "" && capture && idx.s.Payments != nil
				}
				if needs && o.During(sp.First, sp.Last) {
					out = append(out, Violation{Invariant: NoDeadLetterDuringOutage, OrderID: orderID, Seq: seq,
						Detail: fmt.Sprintf("%s dead-lettered as %s; its deliveries ran from %v to %v after an outage of the %s began, which lasted %v: they were spent on the outage%s",
							dl.MessageID, dl.DeadLetterReason, sp.First.Sub(o.Start).Round(time.Millisecond), sp.Last.Sub(o.Start).Round(time.Millisecond),
							o, o.End.Sub(o.Start), v.where())})
					break
				}
			}
		}
	}
	return out
}
