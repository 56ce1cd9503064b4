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

// conflictingStore is a memstore whose order creates always conflict, as
// a create does whose documents were deleted between the create and the
// read that follows it.
type conflictingStore struct{ *memstore.Store }

func (s conflictingStore) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	if docs[0].ID != pk { // not an order's batch
		return s.Store.CreateBatch(ctx, pk, docs)
	}
	return nil, fmt.Errorf("transactional batch failed: operation 0: 409 Conflict: %w", idempotent.ErrAlreadyExists)
}

// storeOnly hides every method of a memstore but those of idempotent.Store.
type storeOnly struct{ idempotent.Store }

// TestConflictOnTheCompanionOnly: a create that conflicts only because the
// OrderAccepted event is left (the order document was deleted) is a
// permanent state, dead-lettered on its redelivery (a first delivery's reads
// may have lagged) with a reason that says so; a conflict whose documents
// are all gone again is retried.
func TestConflictOnTheCompanionOnly(t *testing.T) {
	eventOnly := func() *memstore.Store {
		s := memstore.New("/orderId")
		o := validOrder()
		docs, err := order.NewWrite(o, o.OrderID, o.RequestHash(), fixedNow()).Documents()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateBatch(context.Background(), "ord-1", docs[1:]); err != nil { // the event, not the order
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name       string
		proc       func() (*order.Processor, *memstore.Store)
		want       idempotent.Outcome
		wantReason string
	}{
		{"event left, documents through the Store", func() (*order.Processor, *memstore.Store) {
			s := eventOnly()
			return order.NewProcessor(s, fixedNow), s
		}, idempotent.Invalid, order.ReasonOrderDocumentMissing},
		{"event left, documents through WithDocuments", func() (*order.Processor, *memstore.Store) {
			s := eventOnly()
			return order.NewProcessor(storeOnly{s}, fixedNow, order.WithDocuments(s)), s
		}, idempotent.Invalid, order.ReasonOrderDocumentMissing},
		{"both deleted since the create", func() (*order.Processor, *memstore.Store) {
			s := memstore.New("/orderId")
			return order.NewProcessor(conflictingStore{s}, fixedNow), s
		}, idempotent.Transient, idempotent.ReasonConcurrentUpdate},
		// The core reads the companion through the Store's ReadDocument,
		// which every Store has: no DocumentStore is needed to tell.
		{"event left, a Store alone", func() (*order.Processor, *memstore.Store) {
			s := eventOnly()
			return order.NewProcessor(storeOnly{s}, fixedNow), s
		}, idempotent.Invalid, order.ReasonOrderDocumentMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, s := tt.proc()
			before := s.Items()
			m := msg(validBody)
			if tt.want == idempotent.Invalid {
				// A first delivery cannot tell a deleted order document
				// from reads that lagged: it is retried.
				if r := p.Process(context.Background(), m); r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonConcurrentUpdate {
					t.Fatalf("first delivery: %v %q (%s), want a retry", r.Outcome, r.Reason, r.Description)
				}
				m.DeliveryCount = 2
			}
			r := p.Process(context.Background(), m)
			if r.Outcome != tt.want || r.Reason != tt.wantReason || r.Key != "ord-1" {
				t.Fatalf("Process = %v %q for %q (%s), want %v %q", r.Outcome, r.Reason, r.Key, r.Description, tt.want, tt.wantReason)
			}
			if r.Outcome == idempotent.Invalid {
				for _, want := range []string{`"ord-1"`, order.EventID("ord-1"), "deleted", "resubmit"} {
					if !strings.Contains(r.Description, want) {
						t.Errorf("description %q does not say %q", r.Description, want)
					}
				}
			}
			assertUnchanged(t, before, s.Items())
		})
	}
}
