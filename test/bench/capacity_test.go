package bench_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// processorPaths names, for each path TestRoundTripsPerPath measures on the
// processor, the path of the capacity model (orderctl plan) that stands for
// it. The baselines (raw SDK, naive, upsert) are not the project's and have
// none.
var processorPaths = map[string]capacity.PathID{
	"order, new: created":                                                        capacity.OrderNew,
	"order, copy, another worker: duplicate":                                     capacity.OrderCopy,
	"order, redelivery, another worker: duplicate":                               capacity.OrderRedelivery,
	"order, copy, same worker: duplicate":                                        capacity.OrderCopyCached,
	"order, id reused, another worker: mismatch":                                 capacity.OrderMismatch,
	"order, id reused, same worker: mismatch":                                    capacity.OrderCopyCached,
	"order, malformed: invalid":                                                  capacity.OrderInvalid,
	"status change, newer: applied":                                              capacity.StatusApplied,
	"status change, redelivery: stale":                                           capacity.StatusStaleRedeliver,
	"status change before its order: retried":                                    capacity.StatusBeforeOrder,
	"order with payment, new: created and captured":                              capacity.PaymentNew,
	"order with payment, copy, another worker: duplicate":                        capacity.PaymentCopy,
	"order with payment, copy, same worker: duplicate":                           capacity.OrderCopyCached,
	"order, copy, another worker, after a run of copies: duplicate (read first)": capacity.OrderCopyReadFirst,
	"order, new, after a run of copies: created (read first)":                    capacity.OrderNewReadFirst,
}

// inboxPaths is the same for TestInboxRoundTripsMatchCapacityModel.
var inboxPaths = map[string]capacity.PathID{
	"inbox, new, first delivery":              capacity.InboxNew,
	"inbox, duplicate, redelivery":            capacity.InboxRedelivery,
	"inbox, copy, first delivery (republish)": capacity.InboxCopy,
}

// notMeasuredHere are the model's paths no test of this package counts,
// each with where its count is checked instead.
var notMeasuredHere = map[capacity.PathID]string{
	// cosmium applies a patch whatever its condition: counted through the
	// real SDK at a fake gateway (cosmosstore TestRoundTrips_FakeGateway,
	// budget 2).
	capacity.StatusStaleFirst: "cosmosstore TestRoundTrips_FakeGateway",
	// Composed of two measured paths: the read that misses
	// (OrderNewReadFirst's first request) before PaymentNew's.
	capacity.PaymentNewReadFirst: "composed of OrderNewReadFirst and PaymentNew",
}

// checkCapacityModel fails for every measured path whose model path sends
// another number of Cosmos DB requests than were counted, and for every
// path in names that was not measured; so a change of the processor or of
// the model fails here until both agree. The model's paths no test here
// measures must be listed in notMeasuredHere or in another table.
func checkCapacityModel(t *testing.T, measured map[string]int64, names map[string]capacity.PathID) {
	t.Helper()
	for name, id := range names {
		got, ok := measured[name]
		if !ok {
			t.Errorf("capacity model: path %q (%s) was not measured", name, id)
			continue
		}
		p, ok := capacity.PathOf(id)
		if !ok {
			t.Errorf("capacity model: no path %s", id)
			continue
		}
		if int64(p.RoundTrips()) != got {
			t.Errorf("capacity model: %s sends %d Cosmos DB requests, the measured path %q %d", id, p.RoundTrips(), name, got)
		}
	}
}

// TestCapacityModelCoversEveryPath: every path of the model is measured by
// TestRoundTripsPerPath or TestInboxRoundTripsMatchCapacityModel, or
// checked elsewhere (notMeasuredHere).
func TestCapacityModelCoversEveryPath(t *testing.T) {
	covered := map[capacity.PathID]bool{}
	for _, m := range []map[string]capacity.PathID{processorPaths, inboxPaths} {
		for _, id := range m {
			covered[id] = true
		}
	}
	for id := range notMeasuredHere {
		covered[id] = true
	}
	for _, p := range capacity.Paths() {
		if !covered[p.ID] {
			t.Errorf("capacity model path %s is measured by no test", p.ID)
		}
	}
	want, _ := capacity.PathOf(capacity.PaymentNewReadFirst)
	first, _ := capacity.PathOf(capacity.OrderNewReadFirst)
	paid, _ := capacity.PathOf(capacity.PaymentNew)
	if want.RoundTrips() != 1+paid.RoundTrips() || first.Requests[0] != want.Requests[0] {
		t.Errorf("%s = %+v, want the read that misses before %s's requests", want.ID, want.Requests, paid.ID)
	}
}

// TestInboxRoundTripsMatchCapacityModel counts, through the proxy into
// cosmium as TestRoundTripsPerPath does, the Cosmos DB requests of the
// inbox consumer's paths (order.InboxConsumer, the subscribers of orderctl
// plan's model) and compares them with the model's. The messages are order
// placements, which the consumer handles with the same requests as the
// relay's OrderAccepted events (order TestInboxConsumer_RoundTrips).
func TestInboxRoundTripsMatchCapacityModel(t *testing.T) {
	p, _, store := countedStore(t)
	ctx := t.Context()
	now := func() time.Time { return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) }
	consumer := func() *order.InboxConsumer {
		return &order.InboxConsumer{Name: "loyalty", Store: store, MarkerTTL: time.Hour, Now: now}
	}
	gen := ordergen.New(5, "inbox")
	placed := func(i int, deliveries uint32) idempotent.Message {
		o := gen.Order(i)
		return idempotent.Message{ID: o.OrderID, Body: ordergen.Body(o, now(), "t"), DeliveryCount: deliveries}
	}
	process := func(c *order.InboxConsumer, m idempotent.Message, want idempotent.Outcome) error {
		if r := c.Process(ctx, m); r.Outcome != want {
			return fmt.Errorf("outcome %v (%s), want %v", r.Outcome, r.Description, want)
		}
		return nil
	}
	// Warm the client up (its first call may read the account).
	if err := process(consumer(), placed(99, 1), idempotent.Created); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		seed bool // processed first by another consumer value of the same name
		m    idempotent.Message
		want idempotent.Outcome
	}{
		{"inbox, new, first delivery", false, placed(1, 1), idempotent.Created},
		{"inbox, duplicate, redelivery", true, placed(2, 2), idempotent.Duplicate},
		{"inbox, copy, first delivery (republish)", true, placed(3, 1), idempotent.Duplicate},
	}
	measured := map[string]int64{}
	for _, tt := range tests {
		if tt.seed {
			seed := tt.m
			seed.DeliveryCount = 1
			if err := process(consumer(), seed, idempotent.Created); err != nil {
				t.Fatalf("%s: seed: %v", tt.name, err)
			}
		}
		before := p.Requests()
		if err := process(consumer(), tt.m, tt.want); err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		measured[tt.name] = p.Requests() - before
	}
	t.Logf("inbox consumer round trips: %v", measured)
	checkCapacityModel(t, measured, inboxPaths)
}
