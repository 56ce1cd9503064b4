package order

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order/internal/strictjson"
)

// DecodeAcceptedEvent decodes and validates the body of an OrderAccepted
// event as the outbox relay publishes it (package relay): the AcceptedEvent
// document without Cosmos DB's system properties. It applies the rules of
// order messages to the JSON itself: at most MaxBodySize bytes, one object
// and nothing after it, no key repeated in any object (encoding/json would
// take the last, another reader the first: "totalMinor":1,"totalMinor":9999
// must not be two events), and no key that spells a field of AcceptedEvent
// in another case ("OrderID"). Every field of AcceptedEvent must be present
// under its exact JSON name, type must be TypeEvent, eventType
// EventOrderAccepted, orderId a legal order id, id EventID(orderId),
// customerId a legal identifier, currency three capital letters, totalMinor
// from 0 to MaxSafeInteger, requestHash 64 lower-case hex digits and
// occurredAt a time. Other fields (a newer producer's, or "ttl") are
// ignored. A *FieldError names the first problem; the order id is returned
// whenever it could be read unambiguously, for the log.
func DecodeAcceptedEvent(body []byte) (AcceptedEvent, string, error) {
	if len(body) > MaxBodySize {
		return AcceptedEvent{}, "", &FieldError{Field: "body", Problem: fmt.Sprintf("%d bytes exceeds the limit of %d", len(body), MaxBodySize)}
	}
	var fields map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&fields); err != nil || fields == nil {
		return AcceptedEvent{}, "", &FieldError{Field: "body", Problem: "is not a JSON object"}
	}
	if d.More() {
		return AcceptedEvent{}, "", &FieldError{Field: "body", Problem: "has data after the JSON object"}
	}
	if err := checkEventKeys(body, fields); err != nil {
		var orderID string
		if err.Field != "orderId" {
			orderID = eventOrderID(fields)
		}
		return AcceptedEvent{}, orderID, err
	}
	var ev AcceptedEvent
	var orderID string
	str := func(k string, dst *string) error {
		raw, ok := fields[k]
		if !ok {
			return &FieldError{Field: k, Problem: "is required"}
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return &FieldError{Field: k, Problem: "is not a string"}
		}
		return nil
	}
	if err := str("orderId", &ev.OrderID); err != nil {
		return ev, "", err
	}
	if err := checkOrderID("orderId", ev.OrderID); err != nil {
		return ev, "", err
	}
	orderID = ev.OrderID
	for _, f := range []struct {
		k   string
		dst *string
	}{{"id", &ev.ID}, {"type", &ev.Type}, {"eventType", &ev.EventType}, {"customerId", &ev.CustomerID},
		{"currency", &ev.Currency}, {"requestHash", &ev.RequestHash}} {
		if err := str(f.k, f.dst); err != nil {
			return ev, orderID, err
		}
	}
	raw, ok := fields["totalMinor"]
	if !ok {
		return ev, orderID, &FieldError{Field: "totalMinor", Problem: "is required"}
	}
	if err := json.Unmarshal(raw, &ev.TotalMinor); err != nil {
		return ev, orderID, &FieldError{Field: "totalMinor", Problem: "is not an integer"}
	}
	var at string
	if err := str("occurredAt", &at); err != nil {
		return ev, orderID, err
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return ev, orderID, &FieldError{Field: "occurredAt", Problem: fmt.Sprintf("%q is not an RFC 3339 time", at)}
	}
	ev.OccurredAt = t
	switch {
	case ev.Type != TypeEvent:
		return ev, orderID, &FieldError{Field: "type", Problem: fmt.Sprintf("%q is not %q", ev.Type, TypeEvent)}
	case ev.EventType != EventOrderAccepted:
		return ev, orderID, &FieldError{Field: "eventType", Problem: fmt.Sprintf("%q is not %q", ev.EventType, EventOrderAccepted)}
	case ev.ID != EventID(ev.OrderID):
		return ev, orderID, &FieldError{Field: "id", Problem: fmt.Sprintf("%q is not the event id of order %q, %q", ev.ID, ev.OrderID, EventID(ev.OrderID))}
	case ev.TotalMinor < 0:
		return ev, orderID, &FieldError{Field: "totalMinor", Problem: fmt.Sprintf("%d is negative", ev.TotalMinor)}
	case ev.TotalMinor > MaxSafeInteger:
		return ev, orderID, outOfRange("totalMinor", ev.TotalMinor)
	case !isCurrency(ev.Currency):
		return ev, orderID, &FieldError{Field: "currency", Problem: fmt.Sprintf("%q is not three capital letters", ev.Currency)}
	case !isRequestHash(ev.RequestHash):
		return ev, orderID, &FieldError{Field: "requestHash", Problem: fmt.Sprintf("%q is not 64 lower-case hex digits", ev.RequestHash)}
	}
	if err := checkID("customerId", ev.CustomerID); err != nil {
		return ev, orderID, err
	}
	return ev, orderID, nil
}

