package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Documents that expire and are never read again leave the write log (and
// the store) without a read: it stays within twice the live documents plus
// one however many of them expire unread.
func TestWrite_SweepsExpiredDocumentsNobodyReads(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := NewWithClock("/orderId", func() time.Time { return now })
	const live = 10
	for i := range live {
		pk := fmt.Sprintf("keep-%d", i)
		if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{{ID: "d", Body: []byte(`{"id":"d","orderId":"` + pk + `"}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		pk := fmt.Sprintf("gone-%d", i)
		if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{{ID: "d", Body: []byte(`{"id":"d","orderId":"` + pk + `","ttl":1}`)}}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Second) // expired, and never read again
		s.mu.Lock()
		n, docs := len(s.writes), 0
		for _, part := range s.parts {
			docs += len(part)
		}
		s.mu.Unlock()
		if bound := 2*(live+1) + 1; n > bound || docs > bound {
			t.Fatalf("after %d expired documents: the log holds %d entries and the store %d documents, want at most %d (2 × %d live + 1)", i+1, n, docs, bound, live+1)
		}
	}
}
