package simulation_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// documents returns the order document and event that a correct consumer
// stores for order id with request hash hash.
func documents(t *testing.T, id, hash string) []memstore.Item {
	t.Helper()
	w := order.NewWrite(order.Order{OrderID: id, CustomerID: "c", Currency: "EUR"}, id, hash, time.Unix(0, 0))
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	var items []memstore.Item
	for _, d := range docs {
		items = append(items, memstore.Item{PartitionKey: id, ID: d.ID, Body: d.Body, ETag: "1", Writes: 1})
	}
	return items
}

func deadLetter(seq int64, id, reason string) sbqueue.ReceivedMessage {
	return sbqueue.ReceivedMessage{
		Message:          sbqueue.Message{MessageID: id},
		SequenceNumber:   seq,
		DeadLetterReason: reason, DeadLetterErrorDescription: "because " + reason,
	}
}

// goodState is a final state in which every invariant holds: A was
// created (and its immediate retry dropped by the broker); B was created
// and its id reused, dead-lettered as a mismatch; C is malformed and D has
// an orderId other than its MessageId, both dead-lettered; E's store was
// down, so its message used up its deliveries.
func goodState(t *testing.T) *simulation.State {
	s := &simulation.State{
		Sent: []simulation.Sent{
			{MessageID: "A", Kind: simulation.Original, RequestHash: "hA", Enqueued: true, Seq: 1},
			{MessageID: "A", Kind: simulation.Retry, RequestHash: "hA"},
			{MessageID: "B", Kind: simulation.Original, RequestHash: "hB", Enqueued: true, Seq: 2},
			{MessageID: "C", Kind: simulation.Malformed, Enqueued: true, Seq: 3},
			{MessageID: "D", Kind: simulation.IDMismatch, Enqueued: true, Seq: 4},
			{MessageID: "E", Kind: simulation.Original, RequestHash: "hE", Enqueued: true, Seq: 5},
			{MessageID: "B", Kind: simulation.Reuse, RequestHash: "hB2", Enqueued: true, Seq: 6},
		},
		Queue: sbqueue.Snapshot{
			DeadLetters: []sbqueue.ReceivedMessage{
				deadLetter(3, "C", order.ReasonInvalidMessage),
				deadLetter(4, "D", order.ReasonMessageIDMismatch),
				deadLetter(5, "E", sbqueue.ReasonMaxDeliveryCountExceeded),
				deadLetter(6, "B", order.ReasonOrderIDReused),
			},
			Counters: sbqueue.Counters{Sent: 6},
		},
	}
	s.Documents = append(documents(t, "A", "hA"), documents(t, "B", "hB")...)
	return s
}

