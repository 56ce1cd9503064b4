package cosmosstore_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// cosmium keeps JSON numbers as float64, as the JavaScript readers of a
// store do: an integer above 2^53-1 comes back rounded. So the order
// example bounds every integer it stores at order.MaxSafeInteger, and a
// stored document that no longer decodes (one a worker wrote before the
// bound) dead-letters the message that needs it at its first delivery,
// naming the document, rather than failing every delivery as a store
// error.
func TestCosmium_IntegersAbove2To53AreRounded_TheWorkerRefusesThem(t *testing.T) {
	s, _ := cosmiumStore(t)
	ctx := t.Context()
	p := order.NewProcessor(s, nil, order.WithDocuments(cosmosstore.WithoutPatch(s)))

	// What cosmium does with such numbers.
	raw := fmt.Sprintf(`{"id":"n-1","orderId":"n-1","type":"probe","version":%d,"totalMinor":%d,"safe":%d}`,
		int64(math.MaxInt64), int64(order.MaxSafeInteger)+2, int64(order.MaxSafeInteger))
	if _, err := s.CreateBatch(ctx, "n-1", []idempotent.Document{{ID: "n-1", Body: []byte(raw)}}); err != nil {
		t.Fatal(err)
	}
	body, _, err := s.ReadDocument(ctx, "n-1", "n-1")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var got map[string]any
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"version": "9223372036854776000", "totalMinor": "9007199254740992", "safe": "9007199254740991"} {
		if n, _ := got[k].(json.Number); string(n) != want {
			t.Errorf("cosmium returned %s %v, want %s: does it keep integers exactly now?", k, got[k], want)
		}
	}
	t.Logf("stored version %d, totalMinor %d; cosmium returned %v and %v", int64(math.MaxInt64), int64(order.MaxSafeInteger)+2, got["version"], got["totalMinor"])

	// An order with a total of 2^53+1 is refused, as is a status change to
	// version math.MaxInt64: neither is stored.
	placed := func(id string, total int64) idempotent.Message {
		b := fmt.Sprintf(`{"orderId":%q,"customerId":"cust-1","currency":"EUR","lines":[{"sku":"SKU-1","quantity":1,"unitPriceMinor":%d}],"totalMinor":%d,"placedAt":"2026-11-30T10:00:00Z"}`, id, total, total)
		return idempotent.Message{ID: id, Body: []byte(b), DeliveryCount: 1}
	}
	change := func(version int64, dc uint32) idempotent.Message {
		b, err := json.Marshal(order.StatusChange{OrderID: "ord-1", Status: "shipped", Version: version, ChangedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		return idempotent.Message{ID: order.StatusMessageID("ord-1", version), Subject: order.SubjectOrderStatusChanged, Body: b, DeliveryCount: dc}
	}
	if r := p.Process(ctx, placed("big-1", order.MaxSafeInteger+2)); r.Outcome != idempotent.Invalid || r.Reason != idempotent.ReasonInvalidMessage || !strings.Contains(r.Description, "totalMinor") {
		t.Errorf("order with total 2^53+1: %v %q (%s), want Invalid %s naming totalMinor", r.Outcome, r.Reason, r.Description, idempotent.ReasonInvalidMessage)
	}
	if r := p.Process(ctx, placed("big-2", order.MaxSafeInteger)); r.Outcome != idempotent.Created {
		t.Errorf("order with total 2^53-1: %v (%s), want Created", r.Outcome, r.Description)
	} else if doc, err := order.ReadOrder(ctx, s, "big-2"); err != nil || doc.TotalMinor != order.MaxSafeInteger {
		t.Errorf("order with total 2^53-1 stored with total %d (%v)", doc.TotalMinor, err)
	}
	if r := p.Process(ctx, placed("ord-1", 500)); r.Outcome != idempotent.Created {
		t.Fatalf("order ord-1: %v (%s)", r.Outcome, r.Description)
	}
	if r := p.Process(ctx, change(math.MaxInt64, 1)); r.Outcome != idempotent.Invalid || r.Reason != idempotent.ReasonInvalidMessage || !strings.Contains(r.Description, "version") {
		t.Errorf("status change to version math.MaxInt64: %v %q (%s), want Invalid %s naming the version", r.Outcome, r.Reason, r.Description, idempotent.ReasonInvalidMessage)
	}
	if doc, err := order.ReadOrder(ctx, s, "ord-1"); err != nil || doc.Version != 1 {
		t.Errorf("after the refused change ord-1 is at version %d (%v), want 1", doc.Version, err)
	}

	// The order document as a worker without the bound left it: version
	// math.MaxInt64 applied, stored rounded. The next status change is
	// dead-lettered at its first delivery, naming the document.
	stored, _, err := s.ReadDocument(ctx, "ord-1", "ord-1")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(stored, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_rid", "_self", "_etag", "_attachments", "_ts"} {
		delete(doc, k)
	}
	doc["version"] = json.Number(fmt.Sprint(int64(math.MaxInt64)))
	rewritten, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceDocument(ctx, "ord-1", idempotent.Document{ID: "ord-1", Body: rewritten}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := order.ReadOrder(ctx, s, "ord-1"); err == nil {
		t.Fatal("cosmium kept version math.MaxInt64 exactly: the rest of this test shows nothing")
	}
	r := p.Process(ctx, change(3, 1))
	if r.Outcome != idempotent.Invalid || r.Reason != order.ReasonStoredDocumentUnreadable {
		t.Fatalf("status change to an order whose version cosmium rounded: %v %q (%s), want Invalid %s at the first delivery",
			r.Outcome, r.Reason, r.Description, order.ReasonStoredDocumentUnreadable)
	}
	for _, want := range []string{`"ord-1"`, "9223372036854776000", "orderctl dlq resubmit"} {
		if !strings.Contains(r.Description, want) {
			t.Errorf("description %q does not contain %q", r.Description, want)
		}
	}
	t.Logf("dead-lettered %s: %s", r.Reason, r.Description)
}
