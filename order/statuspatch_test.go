package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// statusDelivery is statusAt, delivered for the dc-th time.
func statusDelivery(version int64, status string, dc uint32) idempotent.Message {
	m := statusAt(version, status, "2026-11-30T12:00:00Z")
	m.DeliveryCount = dc
	return m
}

// TestStatusPatch_MemStore: a status change costs one store call on its
// first delivery when it applies (the conditional patch) and on a
// redelivery when it is stale (the read); a stale change on its first
// delivery costs two (the failed patch carries no document, and Stale is
// told from StatusVersionReused by the stored hashes). The document the
// patch writes is the one the read-and-replace path would write.
func TestStatusPatch_MemStore(t *testing.T) {
	ctx := t.Context()
	s := &countingStore{Store: memstore.New("/orderId")}
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	steps := []struct {
		name       string
		m          idempotent.Message
		want       idempotent.Outcome
		wantReason string
		calls      int
	}{
		{"applied, first delivery", statusDelivery(2, "paid", 1), idempotent.Applied, "", 1},
		{"applied again, redelivery", statusDelivery(2, "paid", 2), idempotent.Stale, "", 1},
		{"duplicate, first delivery (a resend)", statusDelivery(2, "paid", 1), idempotent.Stale, "", 2},
		{"reused version, first delivery", statusDelivery(2, "cancelled", 1), idempotent.Mismatch, order.ReasonStatusVersionReused, 2},
		{"reused version, redelivery", statusDelivery(2, "cancelled", 3), idempotent.Mismatch, order.ReasonStatusVersionReused, 1},
		{"newer, redelivery: read, then replace", statusDelivery(3, "shipped", 2), idempotent.Applied, "", 2},
		{"out of order, first delivery", statusDelivery(2, "paid", 1), idempotent.Stale, "", 2},
		{"newer, first delivery", statusDelivery(5, "delivered", 1), idempotent.Applied, "", 1},
	}
	for _, st := range steps {
		before := s.count()
		r := p.Process(ctx, st.m)
		if r.Outcome != st.want || r.Reason != st.wantReason {
			t.Errorf("%s: %v %q (%s), want %v %q", st.name, r.Outcome, r.Reason, r.Description, st.want, st.wantReason)
		}
		if n := s.count() - before; n != st.calls {
			t.Errorf("%s: %d store calls, want %d", st.name, n, st.calls)
		}
	}
	doc, err := order.ReadOrder(ctx, s, "ord-1")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Status != "delivered" || doc.Version != 5 || doc.StatusChangedAt == nil || len(doc.StatusHashes) != 3 || doc.StatusHashCount != 3 {
		t.Errorf("order = status %s version %d changedAt %v hashes %v (count %d), want delivered, 5, 3 hashes counted", doc.Status, doc.Version, doc.StatusChangedAt, doc.StatusHashes, doc.StatusHashCount)
	}
}

// TestStatusPatch_FullOrLegacyDocumentIsReplaced: the patch adds a hash only
// while fewer than MaxStatusHashes are recorded and the count is there; a
// full document (whose lowest hash must go) and one written before the
// count existed fail its condition and are read and replaced, which trims
// the hashes and counts them, as before.
func TestStatusPatch_FullOrLegacyDocumentIsReplaced(t *testing.T) {
	ctx := t.Context()
	s := &countingStore{Store: memstore.New("/orderId")}
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	last := int64(order.MaxStatusHashes + 1)
	for v := int64(2); v <= last; v++ {
		if r := p.Process(ctx, statusDelivery(v, "paid", 1)); r.Outcome != idempotent.Applied {
			t.Fatalf("version %d: %v %s", v, r.Outcome, r.Description)
		}
	}
	before := s.count()
	if r := p.Process(ctx, statusDelivery(last+1, "shipped", 1)); r.Outcome != idempotent.Applied || s.count()-before != 3 {
		t.Fatalf("into a full document: %v with %d calls, want applied with patch, read and replace", r.Outcome, s.count()-before)
	}
	doc, _ := order.ReadOrder(ctx, s, "ord-1")
	if len(doc.StatusHashes) != order.MaxStatusHashes || doc.StatusHashCount != order.MaxStatusHashes || doc.StatusHashes[2] != "" || doc.StatusHashes[last+1] == "" {
		t.Errorf("%d hashes (count %d), want the %d most recent", len(doc.StatusHashes), doc.StatusHashCount, order.MaxStatusHashes)
	}

	// A document without statusHashCount (and without statusHashes), as
	// written before they existed.
	var legacy map[string]any
	it, _ := s.Get("ord-1", "ord-1")
	if err := json.Unmarshal(it.Body, &legacy); err != nil {
		t.Fatal(err)
	}
	delete(legacy, "statusHashCount")
	delete(legacy, "statusHashes")
	legacy["version"] = 1
	body, _ := json.Marshal(legacy)
	if _, err := s.ReplaceDocument(ctx, "ord-1", idempotent.Document{ID: "ord-1", Body: body}, ""); err != nil {
		t.Fatal(err)
	}
	p = order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	for i, wantCalls := range []int{3, 1} { // patch refused, read, replace; then the patch applies
		before := s.count()
		if r := p.Process(ctx, statusDelivery(int64(2+i), "paid", 1)); r.Outcome != idempotent.Applied || s.count()-before != wantCalls {
			t.Errorf("legacy document, change %d: %v with %d calls, want applied with %d", i, r.Outcome, s.count()-before, wantCalls)
		}
	}
	doc, _ = order.ReadOrder(ctx, s, "ord-1")
	if doc.Version != 3 || doc.StatusHashCount != 2 || len(doc.StatusHashes) != 2 {
		t.Errorf("legacy document after two changes: version %d, %d hashes (count %d), want 3, 2, 2", doc.Version, len(doc.StatusHashes), doc.StatusHashCount)
	}
}

// A status change for an order not yet created is retried, on the patch
// path too.
func TestStatusPatch_OrderNotYetCreated(t *testing.T) {
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	for _, dc := range []uint32{1, 2} { // the patch's path, the read's
		r := p.Process(context.Background(), statusDelivery(2, "paid", dc))
		if r.Outcome != idempotent.Transient || r.Reason != order.ReasonOrderNotYetCreated || r.RetryAfter != order.StatusRetryAfter || r.DependencyFailed() {
			t.Errorf("delivery %d: %v %q after %v, want a retry after %v that is not a dependency failure: %s",
				dc, r.Outcome, r.Reason, r.RetryAfter, order.StatusRetryAfter, fmt.Sprint(r.Err))
		}
	}
	if n := len(s.Items()); n != 0 {
		t.Errorf("%d documents written", n)
	}
}
