package audit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// counting counts the requests the audit sends to a container and its
// change feed, by kind: "point" reads, partition "query"s, "feed" reads
// and "ranges" (the feed's ranges).
type counting struct {
	c    audit.Container
	f    audit.Feed
	name string
	mu   *sync.Mutex
	n    map[string]int
}

var (
	_ audit.Container = (*counting)(nil)
	_ audit.Feed      = (*counting)(nil)
)

func (c *counting) add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[c.name+" "+kind]++
}

func (c *counting) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	c.add("point")
	return c.c.ReadDocument(ctx, pk, id)
}

func (c *counting) ReadPartition(ctx context.Context, pk string) ([][]byte, error) {
	c.add("query")
	return c.c.ReadPartition(ctx, pk)
}

func (c *counting) FeedRanges(ctx context.Context) ([]string, error) {
	c.add("ranges")
	return c.f.FeedRanges(ctx)
}

func (c *counting) ReadChanges(ctx context.Context, feedRange, continuation string, maxItems int) ([][]byte, string, error) {
	c.add("feed")
	return c.f.ReadChanges(ctx, feedRange, continuation, maxItems)
}

// TestAudit_RequestsPerOrder counts every request the audit sends for a
// healthy store of 60 orders, a third of them paid after all were accepted
// (their order documents move to the end of the feed, far from their
// events), in pages of 10 and of 100 documents over 2 feed ranges: one partition
// query per order in the orders container and, per consumer, one in the
// consumer's own container (none when its markers live in the orders
// container, whose partition the audit has already read), no point read,
// and the change feed's pages. Before the audit reused the partition it
// read, it sent a point read of the order for every event and, per
// consumer in the orders container, the same partition query again.
func TestAudit_RequestsPerOrder(t *testing.T) {
	const orders = 60
	tests := []struct {
		name      string
		consumers string // "": none; "orders": in the orders container; "own": in their own
		want      map[string]int
	}{
		{name: "no consumers", want: map[string]int{"orders query": orders, "orders point": 0}},
		{name: "consumers in the orders container", consumers: "orders", want: map[string]int{"orders query": orders, "orders point": 0}},
		{name: "consumers in their own containers", consumers: "own",
			want: map[string]int{"orders query": orders, "orders point": 0, "loyalty query": orders, "shipping query": orders, "loyalty point": 0, "shipping point": 0}},
	}
	for _, pageSize := range []int{10, audit.DefaultPageSize} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s, pages of %d", tt.name, pageSize), func(t *testing.T) {
				mu, n := &sync.Mutex{}, map[string]int{}
				mem := memstore.New("/orderId")
				feed := mem.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 2, Seed: 1})
				c := &counting{c: mem, f: feed, name: "orders", mu: mu, n: n}
				now := time.Now().UTC()
				accepted := now.Add(-2 * time.Hour)
				cfg := audit.Config{Orders: c, Feed: c, Settle: time.Hour, PageSize: pageSize, Payments: true, ClaimHorizon: 24 * time.Hour,
					MinMarkerRetention: time.Hour, MaxIDs: 1000, Now: func() time.Time { return now }}
				stores := map[string]*memstore.Store{}
				for _, name := range consumers {
					switch tt.consumers {
					case "orders":
						stores[name] = mem
						cfg.Consumers = append(cfg.Consumers, audit.Consumer{Name: name, Store: c, MarkerTTL: 48 * time.Hour})
					case "own":
						stores[name] = memstore.New("/orderId")
						cfg.Consumers = append(cfg.Consumers, audit.Consumer{Name: name, MarkerTTL: 48 * time.Hour,
							Store: &counting{c: stores[name], name: name, mu: mu, n: n}})
					}
				}
				for i := range orders {
					id := fmt.Sprintf("ord-%02d", i)
					wr := newWrite(id, int64(1000+i), accepted)
					mustWrite(t, mem, wr, completed(wr, accepted))
					for name, s := range stores {
						consume(t, s, name, wr.Event, accepted.Add(time.Minute))
					}
				}
				for i := 0; i < orders; i += 3 {
					id := fmt.Sprintf("ord-%02d", i)
					doc, err := order.ReadOrder(context.Background(), mem, id)
					if err != nil {
						t.Fatal(err)
					}
					changed := accepted.Add(10 * time.Minute)
					sc := order.StatusChange{OrderID: id, Status: "paid", Version: 2, ChangedAt: changed}
					doc.Status, doc.Version, doc.StatusChangedAt = sc.Status, sc.Version, &changed
					doc.StatusHashes, doc.StatusHashCount = map[int64]string{2: sc.ContentHash()}, 1
					replaceDoc(t, mem, id, id, doc)
				}
				rep := run(t, cfg)
				if rep.Violations() != 0 {
					t.Fatalf("%d violations: %+v", rep.Violations(), rep.Invariants)
				}
				if got := rep.Result(audit.EventOrder).Checked; got != orders {
					t.Errorf("event-order checked %d, want %d", got, orders)
				}
				mu.Lock()
				defer mu.Unlock()
				for k, v := range tt.want {
					if n[k] != v {
						t.Errorf("%s: %d requests, want %d (all: %v)", k, n[k], v, n)
					}
				}
				// The feed: one read per page, one empty read per range, once
				// its ranges.
				if want := rep.Pages + 2; n["orders feed"] != want || n["orders ranges"] != 1 {
					t.Errorf("feed reads %d and range listings %d, want %d (pages %d + 2 ranges' ends) and 1", n["orders feed"], n["orders ranges"], want, rep.Pages)
				}
				total := 0
				for _, v := range n {
					total += v
				}
				t.Logf("%d requests for %d orders (%d documents, %d pages): %.2f per order; %v", total, orders, rep.Documents, rep.Pages, float64(total)/orders, n)
			})
		}
	}
}

// TestAudit_EventsBeyondThePendingBoundAreStillChecked: more events
// without their order than the audit keeps waiting for their order (10,000)
// are all reported, those beyond the bound by a point read at once, the
// others when their range ends.
func TestAudit_EventsBeyondThePendingBoundAreStillChecked(t *testing.T) {
	const ghosts = 10_050
	mem := memstore.New("/orderId")
	feed := mem.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 1, Seed: 1})
	n := map[string]int{}
	c := &counting{c: mem, f: feed, name: "orders", mu: &sync.Mutex{}, n: n}
	at := time.Now().UTC()
	for i := range ghosts {
		wr := newWrite(fmt.Sprintf("ghost-%05d", i), 500, at)
		createDoc(t, mem, wr.Order.OrderID, wr.Event.ID, wr.Event)
	}
	rep := run(t, audit.Config{Orders: c, Feed: c, PageSize: 1000, MaxIDs: 1})
	if r := rep.Result(audit.EventOrder); r.Checked != ghosts || r.Violations != ghosts {
		t.Errorf("event-order checked %d with %d violations, want %d and %d", r.Checked, r.Violations, ghosts, ghosts)
	}
	if n["orders point"] != ghosts {
		t.Errorf("%d point reads, want %d: one per event whose order the scan never met", n["orders point"], ghosts)
	}
}
