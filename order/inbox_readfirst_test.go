package order_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// TestInboxConsumer_RoundTrips pins the store calls of every path of the
// inbox consumer, counted exactly by countingStore (every call of the
// DocumentStore the consumer is given): a first delivery creates first (a
// new message: the batch, 1; a copy: the conflicting batch and a read, 2),
// a redelivery reads first (a duplicate: the read, 1; a message whose
// earlier delivery wrote nothing: the read that misses and the batch, 2),
// for OrderAccepted events from the relay and order placements alike, with
// the same outcomes either way.
func TestInboxConsumer_RoundTrips(t *testing.T) {
	o := testOrder("ord-rt")
	other := o
	other.CustomerID = "cust-2" // another request hash under the same event id
	event := func(o order.Order, deliveries uint32) idempotent.Message {
		m := eventMsg(o.OrderID, eventBody(t, o))
		m.DeliveryCount = deliveries
		return m
	}
	placement := func(body string, deliveries uint32) idempotent.Message {
		m := msg(body)
		m.DeliveryCount = deliveries
		return m
	}
	for _, tt := range []struct {
		name  string
		seed  *idempotent.Message // processed first, by another consumer value of the same name
		m     idempotent.Message
		want  idempotent.Outcome
		calls int
	}{
		{"event, new, first delivery", nil, event(o, 1), idempotent.Created, 1},
		{"event, duplicate, redelivery", ptr(event(o, 1)), event(o, 2), idempotent.Duplicate, 1},
		{"event, duplicate, tenth delivery", ptr(event(o, 1)), event(o, 10), idempotent.Duplicate, 1},
		{"event, id reused, redelivery", ptr(event(o, 1)), event(other, 2), idempotent.Mismatch, 1},
		{"event, new, redelivery (nothing written before)", nil, event(o, 2), idempotent.Created, 2},
		{"event, copy, first delivery (a republish)", ptr(event(o, 1)), event(o, 1), idempotent.Duplicate, 2},
		{"event, id reused, first delivery", ptr(event(o, 1)), event(other, 1), idempotent.Mismatch, 2},
		{"placement, new, first delivery", nil, placement(validBody, 1), idempotent.Created, 1},
		{"placement, duplicate, redelivery", ptr(placement(validBody, 1)), placement(validBody, 2), idempotent.Duplicate, 1},
		{"placement, new, redelivery", nil, placement(validBody, 2), idempotent.Created, 2},
		{"placement, copy, first delivery", ptr(placement(validBody, 1)), placement(validBody, 1), idempotent.Duplicate, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &countingStore{Store: memstore.New("/orderId")}
			c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
			if tt.seed != nil {
				seeder := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
				if r := seeder.Process(t.Context(), *tt.seed); r.Outcome != idempotent.Created {
					t.Fatalf("seed: %v %s", r.Outcome, r.Description)
				}
			}
			before := s.count()
			r := c.Process(t.Context(), tt.m)
			if r.Outcome != tt.want {
				t.Errorf("outcome %v (%s), want %v", r.Outcome, r.Description, tt.want)
			}
			if got := s.count() - before; got != tt.calls {
				t.Errorf("%d store round trips, want %d", got, tt.calls)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// failingReads is a memstore whose reads fail with err.
type failingReads struct {
	*memstore.Store
	err error
}

func (s failingReads) ReadDocument(context.Context, string, string) ([]byte, string, error) {
	return nil, "", s.err
}

// TestInboxConsumer_RedeliveryReadFailure: a redelivery whose read first
// fails writes nothing and is retried as a store failure, the store's
// error kept.
func TestInboxConsumer_RedeliveryReadFailure(t *testing.T) {
	throttled := fmt.Errorf("429 throttled: %w", idempotent.ErrTransient)
	s := memstore.New("/orderId")
	c := &order.InboxConsumer{Name: "loyalty", Store: failingReads{s, throttled}, MarkerTTL: time.Hour, Now: fixedNow}
	m := eventMsg("ord-rf", eventBody(t, testOrder("ord-rf")))
	m.DeliveryCount = 2
	r := c.Process(t.Context(), m)
	if r.Outcome != idempotent.Transient || !errors.Is(r.Err, throttled) || !r.DependencyFailed() {
		t.Fatalf("Process = %v %q (%s), want a Transient store failure carrying the read's error", r.Outcome, r.Reason, r.Description)
	}
	if _, _, err := s.ReadDocument(t.Context(), "ord-rf", order.InboxMarkerID("loyalty", m.ID)); !errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("marker after a failed read: %v, want nothing written", err)
	}
}
