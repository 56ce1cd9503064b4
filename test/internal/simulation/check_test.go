package simulation_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// content returns the order id with the given content variant.
func content(id, variant string) order.Order {
	return order.Order{OrderID: id, CustomerID: variant, Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 1, UnitPriceMinor: 500}}, TotalMinor: 500}
}

// hash returns the request hash of content(id, variant).
func hash(id, variant string) string {
	o := content(id, variant)
	return o.RequestHash()
}

// documents returns the order document and event that a correct consumer
// stores for content(id, variant).
func documents(t *testing.T, id, variant string) []memstore.Item {
	t.Helper()
	w := order.NewWrite(content(id, variant), id, hash(id, variant), time.Unix(0, 0))
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

// item returns v stored as document id of partition pk, written writes times.
func item(t *testing.T, pk, id string, v any, writes int) memstore.Item {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return memstore.Item{PartitionKey: pk, ID: id, Body: b, ETag: "1", Writes: writes}
}

// paymentRecord returns the completed payment record of order id.
func paymentRecord(t *testing.T, id, paymentID string) memstore.Item {
	rec := order.PaymentRecord{ID: order.PaymentRecordID(id), OrderID: id, Type: order.TypePayment, State: order.PaymentCompleted,
		IdempotencyKey: order.PaymentKey(id), AmountMinor: 500, Currency: "EUR", Owner: "w", Attempts: 1, PaymentID: paymentID}
	return item(t, id, rec.ID, rec, 2)
}

// inboxDocuments returns the marker and loyalty entry consumer writes for
// content(id, variant) at time at.
func inboxDocuments(t *testing.T, consumer, id, variant string, at time.Time) []memstore.Item {
	m := order.InboxMarker{ID: order.InboxMarkerID(consumer, id), OrderID: id, Type: order.TypeInboxMarker, Consumer: consumer,
		MessageID: id, RequestHash: hash(id, variant), ProcessedAt: at, TTL: 7200}
	e := order.LoyaltyEntry{ID: "loyalty-" + consumer + "-" + id, OrderID: id, Type: order.TypeLoyaltyEntry, Consumer: consumer,
		CustomerID: variant, Points: 5, AwardedAt: at}
	return []memstore.Item{item(t, id, m.ID, m, 1), item(t, id, e.ID, e, 1)}
}

// eventInboxDocuments returns the marker and loyalty entry consumer writes
// for the OrderAccepted event of content(id, variant), as the relay
// publishes it: the marker keyed by the event id, in the order's partition.
func eventInboxDocuments(t *testing.T, consumer, id, variant string) []memstore.Item {
	m := order.InboxMarker{ID: order.InboxMarkerID(consumer, order.EventID(id)), OrderID: id, Type: order.TypeInboxMarker, Consumer: consumer,
		MessageID: order.EventID(id), RequestHash: hash(id, variant), ProcessedAt: stateStart, TTL: 7200}
	e := order.LoyaltyEntry{ID: "loyalty-" + consumer + "-" + id, OrderID: id, Type: order.TypeLoyaltyEntry, Consumer: consumer,
		CustomerID: variant, Points: 5, AwardedAt: stateStart}
	return []memstore.Item{item(t, id, m.ID, m, 1), item(t, id, e.ID, e, 1)}
}

func deadLetter(seq int64, id, reason string) sbqueue.ReceivedMessage {
	return sbqueue.ReceivedMessage{
		Message:          sbqueue.Message{MessageID: id},
		SequenceNumber:   seq,
		DeadLetterReason: reason, DeadLetterErrorDescription: "because " + reason,
	}
}

var (
	stateStart = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	stateEnd   = stateStart.Add(time.Hour)
)

// goodState is a final state in which every invariant holds: A was
// created (and its immediate retry dropped by the broker), paid, and moved
// to version 3 by a status change that arrived before version 2, which was
// stale; B was created and paid, and its id reused, dead-lettered as a
// mismatch; C is malformed and D has an orderId other than its MessageId,
// both dead-lettered; E's store was down, so its message (and its status
// change) used up their deliveries. The inbox consumer "loyalty" got the
// same orders on its own queue and processed A, B and E once each.
func goodState(t *testing.T) *simulation.State {
	a, b, e := hash("A", "a"), hash("B", "b"), hash("E", "e")
	s := &simulation.State{
		Sent: []simulation.Sent{
			{MessageID: "A", OrderID: "A", Kind: simulation.Original, RequestHash: a, Enqueued: true, Seq: 1},
			{MessageID: "A", OrderID: "A", Kind: simulation.Retry, RequestHash: a},
			{MessageID: "B", OrderID: "B", Kind: simulation.Original, RequestHash: b, Enqueued: true, Seq: 2},
			{MessageID: "C", OrderID: "C", Kind: simulation.Malformed, Enqueued: true, Seq: 3},
			{MessageID: "D", OrderID: "D", Kind: simulation.IDMismatch, Enqueued: true, Seq: 4},
			{MessageID: "E", OrderID: "E", Kind: simulation.Original, RequestHash: e, Enqueued: true, Seq: 5},
			{MessageID: "B", OrderID: "B", Kind: simulation.Reuse, RequestHash: hash("B", "b2"), Enqueued: true, Seq: 6},
			{MessageID: "A:v3", OrderID: "A", Kind: simulation.Status, Version: 3, Status: "shipped", Enqueued: true, Seq: 7},
			{MessageID: "A:v2", OrderID: "A", Kind: simulation.Status, Version: 2, Status: "paid", Enqueued: true, Seq: 8},
			{MessageID: "E:v2", OrderID: "E", Kind: simulation.Status, Version: 2, Status: "paid", Enqueued: true, Seq: 9},
		},
		Queue: sbqueue.Snapshot{
			DeadLetters: []sbqueue.ReceivedMessage{
				deadLetter(3, "C", idempotent.ReasonInvalidMessage),
				deadLetter(4, "D", idempotent.ReasonMessageIDMismatch),
				deadLetter(5, "E", sbqueue.ReasonMaxDeliveryCountExceeded),
				deadLetter(6, "B", order.ReasonOrderIDReused),
				deadLetter(9, "E:v2", sbqueue.ReasonMaxDeliveryCountExceeded),
			},
			Counters: sbqueue.Counters{Sent: 9},
		},
		Now:       stateEnd,
		MarkerTTL: 2 * time.Hour,
		Payments: &simulation.Ledger{
			Charges: map[string]int{"A": 1, "B": 1},
			Payments: map[string]payments.Payment{
				"pay_1": {PaymentID: "pay_1", OrderID: "A", AmountMinor: 500, Currency: "EUR", Status: payments.StatusCaptured},
				"pay_2": {PaymentID: "pay_2", OrderID: "B", AmountMinor: 500, Currency: "EUR", Status: payments.StatusCaptured},
			},
		},
		Inbox: []simulation.Subscription{{
			Consumer: "loyalty",
			Sent: []simulation.Sent{
				{MessageID: "A", OrderID: "A", Kind: simulation.Original, RequestHash: a, Enqueued: true, Seq: 1},
				{MessageID: "B", OrderID: "B", Kind: simulation.Original, RequestHash: b, Enqueued: true, Seq: 2},
				{MessageID: "C", OrderID: "C", Kind: simulation.Malformed, Enqueued: true, Seq: 3},
				{MessageID: "E", OrderID: "E", Kind: simulation.Original, RequestHash: e, Enqueued: true, Seq: 4},
				{MessageID: "B", OrderID: "B", Kind: simulation.Reuse, RequestHash: hash("B", "b2"), Enqueued: true, Seq: 5},
			},
			Queue: sbqueue.Snapshot{
				DeadLetters: []sbqueue.ReceivedMessage{
					deadLetter(3, "C", idempotent.ReasonInvalidMessage),
					deadLetter(5, "B", order.ReasonOrderIDReused),
				},
				Counters: sbqueue.Counters{Sent: 5},
			},
		}},
	}
	docsA := documents(t, "A", "a")
	var doc order.OrderDocument
	if err := json.Unmarshal(docsA[0].Body, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Status, doc.Version = "shipped", 3
	docsA[0] = item(t, "A", "A", doc, 2)
	s.Documents = append(docsA, documents(t, "B", "b")...)
	s.Documents = append(s.Documents, paymentRecord(t, "A", "pay_1"), paymentRecord(t, "B", "pay_2"))
	for _, id := range []string{"A", "B", "E"} {
		s.Documents = append(s.Documents, inboxDocuments(t, "loyalty", id, strings.ToLower(id), stateStart)...)
	}
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
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != "B" && it.ID != order.EventID("B") })
			s.Documents = append(s.Documents, documents(t, "B", "b2")...)
			withoutDeadLetter(s, 6)
			withDeadLetter(s, deadLetter(2, "B", order.ReasonOrderIDReused))
		}, nil},

		{"two order documents for one order", func(t *testing.T, s *simulation.State) {
			extra := documents(t, "A", "a")[0]
			extra.ID = "A:2"
			s.Documents = append(s.Documents, extra)
		}, []string{simulation.OneOrderDocument}},
		{"order stored under another partition", func(t *testing.T, s *simulation.State) {
			s.Documents[0].PartitionKey = "elsewhere"
		}, []string{simulation.OneOrderDocument}},
		{"stored content never sent", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != "A" && it.ID != order.EventID("A") })
			s.Documents = append(s.Documents, documents(t, "A", "other")...)
		}, []string{simulation.OneOrderDocument, simulation.RejectsDeadLettered, simulation.StatusIsHighestVersion, simulation.EventReachesEverySubscription}},
		{"a document for an invalid message", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "C", "c")...)
		}, []string{simulation.OneOrderDocument, simulation.EventReachesEverySubscription}},
		{"a document the checker cannot read", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, memstore.Item{PartitionKey: "A", ID: "junk", Body: []byte("{"), Writes: 1})
		}, []string{simulation.OneOrderDocument}},

		{"order without its event", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.EventID("B") })
		}, []string{simulation.OneEvent}},
		{"event written twice", func(t *testing.T, s *simulation.State) {
			again := documents(t, "A", "a")[1]
			again.ID += ":2"
			s.Documents = append(s.Documents, again)
		}, []string{simulation.OneEvent}},
		{"event without its order", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != "A" })
		}, []string{simulation.OneEvent, simulation.NoMessageLost, simulation.OneChargePerOrder, simulation.StatusIsHighestVersion}},

		{"message left in the queue", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 5)
			s.Queue.Locked = []sbqueue.ReceivedMessage{{Message: sbqueue.Message{MessageID: "E"}, SequenceNumber: 5}}
		}, []string{simulation.NoMessageLost}},
		{"completed without its effect", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != "A" && it.ID != order.EventID("A") })
		}, []string{simulation.NoMessageLost, simulation.OneChargePerOrder, simulation.StatusIsHighestVersion}},
		{"duplicate dead-lettered after MaxDeliveryCount", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(1, "A", sbqueue.ReasonMaxDeliveryCountExceeded))
		}, []string{simulation.NoMessageLost}},
		{"dead-lettered after MaxDeliveryCount while the store was down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageStore, -1, 0)
		}, []string{simulation.NoDeadLetterDuringOutage}},
		{"dead-lettered after MaxDeliveryCount while the store's writes were down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageStoreWrites, -1, 0)
		}, []string{simulation.NoDeadLetterDuringOutage}},
		{"dead-lettered after MaxDeliveryCount while its key range was down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutagePartition, keyRange(t, "E", true), 0)
		}, []string{simulation.NoDeadLetterDuringOutage}},
		{"dead-lettered after MaxDeliveryCount while another key range was down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutagePartition, keyRange(t, "E", false), 0)
		}, nil},
		{"an order dead-lettered after MaxDeliveryCount while captures were down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageCaptures, -1, 0)
			delete(s.Deliveries[""], 9) // the status change needs no capture
		}, []string{simulation.NoDeadLetterDuringOutage}},
		{"a status change dead-lettered after MaxDeliveryCount while captures were down", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageCaptures, -1, 0)
			delete(s.Deliveries[""], 5)
		}, nil},
		{"dead-lettered after MaxDeliveryCount after the outage had ended", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageStore, -1, 10*time.Minute)
		}, nil},
		{"dead-lettered after MaxDeliveryCount while the store was down, its own storage down for good", func(t *testing.T, s *simulation.State) {
			withOutage(s, simulation.OutageStore, -1, 0)
			s.OrderOutages = map[string]bool{"E": true}
		}, nil},
		{"duplicate dead-lettered as a mismatch", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(1, "A", order.ReasonOrderIDReused))
		}, []string{simulation.NoMessageLost}},
		{"valid order dead-lettered as invalid", func(t *testing.T, s *simulation.State) {
			withoutDeadLetter(s, 5)
			withDeadLetter(s, deadLetter(5, "E", idempotent.ReasonInvalidMessage))
		}, []string{simulation.NoMessageLost}},
		{"dead-lettered without a description", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters[2].DeadLetterErrorDescription = ""
		}, []string{simulation.NoMessageLost}},
		{"dead-lettered message never queued", func(t *testing.T, s *simulation.State) {
			withDeadLetter(s, deadLetter(99, "Z", idempotent.ReasonInvalidMessage))
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
			s.Queue.DeadLetters[1].DeadLetterReason = idempotent.ReasonInvalidMessage
		}, []string{simulation.RejectsDeadLettered}},

		{"document overwritten by a duplicate", func(t *testing.T, s *simulation.State) {
			s.Documents[0].Writes = 4 // created, then versions 3 and 2 (only 3 applies): at most 3 writes
		}, []string{simulation.DuplicatesChangeNothing}},
		{"order's creation fields changed", func(t *testing.T, s *simulation.State) {
			change(t, &s.Documents[0], func(d *order.OrderDocument) { d.ProcessedAt = d.ProcessedAt.Add(time.Second) })
		}, []string{simulation.DuplicatesChangeNothing}},
		{"order's lines changed", func(t *testing.T, s *simulation.State) {
			change(t, &s.Documents[0], func(d *order.OrderDocument) { d.Lines[0].Quantity++ })
		}, []string{simulation.DuplicatesChangeNothing}},
		{"event written twice in place", func(t *testing.T, s *simulation.State) {
			s.Documents[1].Writes = 2
		}, []string{simulation.DuplicatesChangeNothing}},
		{"payment record rewritten beyond its claims", func(t *testing.T, s *simulation.State) {
			s.Documents[4].Writes = 4
		}, []string{simulation.DuplicatesChangeNothing}},

		{"an order charged twice", func(t *testing.T, s *simulation.State) {
			s.Payments.Charges["A"] = 2
		}, []string{simulation.OneChargePerOrder}},
		{"an order never charged", func(t *testing.T, s *simulation.State) {
			delete(s.Payments.Charges, "B")
		}, []string{simulation.OneChargePerOrder}},
		{"a charge for an order not stored", func(t *testing.T, s *simulation.State) {
			s.Payments.Charges["E"] = 1
		}, []string{simulation.OneChargePerOrder}},
		{"an order completed without a payment record", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.PaymentRecordID("B") })
		}, []string{simulation.OneChargePerOrder}},
		{"a payment record left in progress", func(t *testing.T, s *simulation.State) {
			s.Documents[4] = paymentRecord(t, "A", "")
			change(t, &s.Documents[4], func(r *order.PaymentRecord) { r.State = order.PaymentInProgress })
		}, []string{simulation.OneChargePerOrder}},
		{"a payment record naming a payment never issued", func(t *testing.T, s *simulation.State) {
			delete(s.Payments.Payments, "pay_1")
		}, []string{simulation.OneChargePerOrder}},
		{"a payment record naming another order's payment", func(t *testing.T, s *simulation.State) {
			s.Documents[4] = paymentRecord(t, "A", "pay_2")
		}, []string{simulation.OneChargePerOrder}},
		{"a payment of the wrong amount", func(t *testing.T, s *simulation.State) {
			p := s.Payments.Payments["pay_2"]
			p.AmountMinor++
			s.Payments.Payments["pay_2"] = p
		}, []string{simulation.OneChargePerOrder}},
		// Defect 2 of issue 9: the consumer waited out its own claim until
		// the broker gave up, although the charge had succeeded.
		{"an order charged once, its message dead-lettered after MaxDeliveryCount, its record in progress", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "E", "e")...)
			s.Documents = append(s.Documents, paymentRecord(t, "E", ""))
			change(t, &s.Documents[len(s.Documents)-1], func(r *order.PaymentRecord) { r.State = order.PaymentInProgress })
			s.Payments.Charges["E"] = 1
			// E's status change found E stored, so it was applied.
			change(t, &s.Documents[len(s.Documents)-3], func(d *order.OrderDocument) { d.Status, d.Version = "paid", 2 })
			withoutDeadLetter(s, 9)
		}, []string{simulation.NoMessageLost}},
		{"an order never charged (the payments service down), its message dead-lettered after MaxDeliveryCount", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "E", "e")...)
			s.Documents = append(s.Documents, paymentRecord(t, "E", ""))
			change(t, &s.Documents[len(s.Documents)-1], func(r *order.PaymentRecord) { r.State, r.PaymentID = order.PaymentInProgress, "" })
			change(t, &s.Documents[len(s.Documents)-3], func(d *order.OrderDocument) { d.Status, d.Version = "paid", 2 })
			withoutDeadLetter(s, 9)
		}, nil},
		{"an order charged once, handed to a person as PaymentNeedsReconciliation", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "E", "e")...)
			s.Documents = append(s.Documents, paymentRecord(t, "E", ""))
			change(t, &s.Documents[len(s.Documents)-1], func(r *order.PaymentRecord) { r.State = order.PaymentInProgress })
			s.Payments.Charges["E"] = 1
			change(t, &s.Documents[len(s.Documents)-3], func(d *order.OrderDocument) { d.Status, d.Version = "paid", 2 })
			withoutDeadLetter(s, 9)
			withoutDeadLetter(s, 5)
			withDeadLetter(s, deadLetter(5, "E", order.ReasonPaymentNeedsReconciliation))
		}, nil},
		{"a resubmitted message: its dead-letter recorded, its copy completed", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, documents(t, "E", "e")...)
			s.Documents = append(s.Documents, paymentRecord(t, "E", ""))
			s.Payments.Charges["E"] = 1
			s.Payments.Payments["pay_E"] = payments.Payment{PaymentID: "pay_E", OrderID: "E", AmountMinor: 500, Currency: "EUR"}
			change(t, &s.Documents[len(s.Documents)-1], func(r *order.PaymentRecord) { r.PaymentID = "pay_E" })
			change(t, &s.Documents[len(s.Documents)-3], func(d *order.OrderDocument) { d.Status, d.Version = "paid", 2 })
			withoutDeadLetter(s, 9)
			withoutDeadLetter(s, 5)
			i := slices.IndexFunc(s.Sent, func(m simulation.Sent) bool { return m.Seq == 5 })
			orig := &s.Sent[i]
			orig.Resubmitted, orig.ResubmittedAs, orig.DeadLetterReason, orig.DeadLetterDescription = true, 10, order.ReasonPaymentNeedsReconciliation, "reconcile"
			cp := *orig
			cp.Resubmitted, cp.ResubmittedAs, cp.Resubmission, cp.ResubmittedOf, cp.Seq = false, 0, true, 5, 10
			s.Sent = append(s.Sent, cp)
			s.Queue.Sent++
		}, nil},

		{"status left below the highest version", func(t *testing.T, s *simulation.State) {
			change(t, &s.Documents[0], func(d *order.OrderDocument) { d.Status, d.Version = "paid", 2 })
		}, []string{simulation.StatusIsHighestVersion}},
		{"status of the highest version, under a lower version number", func(t *testing.T, s *simulation.State) {
			change(t, &s.Documents[0], func(d *order.OrderDocument) { d.Version = 2 })
		}, []string{simulation.StatusIsHighestVersion}},
		{"status change dead-lettered although its order is stored", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters = append(s.Queue.DeadLetters, deadLetter(8, "A:v2", sbqueue.ReasonMaxDeliveryCountExceeded))
		}, []string{simulation.StatusIsHighestVersion}},
		{"status change dead-lettered as invalid", func(t *testing.T, s *simulation.State) {
			s.Queue.DeadLetters[4].DeadLetterReason = idempotent.ReasonInvalidMessage
		}, []string{simulation.StatusIsHighestVersion}},
		{"status change left in the queue", func(t *testing.T, s *simulation.State) {
			s.Queue.Active = []sbqueue.ReceivedMessage{{Message: sbqueue.Message{MessageID: "A:v2"}, SequenceNumber: 8}}
		}, []string{simulation.NoMessageLost}},

		{"an inbox consumer processed a message twice", func(t *testing.T, s *simulation.State) {
			again := inboxDocuments(t, "loyalty", "A", "a", stateStart.Add(time.Minute))[1]
			again.ID += "-again"
			s.Documents = append(s.Documents, again)
		}, []string{simulation.InboxOncePerConsumer}},
		{"an inbox consumer suppressed by another of the same name", func(t *testing.T, s *simulation.State) {
			audit := s.Inbox[0]
			audit.Consumer = "audit"
			s.Inbox = append(s.Inbox, audit)
		}, []string{simulation.NoMessageLost, simulation.InboxOncePerConsumer}},
		{"an inbox entry by a consumer that does not exist", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, inboxDocuments(t, "ghost", "A", "a", stateStart)...)
		}, []string{simulation.InboxOncePerConsumer}},
		{"an inbox entry for an invalid message", func(t *testing.T, s *simulation.State) {
			s.Documents = append(s.Documents, inboxDocuments(t, "loyalty", "C", "c", stateStart)...)
		}, []string{simulation.InboxOncePerConsumer}},
		{"an inbox marker gone before its TTL", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.InboxMarkerID("loyalty", "A") })
		}, []string{simulation.InboxOncePerConsumer}},
		{"an inbox marker gone after its TTL", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.InboxMarkerID("loyalty", "A") })
			s.Now = stateStart.Add(s.MarkerTTL)
		}, nil},
		{"an inbox marker with content never sent", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool { return it.ID != order.InboxMarkerID("loyalty", "A") })
			s.Documents = append(s.Documents, inboxDocuments(t, "loyalty", "A", "other", stateStart)[0])
		}, []string{simulation.RejectsDeadLettered, simulation.InboxOncePerConsumer}},
		{"OrderAccepted events through a topic to two subscriptions", func(t *testing.T, s *simulation.State) {
			// The relay's messages: MessageId the event id, one copy per
			// subscription, A's republished after the window.
			withoutDocuments(s, func(it memstore.Item) bool {
				return !strings.HasPrefix(it.ID, "inbox:") && !strings.HasPrefix(it.ID, "loyalty-")
			})
			sent := []simulation.Sent{
				{MessageID: order.EventID("A"), OrderID: "A", Kind: simulation.Original, RequestHash: hash("A", "a"), Enqueued: true, Seq: 1},
				{MessageID: order.EventID("B"), OrderID: "B", Kind: simulation.Original, RequestHash: hash("B", "b"), Enqueued: true, Seq: 2},
				{MessageID: order.EventID("A"), OrderID: "A", Kind: simulation.Retry, RequestHash: hash("A", "a")},
				{MessageID: order.EventID("A"), OrderID: "A", Kind: simulation.Retry, RequestHash: hash("A", "a"), Enqueued: true, Seq: 3},
			}
			s.Inbox = nil
			for _, c := range []string{"loyalty", "audit"} {
				s.Inbox = append(s.Inbox, simulation.Subscription{Consumer: c, Sent: sent, Queue: sbqueue.Snapshot{Counters: sbqueue.Counters{Sent: 3}}})
				for _, id := range []string{"A", "B"} {
					s.Documents = append(s.Documents, eventInboxDocuments(t, c, id, strings.ToLower(id))...)
				}
			}
		}, nil},
		{"an event the relay never published to a subscription", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool {
				return !strings.HasPrefix(it.ID, "inbox:") && !strings.HasPrefix(it.ID, "loyalty-")
			})
			sent := []simulation.Sent{
				{MessageID: order.EventID("A"), OrderID: "A", Kind: simulation.Original, RequestHash: hash("A", "a"), Enqueued: true, Seq: 1},
			}
			s.Inbox = []simulation.Subscription{{Consumer: "loyalty", Sent: sent, Queue: sbqueue.Snapshot{Counters: sbqueue.Counters{Sent: 1}}}}
			s.Documents = append(s.Documents, eventInboxDocuments(t, "loyalty", "A", "a")...)
		}, []string{simulation.EventReachesEverySubscription}},
		{"an event marker in another order's partition", func(t *testing.T, s *simulation.State) {
			withoutDocuments(s, func(it memstore.Item) bool {
				return !strings.HasPrefix(it.ID, "inbox:") && !strings.HasPrefix(it.ID, "loyalty-")
			})
			sent := []simulation.Sent{
				{MessageID: order.EventID("A"), OrderID: "A", Kind: simulation.Original, RequestHash: hash("A", "a"), Enqueued: true, Seq: 1},
				{MessageID: order.EventID("B"), OrderID: "B", Kind: simulation.Original, RequestHash: hash("B", "b"), Enqueued: true, Seq: 2},
			}
			s.Inbox = []simulation.Subscription{{Consumer: "loyalty", Sent: sent, Queue: sbqueue.Snapshot{Counters: sbqueue.Counters{Sent: 2}}}}
			s.Documents = append(s.Documents, eventInboxDocuments(t, "loyalty", "A", "a")...)
			docs := eventInboxDocuments(t, "loyalty", "B", "b")
			docs[0].PartitionKey = "A"
			s.Documents = append(s.Documents, docs...)
		}, []string{simulation.InboxOncePerConsumer}},
		{"an inbox mismatch completed", func(t *testing.T, s *simulation.State) {
			s.Inbox[0].Queue.DeadLetters = s.Inbox[0].Queue.DeadLetters[:1]
		}, []string{simulation.RejectsDeadLettered}},
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

