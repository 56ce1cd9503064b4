package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// The write log keeps only what the latest version mode can return: after
// many replaces of one document, deletes and expiries, it holds exactly one
// entry per live document, and a reader resuming from a continuation taken
// before all that still sees every document changed since, once, in the
// order of its latest change.
func TestChangeFeed_LogHoldsOnlyTheLiveDocumentsLatestWrites(t *testing.T) {
	tests := []struct {
		name                      string
		docs, replaces            int
		deletes, expiries, ranges int
	}{
		{name: "one range", docs: 10, replaces: 100, deletes: 3, expiries: 2, ranges: 1},
		{name: "three ranges", docs: 40, replaces: 500, deletes: 10, expiries: 5, ranges: 3},
		{name: "everything gone", docs: 4, replaces: 10, deletes: 2, expiries: 2, ranges: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			s := memstore.NewWithClock("/orderId", func() time.Time { return now })
			f := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: tt.ranges, Seed: 3})
			ranges, _ := f.FeedRanges(ctx)
			// The continuations of a reader that has read nothing yet.
			conts := map[string]string{}
			for _, fr := range ranges {
				_, conts[fr] = readAll(t, f, fr, "", 5)
			}
			pk := func(i int) string { return fmt.Sprintf("ord-%d", i%7) }
			id := func(i int) string { return fmt.Sprintf("d-%d", i) }
			for i := range tt.docs {
				d := versioned(pk(i), id(i), 0)
				if i >= tt.docs-tt.expiries {
					d.Body = []byte(fmt.Sprintf(`{"id":%q,"orderId":%q,"v":0,"ttl":5}`, id(i), pk(i)))
				}
				if _, err := s.CreateBatch(ctx, pk(i), []idempotent.Document{d}); err != nil {
					t.Fatal(err)
				}
			}
			// Replace the documents that stay round robin, the last
			// replace of each is its latest version.
			stay := tt.docs - tt.deletes - tt.expiries
			last := map[string]int{}
			var order []string // ids in the order of their latest write
			writes := tt.docs
			for r := range tt.replaces {
				if stay == 0 {
					break
				}
				writes++
				i := r % stay
				if _, err := s.ReplaceDocument(ctx, pk(i), versioned(pk(i), id(i), r+1), ""); err != nil {
					t.Fatal(err)
				}
				last[id(i)] = r + 1
			}
			for i := range stay {
				if _, ok := last[id(i)]; !ok {
					order = append(order, id(i))
				}
			}
			for r := max(tt.replaces-stay, 0); r < tt.replaces && stay > 0; r++ {
				order = append(order, id(r%stay))
			}
			for i := stay; i < stay+tt.deletes; i++ {
				if !s.Delete(pk(i), id(i)) {
					t.Fatalf("delete %s: not there", id(i))
				}
			}
			now = now.Add(6 * time.Second)

			if got := s.ChangeFeedLen(); got != stay {
				t.Errorf("ChangeFeedLen() = %d after %d writes, want %d: one entry per live document", got, writes, stay)
			}
			// The old continuations still work: every live document once,
			// in its latest version, in the order of its latest write.
			var got []string
			for _, fr := range ranges {
				docs, _ := readAll(t, f, fr, conts[fr], 3)
				for _, d := range docs {
					if want, ok := last[d.ID]; ok && d.V != want {
						t.Errorf("%s: version %d, want its latest %d", d.ID, d.V, want)
					}
					got = append(got, d.ID)
				}
			}
			if len(got) != len(order) {
				t.Fatalf("resumed readers saw %v, want each of %v once", got, order)
			}
			pos := map[string]int{}
			for i, id := range order {
				pos[id] = i
			}
			seen := map[string]bool{}
			lastPos := map[string]int{} // partition key -> position of its last document read
			for _, id := range got {
				if seen[id] {
					t.Errorf("%s read twice", id)
				}
				seen[id] = true
				p, ok := pos[id]
				if !ok {
					t.Errorf("%s read, but it was deleted or expired", id)
					continue
				}
				var i int
				fmt.Sscanf(id, "d-%d", &i)
				if lp, ok := lastPos[pk(i)]; ok && p < lp {
					t.Errorf("%s read out of the order of its partition key's changes", id)
				}
				lastPos[pk(i)] = p
			}
		})
	}
}
