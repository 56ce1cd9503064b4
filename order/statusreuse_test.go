package order_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// statusAt is statusMsg with a chosen changedAt.
func statusAt(version int64, status, changedAt string) idempotent.Message {
	body := fmt.Sprintf(`{"orderId":"ord-1","status":%q,"version":%d,"changedAt":%q}`, status, version, changedAt)
	return idempotent.Message{ID: order.StatusMessageID("ord-1", version), Subject: order.SubjectOrderStatusChanged, Body: []byte(body), DeliveryCount: 1}
}

// TestStatusVersionReused: a status change that reuses an applied version
// with other content (another status, another changedAt) is a Mismatch
// naming both content hashes, whether the version is the current one or an
// older applied one; the same content again is Stale; a version that was
// skipped cannot be compared and is Stale. Nothing is written by any of
// them.
func TestStatusVersionReused(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	const at = "2026-11-30T12:00:00Z"
	for _, m := range []idempotent.Message{statusAt(2, "paid", at), statusAt(4, "shipped", at), statusAt(5, "delivered", at)} {
		if r := p.Process(ctx, m); r.Outcome != idempotent.Applied {
			t.Fatalf("setup %s: %v (%s)", m.ID, r.Outcome, r.Description)
		}
	}
	hashOf := func(m idempotent.Message) string {
		c, err := order.DecodeStatusChange(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		return c.ContentHash()
	}
	tests := []struct {
		name       string
		m          idempotent.Message
		applied    idempotent.Message // the change applied with this version; zero: none
		want       idempotent.Outcome
		wantReason string
	}{
		{"current version, other status", statusAt(5, "cancelled", at), statusAt(5, "delivered", at), idempotent.Mismatch, order.ReasonStatusVersionReused},
		{"current version, other changedAt", statusAt(5, "delivered", "2026-11-30T12:00:01Z"), statusAt(5, "delivered", at), idempotent.Mismatch, order.ReasonStatusVersionReused},
		{"older applied version, other status", statusAt(2, "cancelled", at), statusAt(2, "paid", at), idempotent.Mismatch, order.ReasonStatusVersionReused},
		{"current version, same content in another zone", statusAt(5, "delivered", "2026-11-30T13:00:00+01:00"), idempotent.Message{}, idempotent.Stale, ""},
		{"older applied version, same content", statusAt(4, "shipped", at), idempotent.Message{}, idempotent.Stale, ""},
		{"skipped version: nothing to compare", statusAt(3, "cancelled", at), idempotent.Message{}, idempotent.Stale, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Items()
			r := p.Process(ctx, tt.m)
			if r.Outcome != tt.want || r.Reason != tt.wantReason || r.Key != "ord-1" {
				t.Fatalf("Process = %v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if tt.want == idempotent.Mismatch {
				for _, h := range []string{hashOf(tt.m), hashOf(tt.applied)} {
					if !strings.Contains(r.Description, h) {
						t.Errorf("description %q does not name hash %s", r.Description, h)
					}
				}
			}
			assertUnchanged(t, before, s.Items())
		})
	}
	doc, err := order.ReadOrder(ctx, s, "ord-1")
	if err != nil || len(doc.StatusHashes) != 3 || doc.StatusHashes[4] != hashOf(statusAt(4, "shipped", at)) {
		t.Errorf("stored status hashes %v (%v), want one per applied version", doc.StatusHashes, err)
	}
}

// TestStatusHashesAreBounded: the order document records at most
// MaxStatusHashes versions, the most recent ones.
func TestStatusHashesAreBounded(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	p.Process(ctx, msg(validBody))
	last := int64(order.MaxStatusHashes + 10)
	for v := int64(2); v <= last; v++ {
		if r := p.Process(ctx, statusMsg(v, "shipped")); r.Outcome != idempotent.Applied {
			t.Fatalf("v%d: %v (%s)", v, r.Outcome, r.Description)
		}
	}
	doc, err := order.ReadOrder(ctx, s, "ord-1")
	if err != nil || len(doc.StatusHashes) != order.MaxStatusHashes {
		t.Fatalf("%d status hashes recorded (%v), want %d", len(doc.StatusHashes), err, order.MaxStatusHashes)
	}
	for v := last - order.MaxStatusHashes + 1; v <= last; v++ {
		if _, ok := doc.StatusHashes[v]; !ok {
			t.Errorf("version %d, one of the most recent, is not recorded", v)
		}
	}
}
