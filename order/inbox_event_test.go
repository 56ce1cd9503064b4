package order_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// eventBody returns the body the outbox relay publishes for the
// OrderAccepted event of o: the event document as the worker writes it,
// with Cosmos DB's system properties removed (the relay removes them).
func eventBody(t testing.TB, o order.Order) []byte {
	t.Helper()
	docs, err := order.NewWrite(o, o.OrderID, o.RequestHash(), fixedNow()).Documents()
	if err != nil {
		t.Fatal(err)
	}
	return docs[1].Body
}

func hashOf(o order.Order) string { return o.RequestHash() }

func testOrder(id string) order.Order {
	return order.Order{OrderID: id, CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 2, UnitPriceMinor: 1250}}, TotalMinor: 2500,
		PlacedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

// eventMsg is the message the relay sends for body: MessageId the event
// id, Subject the event type.
func eventMsg(orderID string, body []byte) idempotent.Message {
	return idempotent.Message{ID: order.EventID(orderID), Subject: order.EventOrderAccepted, Body: body, DeliveryCount: 1}
}

// edit returns body with field k set to v (deleted if v is nil).
func edit(t testing.TB, body []byte, k string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		delete(m, k)
	} else {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInboxConsumerProcessesOrderAcceptedEvents: each consumer processes an
// OrderAccepted event from the relay exactly once, with a marker keyed by
// its own name and the event id in the order's partition: a redelivery or
// a republish is its Duplicate, another consumer's processing never
// suppresses it, and an event id republished with other content is a
// Mismatch.
func TestInboxConsumerProcessesOrderAcceptedEvents(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	loyalty := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
	audit := &order.InboxConsumer{Name: "audit", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
	o := testOrder("ord-7")
	body := eventBody(t, o)
	other := o
	other.CustomerID = "cust-2"
	for _, tt := range []struct {
		name      string
		c         *order.InboxConsumer
		m         idempotent.Message
		want      idempotent.Outcome
		reason    string
		wantItems int
	}{
		{"first delivery", loyalty, eventMsg("ord-7", body), idempotent.Created, "", 2},
		{"redelivery", loyalty, eventMsg("ord-7", body), idempotent.Duplicate, "", 2},
		{"another consumer", audit, eventMsg("ord-7", body), idempotent.Created, "", 4},
		{"republish to the other consumer", audit, eventMsg("ord-7", body), idempotent.Duplicate, "", 4},
		{"event id with other content", loyalty, eventMsg("ord-7", eventBody(t, other)), idempotent.Mismatch, order.ReasonOrderIDReused, 4},
		{"another order", loyalty, eventMsg("ord-8", eventBody(t, testOrder("ord-8"))), idempotent.Created, "", 6},
	} {
		r := tt.c.Process(ctx, tt.m)
		if r.Outcome != tt.want || r.Reason != tt.reason || r.Key != tt.m.ID[len("OrderAccepted:"):] {
			t.Errorf("%s: %v %q for order %q (%s), want %v %q", tt.name, r.Outcome, r.Reason, r.Key, r.Description, tt.want, tt.reason)
		}
		if n := len(s.Items()); n != tt.wantItems {
			t.Errorf("%s: %d documents stored, want %d", tt.name, n, tt.wantItems)
		}
	}
	for _, name := range []string{"loyalty", "audit"} {
		it, ok := s.Get("ord-7", order.InboxMarkerID(name, order.EventID("ord-7")))
		var m order.InboxMarker
		if !ok || json.Unmarshal(it.Body, &m) != nil || m.RequestHash != o.RequestHash() || m.MessageID != order.EventID("ord-7") || m.OrderID != "ord-7" {
			t.Errorf("%s's marker for the event: found %v, %+v; want it in partition ord-7 with the order's request hash", name, ok, m)
		}
	}
	var points []int64
	for _, it := range s.Items() {
		var e order.LoyaltyEntry
		if json.Unmarshal(it.Body, &e) == nil && e.Type == order.TypeLoyaltyEntry && e.OrderID == "ord-7" {
			points = append(points, e.Points)
		}
	}
	if len(points) != 2 || points[0] != 25 || points[1] != 25 {
		t.Errorf("loyalty entries of ord-7 award %v points, want 25 by each consumer", points)
	}
}

// TestInboxConsumerRejectsMalformedEvents: an event that is not a valid
// OrderAccepted event, or whose id is not its MessageId, is Invalid at its
// first delivery, with nothing written.
func TestInboxConsumerRejectsMalformedEvents(t *testing.T) {
	good := eventBody(t, testOrder("ord-7"))
	for _, tt := range []struct {
		name   string
		m      idempotent.Message
		reason string
		field  string
	}{
		{"not JSON", eventMsg("ord-7", []byte("{")), idempotent.ReasonInvalidMessage, "body"},
		{"a JSON array", eventMsg("ord-7", []byte("[]")), idempotent.ReasonInvalidMessage, "body"},
		{"data after the object", eventMsg("ord-7", append(append([]byte{}, good...), "{}"...)), idempotent.ReasonInvalidMessage, "body"},
		{"no orderId", eventMsg("ord-7", edit(t, good, "orderId", nil)), idempotent.ReasonInvalidMessage, "orderId"},
		{"orderId in other case only", eventMsg("ord-7", edit(t, edit(t, good, "orderId", nil), "OrderID", "ord-7")), idempotent.ReasonInvalidMessage, "orderId"},
		{"orderId with a colon", eventMsg("ord:7", edit(t, edit(t, good, "orderId", "ord:7"), "id", "OrderAccepted:ord:7")), idempotent.ReasonInvalidMessage, "orderId"},
		{"orderId a number", eventMsg("ord-7", edit(t, good, "orderId", 7)), idempotent.ReasonInvalidMessage, "orderId"},
		{"no id", eventMsg("ord-7", edit(t, good, "id", nil)), idempotent.ReasonInvalidMessage, "id"},
		{"id of another order", eventMsg("ord-7", edit(t, good, "id", "OrderAccepted:ord-8")), idempotent.ReasonInvalidMessage, "id"},
		{"type order", eventMsg("ord-7", edit(t, good, "type", order.TypeOrder)), idempotent.ReasonInvalidMessage, "type"},
		{"other event type", eventMsg("ord-7", edit(t, good, "eventType", "OrderRefunded")), idempotent.ReasonInvalidMessage, "eventType"},
		{"no customer", eventMsg("ord-7", edit(t, good, "customerId", "")), idempotent.ReasonInvalidMessage, "customerId"},
		{"currency in lower case", eventMsg("ord-7", edit(t, good, "currency", "eur")), idempotent.ReasonInvalidMessage, "currency"},
		{"negative total", eventMsg("ord-7", edit(t, good, "totalMinor", -1)), idempotent.ReasonInvalidMessage, "totalMinor"},
		{"fractional total", eventMsg("ord-7", edit(t, good, "totalMinor", 2.5)), idempotent.ReasonInvalidMessage, "totalMinor"},
		{"no total", eventMsg("ord-7", edit(t, good, "totalMinor", nil)), idempotent.ReasonInvalidMessage, "totalMinor"},
		{"short request hash", eventMsg("ord-7", edit(t, good, "requestHash", "abc")), idempotent.ReasonInvalidMessage, "requestHash"},
		{"upper-case request hash", eventMsg("ord-7", edit(t, good, "requestHash", strings.ToUpper(hashOf(testOrder("ord-7"))))), idempotent.ReasonInvalidMessage, "requestHash"},
		{"occurredAt not a time", eventMsg("ord-7", edit(t, good, "occurredAt", "yesterday")), idempotent.ReasonInvalidMessage, "occurredAt"},
		{"MessageId of another event", idempotent.Message{ID: order.EventID("ord-8"), Subject: order.EventOrderAccepted, Body: good, DeliveryCount: 1}, idempotent.ReasonMessageIDMismatch, "id"},
		// The rules of order messages: no repeated key (encoding/json takes
		// the last, another reader the first), no case variant of a field,
		// at most order.MaxBodySize bytes.
		{"repeated totalMinor", eventMsg("ord-7", withKey(t, edit(t, good, "totalMinor", 99999900), "totalMinor", 1)), idempotent.ReasonInvalidMessage, "totalMinor"},
		{"repeated customerId", eventMsg("ord-7", withKey(t, edit(t, good, "customerId", "attacker"), "customerId", "cust-1")), idempotent.ReasonInvalidMessage, "customerId"},
		{"repeated through an escape", eventMsg("ord-7", []byte(strings.Replace(string(good), `{`, `{"\u0063ustomerId":"attacker",`, 1))), idempotent.ReasonInvalidMessage, "customerId"},
		{"repeated orderId", eventMsg("ord-7", withKey(t, good, "orderId", "ord-8")), idempotent.ReasonInvalidMessage, "orderId"},
		{"repeated unknown field", eventMsg("ord-7", withKey(t, edit(t, good, "ttl", -1), "ttl", 60)), idempotent.ReasonInvalidMessage, "ttl"},
		{"customerId beside a case variant", eventMsg("ord-7", withKey(t, good, "CustomerID", "attacker")), idempotent.ReasonInvalidMessage, "customerId"},
		{"200 KB", eventMsg("ord-7", edit(t, good, "padding", strings.Repeat("x", 200_000))), idempotent.ReasonInvalidMessage, "body"},
	} {
		s := memstore.New("/orderId")
		c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
		r := c.Process(context.Background(), tt.m)
		var fe *order.FieldError
		if r.Outcome != idempotent.Invalid || r.Reason != tt.reason || !errors.As(r.Err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: %v %q (%v), want Invalid %q on field %s", tt.name, r.Outcome, r.Reason, r.Err, tt.reason, tt.field)
		}
		if n := len(s.Items()); n != 0 {
			t.Errorf("%s: %d documents written", tt.name, n)
		}
	}
}

// withKey returns body, a JSON object, with the key k set to v once more
// in front of its other keys: a repeated key if body has k.
func withKey(t testing.TB, body []byte, k string, v any) []byte {
	t.Helper()
	kb, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return []byte("{" + string(kb) + ":" + string(vb) + "," + strings.TrimPrefix(string(body), "{"))
}

// TestDecodeAcceptedEventSizeLimit: an event has the size limit of an
// order message, order.MaxBodySize: at the limit it is decoded, one byte
// over it is invalid, whatever the extra bytes hold.
func TestDecodeAcceptedEventSizeLimit(t *testing.T) {
	good := eventBody(t, testOrder("ord-7"))
	padded := func(n int) []byte {
		b := edit(t, good, "padding", "")
		return edit(t, good, "padding", strings.Repeat("x", n-len(b)))
	}
	if b := padded(order.MaxBodySize); len(b) != order.MaxBodySize {
		t.Fatalf("padded to %d bytes", len(b))
	} else if _, _, err := order.DecodeAcceptedEvent(b); err != nil {
		t.Errorf("an event of %d bytes: %v", len(b), err)
	}
	var fe *order.FieldError
	if _, _, err := order.DecodeAcceptedEvent(padded(order.MaxBodySize + 1)); !errors.As(err, &fe) || fe.Field != "body" || !strings.Contains(fe.Problem, "65536") {
		t.Errorf("an event of %d bytes: %v, want a *FieldError on body naming the limit", order.MaxBodySize+1, err)
	}
}

// TestDecodeAcceptedEventIgnoresUnknownFields: a field the decoder does not
// know (a newer producer's, Cosmos DB's ttl) does not make the event
// invalid, and the decoded event is the one the worker wrote.
func TestDecodeAcceptedEventIgnoresUnknownFields(t *testing.T) {
	o := testOrder("ord-7")
	w := order.NewWrite(o, o.OrderID, o.RequestHash(), fixedNow())
	ev, id, err := order.DecodeAcceptedEvent(edit(t, eventBody(t, o), "ttl", -1))
	if err != nil || id != "ord-7" || ev != w.Event {
		t.Fatalf("DecodeAcceptedEvent = %+v, %q, %v; want %+v", ev, id, err, w.Event)
	}
}

// FuzzDecodeAcceptedEvent: DecodeAcceptedEvent never panics, and every
// event it accepts is one the inbox consumer can key: a legal order id, the
// event id of that order, and an encoding that decodes to the same event.
func FuzzDecodeAcceptedEvent(f *testing.F) {
	good := eventBody(f, testOrder("ord-7"))
	f.Add(good)
	f.Add(edit(f, good, "orderId", "ord:7"))
	f.Add(edit(f, good, "totalMinor", -3))
	f.Add([]byte(`{"id":"OrderAccepted:a","orderId":"a","type":"event","eventType":"OrderAccepted","customerId":"c","currency":"EUR","totalMinor":0,"requestHash":"` + strings.Repeat("0", 64) + `","occurredAt":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`null`))
	// Ambiguous keys: repeated (also through an escape and in a nested
	// object), case variants.
	f.Add(withKey(f, edit(f, good, "totalMinor", 99999900), "totalMinor", 1))
	f.Add([]byte(strings.Replace(string(good), `{`, `{"\u0063ustomerId":"attacker",`, 1)))
	f.Add(edit(f, good, "extra", map[string]any{"a": 1}))
	f.Add(withKey(f, good, "CustomerID", "attacker"))
	f.Add(edit(f, good, "totalMinor", int64(order.MaxSafeInteger)+2))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, id, err := order.DecodeAcceptedEvent(body)
		if err != nil {
			return
		}
		if id != ev.OrderID || order.ValidateOrderID(ev.OrderID) != nil || ev.ID != order.EventID(ev.OrderID) || ev.TotalMinor < 0 || ev.TotalMinor > order.MaxSafeInteger {
			t.Fatalf("accepted %+v (order id %q) from %q", ev, id, body)
		}
		// Every JSON reader sees this event: no key repeats in any object.
		if k, ok := repeatedKey(body); ok || len(body) > order.MaxBodySize {
			t.Fatalf("accepted an event of %d bytes with the key %q repeated: %q", len(body), k, body)
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := order.DecodeAcceptedEvent(b)
		if err != nil || !again.OccurredAt.Equal(ev.OccurredAt) {
			t.Fatalf("re-encoded event %s: %+v, %v; want %+v", b, again, err, ev)
		}
		again.OccurredAt = ev.OccurredAt
		if again != ev {
			t.Fatalf("re-encoded event %s decodes to %+v, want %+v", b, again, ev)
		}
	})
}

// repeatedKey reports a key that body, well-formed JSON, repeats in one of
// its objects (after unescaping), as a reader independent of the decoder's
// would see it.
func repeatedKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object    bool
		keys      map[string]bool
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return k, true
			}
			top.keys[k], top.expectKey = true, false
			continue
		}
		if top != nil && top.object {
			top.expectKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// readLog is a store that records the documents read, by partition and id.
type readLog struct {
	*memstore.Store
	reads []string
}

func (s *readLog) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.reads = append(s.reads, pk+"/"+id)
	return s.Store.ReadDocument(ctx, pk, id)
}

// TestInboxConsumerTrustsTheTopic pins a decision (see InboxConsumer): an
// OrderAccepted event for an order that was never stored is awarded like
// any other, on the batch alone, with no read of the order. Only the relay
// may send to the topic, and a principal who could forge the event could
// forge one for an existing order too, so a read per event would cost a
// request unit and a round trip without protecting anything; the topic's
// authorization does. A change to verify events must change this test.
func TestInboxConsumerTrustsTheTopic(t *testing.T) {
	s := &readLog{Store: memstore.New("/orderId")}
	c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
	ghost := testOrder("ord-never-stored")
	r := c.Process(t.Context(), eventMsg(ghost.OrderID, eventBody(t, ghost)))
	if r.Outcome != idempotent.Created {
		t.Fatalf("an event for an order never stored: %v %q (%s), want Created (awarded)", r.Outcome, r.Reason, r.Description)
	}
	for _, read := range s.reads {
		if read == ghost.OrderID+"/"+ghost.OrderID {
			t.Errorf("the consumer read the order document %s: the decision is to trust the topic", read)
		}
	}
	var entries int
	for _, it := range s.Items() {
		if bytes.Contains(it.Body, []byte(`"type":"`+order.TypeLoyaltyEntry+`"`)) {
			entries++
		}
	}
	if entries != 1 {
		t.Errorf("%d loyalty entries, want 1", entries)
	}
}
