package e2etest_test

import (
	"context"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// writeOrder stores an accepted order as the core's consumer does: the
// documents of w in one transactional batch under w.PartitionKey(), within
// a minute.
func writeOrder(t testing.TB, s idempotent.Store, w order.Write) {
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