// eventFields are the JSON names of AcceptedEvent's fields.
var eventFields = [...]string{"id", "orderId", "type", "eventType", "customerId", "currency", "totalMinor", "requestHash", "occurredAt"}

// checkEventKeys rejects a key that body repeats in any of its objects and
// a top-level key (in fields, body decoded) that spells a field of
// AcceptedEvent in another case: where encoding/json and another JSON
// reader could see different events in the same bytes. Other keys are
// allowed, as a newer producer's fields.
func checkEventKeys(body []byte, fields map[string]json.RawMessage) *FieldError {
	if err := strictjson.CheckKeys(body, &fields); err != nil {
		var ke *strictjson.KeyError
		if errors.As(err, &ke) {
			return &FieldError{Field: ke.Path, Problem: ke.Problem}
		}
		return &FieldError{Field: "body", Problem: err.Error()}
	}
	for _, f := range eventFields {
		var bad string // the first case variant of f, for a stable error
		for k := range fields {
			if k != f && strings.EqualFold(k, f) && (bad == "" || k < bad) {
				bad = k
			}
		}
		switch _, exact := fields[f]; {
		case bad != "" && exact:
			return &FieldError{Field: f, Problem: fmt.Sprintf("key %q beside %q: a key must be spelled as its field", bad, f)}
		case bad != "":
			return &FieldError{Field: f, Problem: fmt.Sprintf("key %q must be spelled %q", bad, f)}
		}
	}
	return nil
}

// eventOrderID returns the event's orderId if it is a legal order id, for
// naming the order in the result of an event that is invalid otherwise.
func eventOrderID(fields map[string]json.RawMessage) string {
	var id string
	if json.Unmarshal(fields["orderId"], &id) != nil || checkOrderID("orderId", id) != nil {
		return ""
	}
	return id
}

// isRequestHash reports whether s is a RequestHash: a SHA-256 in 64
// lower-case hex digits.
func isRequestHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// acceptedEvent is Process for an OrderAccepted event from the outbox
// relay. The event's MessageId is its id, so the marker is
// InboxMarkerID(c.Name, EventID(orderId)), in the order's partition, with
// the event's request hash: a redelivery or a republish is this consumer's
// Duplicate; an event id that arrives with another request hash is a
// Mismatch. A malformed event, or one whose id is not its MessageId, is
// Invalid at its first delivery: no redelivery can change its bytes.
func (c *InboxConsumer) acceptedEvent(ctx context.Context, inbox *idempotent.Inbox, m idempotent.Message) idempotent.Result {
	ev, orderID, err := DecodeAcceptedEvent(m.Body)
	if err != nil {
		return idempotent.Result{Outcome: idempotent.Invalid, Key: orderID, Reason: idempotent.ReasonInvalidMessage, Description: "OrderAccepted event: " + err.Error(), Err: err}
	}
	if m.ID != ev.ID {
		err := &FieldError{Field: "id", Problem: fmt.Sprintf("%q does not equal the MessageId %q", ev.ID, m.ID)}
		return idempotent.Result{Outcome: idempotent.Invalid, Key: ev.OrderID, Reason: idempotent.ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	return c.award(ctx, inbox, m, ev.OrderID, ev.CustomerID, ev.TotalMinor, ev.RequestHash)
}

// award records c's processing of message m with the loyalty entry of the
// order, through the core's inbox: the marker and the entry in one
// transactional batch in the order's partition; a conflict on the marker is
// Duplicate for the same request hash, Mismatch (ReasonOrderIDReused) for
// another. A redelivery reads the marker first (idempotent.RedeliveriesFirst)
// and decides from it without the batch when it is there.
func (c *InboxConsumer) award(ctx context.Context, inbox *idempotent.Inbox, m idempotent.Message, orderID, customerID string, totalMinor int64, hash string) idempotent.Result {
	entry := LoyaltyEntry{ID: randomID(), OrderID: orderID, Type: TypeLoyaltyEntry, Consumer: c.Name,
		CustomerID: customerID, Points: totalMinor / 100}
	r := inbox.Process(ctx, m, orderID, hash, func(at time.Time) ([]idempotent.Document, error) {
		entry.AwardedAt = at
		b, err := json.Marshal(entry)
		if err != nil {
			return nil, err
		}
		return []idempotent.Document{{ID: entry.ID, Body: b}}, nil
	})
	if r.Outcome == idempotent.Created {
		r.Description = fmt.Sprintf("%d points awarded by %s", entry.Points, c.Name)
	}
	return r
}
