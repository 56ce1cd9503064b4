package e2etest_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// TestFeedProxy_ChangeFeedThroughTheSDK: cosmosstore's change feed adapter,
// through the real azcosmos SDK, reads the proxy's change feed of a
// cosmium container: every document once in its latest version, then
// 304 (no documents, the same continuation), then only what changed since,
// while every other request reaches cosmium unchanged.
func TestFeedProxy_ChangeFeedThroughTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := cosmiumtest.Start(t)
	proxy := e2etest.StartFeedProxy(t, srv.Endpoint, srv.Key, "orders", "orders")
	c, err := cosmosstore.NewClientWithKey(proxy.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "orders", "orders"); err != nil {
		t.Fatal(err)
	}
	s, err := cosmosstore.New(c, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	gen := ordergen.New(1, "feed")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			o := gen.Order(i)
			if _, err := order.WriteOrder(ctx, s, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now())); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed := s.ChangeFeed()
	ranges, err := feed.FeedRanges(ctx)
	if err != nil || len(ranges) != 1 {
		t.Fatalf("FeedRanges = %v, %v; want cosmium's one range", ranges, err)
	}
	readAll := func(continuation string) (ids []string, next string) {
		for {
			docs, n, err := feed.ReadChanges(ctx, ranges[0], continuation, 3)
			if err != nil {
				t.Fatal(err)
			}
			if n == "" {
				t.Fatal("no continuation")
			}
			for _, d := range docs {
				var f struct {
					ID  string `json:"id"`
					LSN int64  `json:"_lsn"`
				}
				if err := json.Unmarshal(d, &f); err != nil || f.LSN == 0 {
					t.Fatalf("change %s: %v, want a document with its _lsn", d, err)
				}
				ids = append(ids, f.ID)
			}
			continuation = n
			if len(docs) == 0 {
				return ids, continuation
			}
		}
	}
	write(0, 4)
	ids, next := readAll("")
	slices.Sort(ids)
	want := []string{}
	for i := range 4 {
		id := gen.ID(i)
		want = append(want, id, order.EventID(id))
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("first read: %q, want %q", ids, want)
	}
	if again, n := readAll(next); len(again) != 0 || n != next {
		t.Fatalf("re-read: %q, continuation %q; want nothing and %q", again, n, next)
	}
	write(4, 5)
	if ids, _ := readAll(next); len(ids) != 2 || !slices.Contains(ids, order.EventID(gen.ID(4))) {
		t.Fatalf("after one more order: %q, want its order and its event", ids)
	}
	if reads, modified := proxy.Reads(); reads == 0 || modified == 0 {
		t.Errorf("the proxy answered %d change feed reads, %d with documents", reads, modified)
	}
}

// TestFeedProxy_ReadsIncrementally: the proxy reads in full from cosmium
// only the documents written since its previous read, not the whole
// container at every change feed read: N polls of a feed with 2k documents
// and then k more cost one listing of ids and ETags per poll and 3k
// documents read in all.
func TestFeedProxy_ReadsIncrementally(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := cosmiumtest.Start(t)
	proxy := e2etest.StartFeedProxy(t, srv.Endpoint, srv.Key, "orders", "orders")
	c, err := cosmosstore.NewClientWithKey(proxy.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "orders", "orders"); err != nil {
		t.Fatal(err)
	}
	s, err := cosmosstore.New(c, "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	const orders, polls = 5, 10
	gen := ordergen.New(2, "incremental")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			o := gen.Order(i)
			if _, err := order.WriteOrder(ctx, s, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now())); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed := s.ChangeFeed()
	ranges, err := feed.FeedRanges(ctx)
	if err != nil || len(ranges) != 1 {
		t.Fatalf("FeedRanges = %v, %v; want cosmium's one range", ranges, err)
	}
	continuation, seen := "", 0
	poll := func(n int) {
		for range n {
			docs, next, err := feed.ReadChanges(ctx, ranges[0], continuation, 100)
			if err != nil {
				t.Fatal(err)
			}
			seen, continuation = seen+len(docs), next
		}
	}
	write(0, orders)
	poll(polls / 2)
	write(orders, orders+orders/2)
	poll(polls - polls/2)
	want := 2 * (orders + orders/2) // each order and its event
	if seen != want {
		t.Fatalf("%d polls returned %d changes, want %d", polls, seen, want)
	}
	listings, documents := proxy.CosmiumReads()
	if listings != polls || documents != want {
		t.Errorf("%d polls listed cosmium's documents %d times and read %d in full; want %d times, %d documents", polls, listings, documents, polls, want)
	}
}
