package simulation

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// State is what the checker holds against the invariants: the producer's
// ground truth and the final state of the queue, its dead-letter queue and
// the store. It deliberately contains nothing the consumer reported about
// itself.
type State struct {
	Sent      []Sent           // every message the producer sent, in order
	Queue     sbqueue.Snapshot // the queue after the run
	Documents []memstore.Item  // every stored document after the run
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
)

// Invariants returns the invariants Check verifies, in the order it checks
// them. Together they state DESIGN.md §4: one-order-document and
// no-message-lost make "every valid order ends with exactly one order
// document" (at most one, and present for every completed message);
// one-event makes "each side effect ran exactly once"; rejects-dead-lettered
// and duplicates-change-nothing are the last two points as written.
//
// A later side effect (a payment call, say) adds its own Invariant here and
// what it needs (the downstream system's log) to State.
func Invariants() []Invariant {
	return []Invariant{
		{OneOrderDocument, "every order has at most one order document, stored under its own id and partition and holding content the producer sent for it", checkOneOrderDocument},
		{OneEvent, "every stored order has exactly one OrderAccepted event, with the order's request hash, and no event exists without its order", checkOneEvent},
		{NoMessageLost, "every queued message was completed with its effect present, or dead-lettered with a reason that explains it; none is left in the queue", checkNoMessageLost},
		{RejectsDeadLettered, "every message whose id was reused for other content, and every invalid message, is in the dead-letter queue with its reason", checkRejectsDeadLettered},
		{DuplicatesChangeNothing, "no stored document was written more than once", checkDuplicatesChangeNothing},
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
}

// index is State rearranged for the checks.
type index struct {
	s         *State
	enqueued  []Sent                            // in sequence order
	copies    map[string][]Sent                 // enqueued processable copies, by MessageID
	dead      map[int64]sbqueue.ReceivedMessage // the dead-letter queue, by sequence number
	pending   map[int64]bool                    // still in the queue, available or locked
	orders    map[string][]doc                  // order documents, by orderId
	events    map[string][]doc                  // event documents, by orderId
	malformed []doc                             // documents the checker cannot read
}

func newIndex(s *State) *index {
	idx := &index{
		s:       s,
		copies:  make(map[string][]Sent),
		dead:    make(map[int64]sbqueue.ReceivedMessage),
		pending: make(map[int64]bool),
		orders:  make(map[string][]doc),
		events:  make(map[string][]doc),
	}
	for _, m := range s.Sent {
		if !m.Enqueued {
			continue
		}
		idx.enqueued = append(idx.enqueued, m)
		if m.Kind.Processable() {
			idx.copies[m.MessageID] = append(idx.copies[m.MessageID], m)
		}
	}
	slices.SortFunc(idx.enqueued, func(a, b Sent) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, m := range s.Queue.DeadLetters {
		idx.dead[m.SequenceNumber] = m
	}
	for _, m := range s.Queue.Active {
		idx.pending[m.SequenceNumber] = true
	}
	for _, m := range s.Queue.Locked {
		idx.pending[m.SequenceNumber] = true
	}
	for _, it := range s.Documents {
		var f struct {
			Type        string `json:"type"`
			OrderID     string `json:"orderId"`
			RequestHash string `json:"requestHash"`
		}
		d := doc{item: it}
		if err := json.Unmarshal(it.Body, &f); err != nil {
			idx.malformed = append(idx.malformed, d)
			continue
		}
		d.typ, d.orderID, d.requestHash = f.Type, f.OrderID, f.RequestHash
		switch d.typ {
		case order.TypeOrder:
			idx.orders[d.orderID] = append(idx.orders[d.orderID], d)
		case order.TypeEvent:
			idx.events[d.orderID] = append(idx.events[d.orderID], d)
		default:
			idx.malformed = append(idx.malformed, d)
		}
	}
	return idx
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
		add(d.item.PartitionKey, "document %q is not an order or event document", d.item.ID)
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
	add := func(m Sent, format string, args ...any) {
		out = append(out, Violation{Invariant: NoMessageLost, OrderID: m.MessageID, Seq: m.Seq, Detail: fmt.Sprintf(format, args...)})
	}
	if n := int64(len(idx.enqueued)); idx.s.Queue.Sent != n {
		out = append(out, Violation{Invariant: NoMessageLost, Detail: fmt.Sprintf("the queue enqueued %d messages, the producer %d", idx.s.Queue.Sent, n)})
	}
	known := make(map[int64]bool, len(idx.enqueued))
	for _, m := range idx.enqueued {
		known[m.Seq] = true
		hash, stored := idx.stored(m.MessageID)
		dl, dead := idx.dead[m.Seq]
		switch {
		case idx.pending[m.Seq]:
			add(m, "%s message still in the queue at the end of the run", m.Kind)
		case dead && (dl.DeadLetterReason == "" || dl.DeadLetterErrorDescription == ""):
			add(m, "dead-lettered with reason %q and description %q: both must explain it", dl.DeadLetterReason, dl.DeadLetterErrorDescription)
		case dead && m.Kind.Processable():
			switch dl.DeadLetterReason {
			case order.ReasonOrderIDReused:
				if !stored || hash == m.RequestHash {
					add(m, "dead-lettered as %s, but the stored order has the message's own content: a duplicate surfaced as an error", dl.DeadLetterReason)
				}
			case sbqueue.ReasonMaxDeliveryCountExceeded:
				if stored && hash == m.RequestHash {
					add(m, "dead-lettered as %s although its order is stored: a duplicate surfaced as an error", dl.DeadLetterReason)
				}
			default:
				add(m, "valid order dead-lettered with reason %q (%s)", dl.DeadLetterReason, dl.DeadLetterErrorDescription)
			}
		case dead: // invalid: checkRejectsDeadLettered checks the reason
		case !m.Kind.Processable(): // completed: checkRejectsDeadLettered
		case !stored:
			add(m, "completed, but the order has no document: the order is lost")
		case hash != m.RequestHash: // a mismatch completed: checkRejectsDeadLettered
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(idx.dead)) {
		if !known[seq] {
			m := idx.dead[seq]
			out = append(out, Violation{Invariant: NoMessageLost, OrderID: m.MessageID, Seq: seq, Detail: "a dead-lettered message the producer never queued"})
		}
	}
	return out
}

func checkRejectsDeadLettered(idx *index) []Violation {
	var out []Violation
	for _, m := range idx.enqueued {
		var want string
		switch {
		case m.Kind == Malformed:
			want = order.ReasonInvalidMessage
		case m.Kind == IDMismatch:
			want = order.ReasonMessageIDMismatch
		default:
			if hash, ok := idx.stored(m.MessageID); ok && hash != m.RequestHash {
				want = order.ReasonOrderIDReused
			}
		}
		if want == "" || idx.pending[m.Seq] { // pending: reported by checkNoMessageLost
			continue
		}
		dl, dead := idx.dead[m.Seq]
		detail := ""
		switch {
		case !dead:
			detail = fmt.Sprintf("%s message completed: silently dropped, want it dead-lettered as %s", m.Kind, want)
		case dl.DeadLetterReason != want:
			detail = fmt.Sprintf("%s message dead-lettered as %q, want %s", m.Kind, dl.DeadLetterReason, want)
		default:
			continue
		}
		out = append(out, Violation{Invariant: RejectsDeadLettered, OrderID: m.MessageID, Seq: m.Seq, Detail: detail})
	}
	return out
}

func checkDuplicatesChangeNothing(idx *index) []Violation {
	var out []Violation
	for _, it := range idx.s.Documents {
		if it.Writes != 1 {
			out = append(out, Violation{Invariant: DuplicatesChangeNothing, OrderID: it.PartitionKey,
				Detail: fmt.Sprintf("document %q written %d times", it.ID, it.Writes)})
		}
	}
	return out
}
