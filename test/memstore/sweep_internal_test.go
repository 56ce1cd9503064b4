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

// A partition whose documents have all expired leaves nothing behind once
// they are swept: no partition map in the store and, in the replica-lag
// mode, no history once every replica has applied its last write (after
// the lag's Window). Before, each such partition kept an empty map (about
// 0.32 KB: 12.6 MB for 40,000 expired orders, none live), and the lag mode
// its log and versions, against "bounded by its live documents". The
// partitions with a live document keep theirs.
func TestSweep_ForgetsPartitionsWithNoDocument(t *testing.T) {
	ctx := context.Background()
	for _, lag := range []bool{false, true} {
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		s := NewWithClock("/orderId", func() time.Time { return now })
		if lag {
			s.SetReplicaLag(ReplicaLag{Versions: 2, Window: 5 * time.Second})
		}
		const live, gone = 3, 1000
		for i := range live + gone {
			pk, ttl := fmt.Sprintf("keep-%d", i), ""
			if i >= live {
				pk, ttl = fmt.Sprintf("gone-%d", i), `,"ttl":1`
			}
			for _, id := range []string{pk, "event:" + pk} {
				body := `{"id":"` + id + `","orderId":"` + pk + `"` + ttl + `}`
				if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{{ID: id, Body: []byte(body)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = now.Add(10 * time.Second) // every ttl and the lag's window passed
		if n := s.ChangeFeedLen(); n != 2*live {
			t.Fatalf("lag %v: the write log holds %d entries, want %d", lag, n, 2*live)
		}
		s.mu.Lock()
		parts := len(s.parts)
		var lagParts [3]int
		if s.lag != nil {
			lagParts = [3]int{len(s.lag.log), len(s.lag.at), len(s.lag.docs)}
		}
		s.mu.Unlock()
		if parts != live {
			t.Errorf("lag %v: the store holds %d partitions after %d expired, want the %d live", lag, parts, gone, live)
		}
		if want := [3]int{live, live, live}; lag && lagParts != want {
			t.Errorf("the lag mode keeps log, times and versions of %v partitions, want %v", lagParts, want)
		}
		for i := range live {
			pk := fmt.Sprintf("keep-%d", i)
			if _, ok := s.Get(pk, pk); !ok {
				t.Errorf("lag %v: live document %s lost", lag, pk)
			}
		}
	}
}
