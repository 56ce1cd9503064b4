package e2etest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	s, err := cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	gen := ordergen.New(1, "feed")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			o := gen.Order(i)
			e2etest.WriteOrder(t, s, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now()))
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
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	s, err := cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	const orders, polls = 5, 10
	gen := ordergen.New(2, "incremental")
	write := func(from, to int) {
		for i := from; i < to; i++ {
			o := gen.Order(i)
			e2etest.WriteOrder(t, s, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now()))
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

// TestFeedProxy_PageReadCostsItsPage counts the proxy's work per change
// feed read, exactly, when the writers go through it (as on the local
// stack): with 150 orders (300 documents) in the container, a read of a
// page of 10 visits 10 entries of its change log and asks cosmium for
// nothing but the first read's listing and one query of every document; a
// read at the head does nothing; after one more order, a read fetches and
// visits its 2 documents by id. An order written to cosmium directly is
// found by the next listing of the whole container. Before the log and the
// writes' ids, each page read visited every document the proxy knew (300
// here) and listed the ids and ETags of the whole container, and the first
// read fetched its documents 50 to a query, each query a scan of the
// container in cosmium: with 5,000 orders a first read took minutes.
func TestFeedProxy_PageReadCostsItsPage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cosmium; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := cosmiumtest.Start(t)
	proxy := e2etest.StartFeedProxy(t, srv.Endpoint, srv.Key, "orders", "orders")
	proxy.SetRescan(time.Hour)
	store := func(endpoint string) *cosmosstore.Store {
		c, err := cosmosstore.NewClientWithKey(endpoint, srv.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if err := cosmosstore.CreateDatabaseAndContainer(ctx, c, "orders", "orders", order.PartitionKeyPath); err != nil {
			t.Fatal(err)
		}
		s, err := cosmosstore.New(c, "orders", "orders", order.PartitionKeyPath)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s, direct := store(proxy.Endpoint), store(srv.Endpoint)
	const orders, page = 150, 10
	gen := ordergen.New(3, "paged")
	write := func(s *cosmosstore.Store, i int) {
		o := gen.Order(i)
		e2etest.WriteOrder(t, s, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now()))
	}
	for i := range orders {
		write(s, i)
	}
	feed := s.ChangeFeed()
	ranges, err := feed.FeedRanges(ctx)
	if err != nil || len(ranges) != 1 {
		t.Fatalf("FeedRanges = %v, %v; want cosmium's one range", ranges, err)
	}
	continuation := ""
	// read reads one page and returns its size and the proxy's work for it.
	read := func() (int, e2etest.Work) {
		before := proxy.Work()
		docs, next, err := feed.ReadChanges(ctx, ranges[0], continuation, page)
		if err != nil {
			t.Fatal(err)
		}
		continuation = next
		after := proxy.Work()
		return len(docs), e2etest.Work{Reads: after.Reads - before.Reads, Modified: after.Modified - before.Modified,
			Listings: after.Listings - before.Listings, Listed: after.Listed - before.Listed,
			Fetched: after.Fetched - before.Fetched, Scanned: after.Scanned - before.Scanned}
	}
	for i := range 2 * orders / page {
		n, w := read()
		want := e2etest.Work{Reads: 1, Modified: 1, Scanned: page}
		if i == 0 { // the listing, and one query of every document
			want.Listings, want.Listed, want.Fetched = 1, 2*orders, 2*orders
		}
		if n != page || w != want {
			t.Fatalf("page read %d: %d documents, work %+v; want %d, %+v", i, n, w, page, want)
		}
	}
	if n, w := read(); n != 0 || w != (e2etest.Work{Reads: 1}) {
		t.Fatalf("read at the head: %d documents, work %+v; want none and no work", n, w)
	}
	write(s, orders)
	if n, w := read(); n != 2 || w != (e2etest.Work{Reads: 1, Modified: 1, Fetched: 2, Scanned: 2}) {
		t.Fatalf("read after one more order: %d documents, work %+v; want its 2, fetched by id and visited once", n, w)
	}
	write(direct, orders+1)
	proxy.SetRescan(0)
	if n, w := read(); n != 2 || w != (e2etest.Work{Reads: 1, Modified: 1, Listings: 1, Listed: 2*orders + 4, Fetched: 2, Scanned: 2}) {
		t.Fatalf("read after an order written to cosmium directly: %d documents, work %+v; want its 2, found by a listing", n, w)
	}
}

// TestFeedProxy_ForwardsAWholeAnswerToABody: a request the proxy forwards
// (a query, a batch: a POST with a body) gets cosmium's whole answer even
// when the incoming body is closed as soon as the answer's header is
// written, as net/http's server closes it. net/http's transport reads a
// body of known length once more after sending it, to check that nothing
// is left; the body here holds that read until the body is closed (or 2 s
// have passed): the interleaving that cut off 6 of the 2,046 answers to
// the POSTs of four runs of the audit's cosmium test sent through the
// proxy. Forwarding the incoming body itself, the
// transport then took the failed read for a failed write and closed its
// connection in the middle of the answer.
func TestFeedProxy_ForwardsAWholeAnswerToABody(t *testing.T) {
	answer := strings.Repeat("x", 256<<10)
	cosmium := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Errorf("cosmium read the request body: %v", err)
		}
		_, _ = io.WriteString(w, answer)
	}))
	defer cosmium.Close()
	proxy, err := e2etest.NewFeedProxy(cosmium.URL, "", "orders", "orders")
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetAddr("127.0.0.1:1")

	query := `{"query":"SELECT * FROM c"}`
	body := &closedOnAnswer{r: strings.NewReader(query), closed: make(chan struct{})}
	req := httptest.NewRequest(http.MethodPost, "/dbs/orders/colls/orders/docs", body)
	req.ContentLength = int64(len(query))
	w := &closingRecorder{ResponseRecorder: httptest.NewRecorder(), body: body}
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Errorf("the proxy aborted the answer: %v", v)
			}
		}()
		proxy.ServeHTTP(w, req)
	}()
	if w.Code != http.StatusOK || w.Body.Len() != len(answer) {
		t.Errorf("answer: %d with %d of %d bytes", w.Code, w.Body.Len(), len(answer))
	}
}

// closedOnAnswer is an incoming request body: its bytes, then a read that
// waits until the body is closed (an error: net/http's
// ErrBodyReadAfterClose) or 2 s have passed (the end of the body).
type closedOnAnswer struct {
	r      *strings.Reader
	closed chan struct{}
	once   sync.Once
}

func (b *closedOnAnswer) Read(p []byte) (int, error) {
	if b.r.Len() > 0 {
		return b.r.Read(p)
	}
	select {
	case <-b.closed:
		return 0, http.ErrBodyReadAfterClose
	case <-time.After(2 * time.Second):
		return 0, io.EOF
	}
}

func (b *closedOnAnswer) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// closingRecorder closes the request body when the answer's header is
// written, as net/http's server does for HTTP/1.1 once it has discarded
// what the handler left unread.
type closingRecorder struct {
	*httptest.ResponseRecorder
	body io.Closer
}

func (w *closingRecorder) WriteHeader(code int) {
	w.body.Close()
	w.ResponseRecorder.WriteHeader(code)
}
