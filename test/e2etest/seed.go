package e2etest

import (
	"context"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// WriteOrder stores an accepted order as the core's consumer does: the
// documents of w in one transactional batch under w.PartitionKey(), within
// a minute. It fails t if w has no documents to give or the store refuses
// the batch. Tests seed orders with it before they run a binary or a
// command against the store.
func WriteOrder(t testing.TB, s idempotent.Store, w order.Write) {
	t.Helper()
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := s.CreateBatch(ctx, w.PartitionKey(), docs); err != nil {
		t.Fatalf("create order %q: %v", w.PartitionKey(), err)
	}
}
