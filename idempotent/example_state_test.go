package idempotent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// An inbox consumer writes its business document (here, a ledger entry
// with a random id, which cannot detect a duplicate itself) in one batch
// with its marker: a redelivery is its duplicate, and another consumer of
// the same event is not suppressed by it.
func ExampleInbox() {
	store := memstore.New("/tenantId")        // a container partitioned on /tenantId
	horizon := fixedHorizon(15 * time.Minute) // what the queue's settings allow, see RetentionHorizon
	newInbox := func(consumer string) *idempotent.Inbox {
		in, err := idempotent.NewInbox(store, idempotent.InboxConfig{
			Consumer: consumer, PartitionKeyField: "/tenantId", MarkerTTL: time.Hour, Horizon: horizon,
		})
		if err != nil {
			panic(err)
		}
		return in
	}
	ledger, audit := newInbox("ledger"), newInbox("audit")

	entry := func(at time.Time) ([]idempotent.Document, error) {
		id := fmt.Sprintf("entry-%d", at.UnixNano())
		body, err := json.Marshal(map[string]any{"id": id, "tenantId": "t-1", "amount": 250})
		return []idempotent.Document{{ID: id, Body: body}}, err
	}
	ctx := context.Background()
	m := idempotent.Message{ID: "InvoicePaid:inv-7", DeliveryCount: 1}
	for _, step := range []struct {
		in *idempotent.Inbox
		m  idempotent.Message
	}{{ledger, m}, {ledger, idempotent.Message{ID: m.ID, DeliveryCount: 2}}, {audit, m}} {
		r := step.in.Process(ctx, step.m, "t-1", "hash-of-the-event", entry)
		fmt.Println(step.in.Consumer(), step.m.DeliveryCount, r.Outcome)
	}
	_, err := idempotent.NewInbox(store, idempotent.InboxConfig{
		Consumer: "ledger", PartitionKeyField: "/tenantId", MarkerTTL: 5 * time.Minute, Horizon: horizon,
	})
	fmt.Println(err != nil)
	// Output:
	// ledger 1 created
	// ledger 2 duplicate
	// audit 1 created
	// true
}

// fixedHorizon is a RetentionHorizon of a fixed minimum; a deployment
// computes it from its queue's settings.
type fixedHorizon time.Duration

func (h fixedHorizon) MinRetention() (time.Duration, string) {
	return time.Duration(h), "the queue's message TTL and lock duration"
}

// shipment is the caller's document: its status is absolute state, changed
// by versioned messages.
type shipment struct {
	ID       string           `json:"id"`
	TenantID string           `json:"tenantId"`
	Status   string           `json:"status"`
	Version  int64            `json:"version"`
	Applied  map[int64]string `json:"applied"` // version -> content hash
}

func (s *shipment) StateVersion() int64 { return s.Version }

func (s *shipment) AppliedHash(v int64) (string, bool) { h, ok := s.Applied[v]; return h, ok }

// A change of absolute state is applied when it is newer than the stored
// version and is otherwise Stale, in whatever order the changes arrive; a
// version reused for other content is a Mismatch.
func ExampleVersioned() {
	store := memstore.New("/tenantId")
	ctx := context.Background()
	body, _ := json.Marshal(shipment{ID: "sh-1", TenantID: "sh-1", Status: "created", Version: 1, Applied: map[int64]string{}})
	if _, err := store.CreateBatch(ctx, "sh-1", []idempotent.Document{{ID: "sh-1", Body: body}}); err != nil {
		panic(err)
	}

	v := idempotent.NewVersioned[*shipment](store, idempotent.VersionedConfig{
		ReusedReason: "ShipmentVersionReused", MissingReason: "ShipmentNotYetCreated", MissingRetryAfter: 5 * time.Second,
	})
	change := func(version int64, status string) idempotent.VersionedChange[*shipment] {
		hash := status // a real change hashes every field of its content
		return idempotent.VersionedChange[*shipment]{
			PartitionKey: "sh-1", ID: "sh-1", Version: version, Hash: hash, What: "status " + status,
			Patch: idempotent.Patch{Ops: []idempotent.PatchOp{
				{Op: idempotent.PatchSet, Path: "/status", Value: status},
				{Op: idempotent.PatchSet, Path: fmt.Sprintf("/applied/%d", version), Value: hash},
			}},
			Decode: func(b []byte) (*shipment, error) { s := new(shipment); return s, json.Unmarshal(b, s) },
			Apply: func(s *shipment) ([]byte, error) {
				s.Status, s.Version, s.Applied[version] = status, version, hash
				return json.Marshal(s)
			},
		}
	}
	first := idempotent.Message{DeliveryCount: 1}
	for _, c := range []idempotent.VersionedChange[*shipment]{
		change(3, "delivered"), // arrives first: applied
		change(2, "shipped"),   // older: stale
		change(3, "delivered"), // again: stale
		change(3, "returned"),  // version 3 with other content
	} {
		r := v.Apply(ctx, first, c)
		fmt.Printf("%d %s: %v\n", c.Version, c.What, strings.TrimSpace(r.Outcome.String()+" "+r.Reason))
	}
	it, _ := store.Get("sh-1", "sh-1")
	var s shipment
	_ = json.Unmarshal(it.Body, &s)
	fmt.Println(s.Status, s.Version)
	// Output:
	// 3 status delivered: applied
	// 2 status shipped: stale
	// 3 status delivered: stale
	// 3 status returned: mismatch ShipmentVersionReused
	// delivered 3
}