// change decodes the document it into a T, applies f and stores it back.
func change[T any](t *testing.T, it *memstore.Item, f func(*T)) {
	t.Helper()
	var v T
	if err := json.Unmarshal(it.Body, &v); err != nil {
		t.Fatal(err)
	}
	f(&v)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	it.Body = b
}

func joinViolations(vs []simulation.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

// withOutage gives s an outage of kind (of key range r, for a partition)
// from stateStart for 5 minutes, and the dead-lettered messages of E (#5
// and its status change #9) deliveries from after to 3 minutes after that.
func withOutage(s *simulation.State, kind string, r int, after time.Duration) {
	s.Outages = []simulation.Outage{{Kind: kind, Range: r, Start: stateStart, End: stateStart.Add(5 * time.Minute)}}
	span := simulation.Span{First: stateStart.Add(after), Last: stateStart.Add(after + 3*time.Minute)}
	s.Deliveries = map[string]map[int64]simulation.Span{"": {5: span, 9: span}}
}

// keyRange returns a key range a partition outage of which covers pk, or,
// with covers false, does not.
func keyRange(t *testing.T, pk string, covers bool) int {
	for r := 0; r < 8; r++ {
		if (simulation.Outage{Kind: simulation.OutagePartition, Range: r}).Covers(pk) == covers {
			return r
		}
	}
	t.Fatalf("no key range covers(%q) = %v", pk, covers)
	return 0
}

func TestInvariantsAreNamedAndStated(t *testing.T) {
	seen := map[string]bool{}
	for _, inv := range simulation.Invariants() {
		if inv.Name == "" || inv.Statement == "" || seen[inv.Name] {
			t.Errorf("invariant %+v: want a unique name and a statement", inv)
		}
		seen[inv.Name] = true
	}
	if len(seen) != 11 {
		t.Errorf("%d invariants, want 11", len(seen))
	}
}