func TestCheck(t *testing.T) {
	withDeadLetter := func(s *simulation.State, m sbqueue.ReceivedMessage) {
		s.Queue.DeadLetters = append(s.Queue.DeadLetters, m)
	}
	withoutDeadLetter := func(s *simulation.State, seq int64) {
		s.Queue.DeadLetters = slices.DeleteFunc(s.Queue.DeadLetters, func(m sbqueue.ReceivedMessage) bool { return m.SequenceNumber == seq })
	}
	withoutDocuments := func(s *simulation.State, keep func(memstore.Item) bool) {
		s.Documents = slices.DeleteFunc(s.Documents, func(it memstore.Item) bool { return !keep(it) })
	}
	tests := []struct {
		name   string
		change func(t *testing.T, s *simulation.State)
		want   []string // the invariants violated
	}{
		{"a correct run", func(*testing.T, *simulation.State) {}, nil},
		{"the reused content arrived first and won", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.PartitionKey != "B" })
			s.Documents = append(s.Documents, documents(t, "B", "hB2")...)
			withoutDeadLetter(s, 6)
			withDeadLetter(s, deadLetter(2, "B", order.ReasonOrderIDReused))
		}, nil},

		{"two order documents for one order", func(t *testing.T, s *simulation.State) {
			extra := documents(t, "A", "hA")[0]
			extra.ID = "A:2"
			s.Documents = append(s.Documents, extra)
		}, []string{simulation.OneOrderDocument}},
		{"order stored under another partition", func(t *testing.T, s *simulation.State) {
			s.Documents[0].PartitionKey = "elsewhere"
		}, []string{simulation.OneOrderDocument}},
		{"stored content never sent", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.PartitionKey != "A" })
			s.Documents = append(s.Documents, documents(t, "A", "h-other")...)
		}, []string{simulation.OneOrderDocument, simulation.RejectsDeadLettered}},
		{"a document for an invalid message", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "C", "hC")...)
		}, []string{simulation.OneOrderDocument}},
		{"a document the checker cannot read", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, memstore.Item{PartitionKey: "A", ID: "junk", Body: []byte("{"), Writes: 1})
		}, []string{simulation.OneOrderDocument}},

		{"order without its event", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.EventID("B") })
		}, []string{simulation.OneEvent}},
		{"event written twice", func(t *testing.T, s *simulation.State) {
			again := documents(t, "A", "hA")[1]
			again.ID += ":2"
			s.Documents = append(s.Documents, again)
		}, []string{simulation.OneEvent}},
		{"event without its order", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != "A" })
		}, []string{simulation.OneEvent, simulation.NoMessageLost}},

		{"message left in the queue", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 5)
			s.Queue.Locked = []sbqueue.ReceivedMessage{{Message: sbqueue.Message{MessageID: "E"}, SequenceNumber: 5}}
		}, []string{simulation.NoMessageLost}},
		{"completed without its effect", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.PartitionKey != "A" })
		}, []string{simulation.NoMessageLost}},
		{"duplicate dead-lettered after MaxDeliveryCount", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(1, "A", sbqueue.ReasonMaxDeliveryCountExceeded))
		}, []string{simulation.NoMessageLost}},
		{"duplicate dead-lettered as a mismatch", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(1, "A", order.ReasonOrderIDReused))
		}, []string{simulation.NoMessageLost}},
		{"valid order dead-lettered as invalid", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 5)
			withDeadLetter(s, deadLetter(5, "E", order.ReasonInvalidMessage))
		}, []string{simulation.NoMessageLost}},
		{"dead-lettered without a description", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters[2].DeadLetterErrorDescription = ""
		}, []string{simulation.NoMessageLost}},
		{"dead-lettered message never queued", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(99, "Z", order.ReasonInvalidMessage))
		}, []string{simulation.NoMessageLost}},
		{"queue and producer disagree", func(t *testing.T, s *simulation.State) {
			s.Queue.Sent = 7
		}, []string{simulation.NoMessageLost}},

		{"mismatch completed", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 6)
		}, []string{simulation.RejectsDeadLettered}},
		{"mismatch dead-lettered after MaxDeliveryCount", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters[3].DeadLetterReason = sbqueue.ReasonMaxDeliveryCountExceeded
		}, []string{simulation.RejectsDeadLettered}},
		{"invalid message completed", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 3)
		}, []string{simulation.RejectsDeadLettered}},
		{"invalid message with the wrong reason", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters[1].DeadLetterReason = order.ReasonInvalidMessage
		}, []string{simulation.RejectsDeadLettered}},

		{"document overwritten by a duplicate", func(t *testing.T, s *simulation.State) {
			s.Documents[0].Writes = 2
		}, []string{simulation.DuplicatesChangeNothing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := goodState(t)
			tt.change(t, s)
			vs := simulation.Check(s)
			var got []string
			for _, v := range vs {
				if !slices.Contains(got, v.Invariant) {
					got = append(got, v.Invariant)
				}
				if v.Detail == "" || !strings.Contains(v.String(), v.Invariant) {
					t.Errorf("violation %+v does not explain itself: %s", v, v)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("invariants violated = %q, want %q; violations:\n%s", got, tt.want, joinViolations(vs))
			}
		})
	}
}

func joinViolations(vs []simulation.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func TestInvariantsAreNamedAndStated(t *testing.T) {
	seen := map[string]bool{}
	for _, inv := range simulation.Invariants() {
		if inv.Name == "" || inv.Statement == "" || seen[inv.Name] {
			t.Errorf("invariant %+v: want a unique name and a statement", inv)
		}
		seen[inv.Name] = true
	}
	if len(seen) != 5 {
		t.Errorf("%d invariants, want 5", len(seen))
	}
}
