package order

import (
	"encoding/json"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Document types, stored in the "type" field of every document so that change
// feed readers and queries can tell them apart.
const (
	TypeOrder = "order"
	TypeEvent = "event"
)

// EventOrderAccepted is the event type of the outbox event written with every
// accepted order.
const EventOrderAccepted = "OrderAccepted"

// OrderDocument is the stored form of an accepted order. It is also the
// idempotency marker: its id is the order id, so a second create of the same
// order conflicts, and it carries the request hash that tells a duplicate from
// an id reused for other content.
type OrderDocument struct {
	ID          string    `json:"id"`      // = OrderID
	OrderID     string    `json:"orderId"` // the partition key
	Type        string    `json:"type"`    // TypeOrder
	CustomerID  string    `json:"customerId"`
	Currency    string    `json:"currency"`
	Lines       []Line    `json:"lines"`
	TotalMinor  int64     `json:"totalMinor"`
	PlacedAt    time.Time `json:"placedAt"`
	Status      string    `json:"status"`      // "accepted" on creation, then as status changes say
	Version     int64     `json:"version"`     // 1 on creation; each applied status change sets its version
	RequestHash string    `json:"requestHash"` // Order.RequestHash of the creating message
	MessageID   string    `json:"messageId"`   // the Service Bus MessageId that created it
	ProcessedAt time.Time `json:"processedAt"` // when the worker created it

	StatusChangedAt *time.Time `json:"statusChangedAt,omitempty"` // when the applied status change happened

	// StatusHashes maps each applied status change's version to its
	// StatusChange.ContentHash, for the most recent MaxStatusHashes applied
	// versions: a change that reuses one of them with other content is told
	// from a redelivery. Versions skipped (a newer one was applied first)
	// are not recorded and cannot be compared. A new order has an empty
	// map (not null), so that a patch can add to it.
	StatusHashes map[int64]string `json:"statusHashes"`
	// StatusHashCount is len(StatusHashes), kept beside it so that a
	// conditional patch, which cannot count a map's keys, adds a hash only
	// while fewer than MaxStatusHashes are recorded. Absent (zero after
	// decoding, undefined to the store) in a document written before it
	// existed, which the patch's condition then refuses.
	StatusHashCount int `json:"statusHashCount"`
}

// AcceptedEvent is the OrderAccepted outbox event. Downstream services read it
// from the Cosmos DB change feed; it exists exactly when its order does.
type AcceptedEvent struct {
	ID          string    `json:"id"`      // EventID(OrderID)
	OrderID     string    `json:"orderId"` // the partition key
	Type        string    `json:"type"`    // TypeEvent
	EventType   string    `json:"eventType"`
	CustomerID  string    `json:"customerId"`
	Currency    string    `json:"currency"`
	TotalMinor  int64     `json:"totalMinor"`
	RequestHash string    `json:"requestHash"`
	OccurredAt  time.Time `json:"occurredAt"`
}

// EventID returns the id of the OrderAccepted event of an order.
func EventID(orderID string) string { return EventOrderAccepted + ":" + orderID }

// Write is everything one accepted order writes: all of it in one
// transactional batch under the partition key value OrderID, or none of it.
// The core's [idempotent.Consumer] writes the batch; this package only builds
// its documents.
type Write struct {
	Order OrderDocument
	Event AcceptedEvent
}

// NewWrite builds the documents for an accepted order.
func NewWrite(o Order, messageID, requestHash string, processedAt time.Time) Write {
	processedAt = processedAt.UTC()
	return Write{
		Order: OrderDocument{
			ID: o.OrderID, OrderID: o.OrderID, Type: TypeOrder,
			CustomerID: o.CustomerID, Currency: o.Currency, Lines: o.Lines,
			TotalMinor: o.TotalMinor, PlacedAt: o.PlacedAt.UTC(), Status: "accepted", Version: 1,
			RequestHash: requestHash, MessageID: messageID, ProcessedAt: processedAt,
			StatusHashes: map[int64]string{},
		},
		Event: AcceptedEvent{
			ID: EventID(o.OrderID), OrderID: o.OrderID, Type: TypeEvent,
			EventType: EventOrderAccepted, CustomerID: o.CustomerID, Currency: o.Currency,
			TotalMinor: o.TotalMinor, RequestHash: requestHash, OccurredAt: processedAt,
		},
	}
}

// PartitionKey returns the partition key value shared by every document of w.
func (w Write) PartitionKey() string { return w.Order.OrderID }

// Documents returns the documents of w in batch order: the order document
// first, so that a conflicting batch reports the conflict on operation 0,
// then the event (with a payment step, the core effect appends the
// payment's first claim to the batch).
func (w Write) Documents() ([]idempotent.Document, error) {
	// The order document and the event are encoded by hand into one
	// buffer (encode.go), or by json.Marshal where the hand encoding does
	// not cover them; the bytes are the same either way.
	b := make([]byte, 0, 768+96*len(w.Order.Lines))
	ob, ok := appendOrderDocument(b, &w.Order)
	if ok {
		ob, b = ob[:len(ob):len(ob)], ob[len(ob):] // no append to ob reaches the event
	} else {
		var err error
		if ob, err = json.Marshal(w.Order); err != nil {
			return nil, err
		}
	}
	eb, ok := appendAcceptedEvent(b, &w.Event)
	if !ok {
		var err error
		if eb, err = json.Marshal(w.Event); err != nil {
			return nil, err
		}
	}
	return []idempotent.Document{{ID: w.Order.ID, Body: ob}, {ID: w.Event.ID, Body: eb}}, nil
}
