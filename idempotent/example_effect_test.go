package idempotent_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// webhook is a Downstream: it posts a receipt, deduplicated by the
// receiver on the Idempotency-Key.
type webhook struct{ seen map[string]bool }

func (w *webhook) Do(_ context.Context, key, entity string, request []byte) (string, error) {
	if !w.seen[key] {
		w.seen[key] = true
		fmt.Printf("POST receipt %s %s (Idempotency-Key %s)\n", entity, request, key)
	}
	return "hook-" + entity, nil
}

// A consumer whose messages have a side effect: the effect's first claim
// joins the create's batch, and the redelivery finds it completed.
func ExampleWithEffect() {
	store := memstore.New("/invoiceId")
	effect := idempotent.NewEffect(store, idempotent.EffectOptions{
		Name: "Receipt", PartitionKeyField: "invoiceId",
		Downstream: &webhook{seen: map[string]bool{}}, Lease: time.Minute, Owner: "worker-1",
	})
	consumer := idempotent.NewConsumer[receipt](receiptKind{}, store, idempotent.WithEffect(effect))
	for count := uint32(1); count <= 2; count++ {
		m := idempotent.Message{ID: "inv-1", Body: []byte(`{"invoiceId":"inv-1","to":"a@example.com"}`), SequenceNumber: 1, DeliveryCount: count}
		fmt.Println(consumer.Process(context.Background(), m).Outcome)
	}
	// Output:
	// POST receipt inv-1 {"to":"a@example.com"} (Idempotency-Key Receipt:inv-1)
	// created
	// duplicate
}
