package cosmosstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// feedGateway is a hand-written fake of the Cosmos DB gateway's change feed,
// enough for azcosmos v1.5.0's ReadFeedRanges and ReadChangeFeed: the
// account, the container (for its resource id), the partition key ranges
// (read by the SDK as their own change feed, until 304) and the documents'
// change feed of one physical range (A-IM: Incremental Feed,
// x-ms-documentdb-partitionkeyrangeid, If-None-Match = the range's last
// ETag, 304 Not Modified when nothing changed). Its ETags are log sequence
// numbers, shared by a range and the children it splits into, as Cosmos DB's
// are. Each document carries an "epk" field, the effective partition key the
// test assigns it, which decides its range. It stands for Cosmos DB's wire
// protocol as the SDK source reads it, not for the service's behaviour.
type feedGateway struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	ranges   []fakeRange
	rangeGen int
	lsn      int
	docs     map[string]fakeDoc // id -> latest version
	requests []feedRequest
	fail     []int // statuses to answer the next change feed reads with
	// others is the x-ms-cosmos-priority-level header of every request
	// that is not a change feed read, as "METHOD path: value".
	others []string
}

type fakeRange struct {
	ID, Min, Max string
	Parents      []string
}

type fakeDoc struct {
	epk  string
	lsn  int
	body string
}

// feedRequest is what the SDK sent in one change feed read.
type feedRequest struct {
	aIM, rangeID, ifNoneMatch, maxItems string
	priority                            string // x-ms-cosmos-priority-level
	status                              int
}

func newFeedGateway(t *testing.T) *feedGateway {
	g := &feedGateway{t: t, docs: map[string]fakeDoc{},
		ranges: []fakeRange{{ID: "0", Min: "", Max: "80"}, {ID: "1", Min: "80", Max: "FF"}}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

// write stores a new version of document id in effective partition key epk.
func (g *feedGateway) write(id, epk string, v int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lsn++
	body := fmt.Sprintf(`{"id":%q,"orderId":%q,"type":"event","eventType":"OrderAccepted","v":%d,"_lsn":%d,"_rid":"x","_ts":1}`, id, id, v, g.lsn)
	g.docs[id] = fakeDoc{epk: epk, lsn: g.lsn, body: body}
}

// split replaces range id with two children split at mid.
func (g *feedGateway) split(id, mid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []fakeRange
	for _, r := range g.ranges {
		if r.ID != id {
			out = append(out, r)
			continue
		}
		n := len(g.ranges) + g.rangeGen + 1
		out = append(out, fakeRange{ID: strconv.Itoa(n), Min: r.Min, Max: mid, Parents: []string{id}},
			fakeRange{ID: strconv.Itoa(n + 1), Min: mid, Max: r.Max, Parents: []string{id}})
	}
	g.ranges = out
	g.rangeGen += 2
}

func (g *feedGateway) sent() []feedRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]feedRequest(nil), g.requests...)
}

func in(epk string, r fakeRange) bool {
	max := r.Max
	if max == "" {
		max = "FF"
	}
	return epk >= r.Min && epk < max
}

func (g *feedGateway) serve(w http.ResponseWriter, r *http.Request) {
	const coll = "/dbs/orders/colls/orders"
	w.Header().Set("Content-Type", "application/json")
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Header.Get("A-IM") == "" || r.URL.Path != coll+"/docs" {
		g.others = append(g.others, r.Method+" "+r.URL.Path+": "+r.Header.Get("x-ms-cosmos-priority-level"))
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/":
		loc := []map[string]string{{"name": "local", "databaseAccountEndpoint": g.srv.URL + "/"}}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "fake", "writableLocations": loc, "readableLocations": loc,
			"userConsistencyPolicy": map[string]string{"defaultConsistencyLevel": "Session"}})
	case r.Method == http.MethodGet && r.URL.Path == coll:
		_, _ = fmt.Fprint(w, `{"id":"orders","_rid":"rid-orders","partitionKey":{"paths":["/orderId"],"kind":"Hash","version":2}}`)
	case r.Method == http.MethodGet && r.URL.Path == coll+"/pkranges":
		etag := fmt.Sprintf(`"pk%d"`, g.rangeGen)
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"_rid": "rid-orders", "PartitionKeyRanges": g.rangesJSON(), "_count": len(g.ranges)})
	case r.Method == http.MethodGet && r.URL.Path == coll+"/docs" && r.Header.Get("A-IM") != "":
		g.serveFeed(w, r)
	default:
		g.t.Errorf("feed gateway: unexpected request %s %s", r.Method, r.URL)
		http.Error(w, "unexpected", http.StatusNotImplemented)
	}
}

func (g *feedGateway) rangesJSON() []map[string]any {
	var out []map[string]any
	for _, r := range g.ranges {
		m := map[string]any{"id": r.ID, "_rid": "rid-orders", "minInclusive": r.Min, "maxExclusive": r.Max}
		if r.Parents != nil {
			m["parents"] = r.Parents
		}
		out = append(out, m)
	}
	return out
}

func (g *feedGateway) serveFeed(w http.ResponseWriter, r *http.Request) {
	req := feedRequest{aIM: r.Header.Get("A-IM"), rangeID: r.Header.Get("x-ms-documentdb-partitionkeyrangeid"),
		ifNoneMatch: r.Header.Get("If-None-Match"), maxItems: r.Header.Get("x-ms-max-item-count"),
		priority: r.Header.Get("x-ms-cosmos-priority-level")}
	answer := func(status int) {
		req.status = status
		g.requests = append(g.requests, req)
	}
	if len(g.fail) > 0 {
		status := g.fail[0]
		g.fail = g.fail[1:]
		answer(status)
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, `{"code":"TooManyRequests","message":"fake"}`)
		return
	}
	var rg *fakeRange
	for i := range g.ranges {
		if g.ranges[i].ID == req.rangeID {
			rg = &g.ranges[i]
		}
	}
	if rg == nil { // split away: Gone, PartitionKeyRangeGone
		answer(http.StatusGone)
		w.Header().Set("x-ms-substatus", "1002")
		w.WriteHeader(http.StatusGone)
		_, _ = fmt.Fprint(w, `{"code":"Gone","message":"partition key range is gone"}`)
		return
	}
	from := 0
	if req.ifNoneMatch != "" {
		n, err := strconv.Atoi(strings.Trim(req.ifNoneMatch, `"`))
		if err != nil {
			g.t.Errorf("feed gateway: If-None-Match %q is not an ETag it issued", req.ifNoneMatch)
		}
		from = n
	}
	max := 100
	if n, err := strconv.Atoi(req.maxItems); err == nil && n > 0 {
		max = n
	}
	var page []fakeDoc
	for _, d := range g.docs {
		if d.lsn > from && in(d.epk, *rg) {
			page = append(page, d)
		}
	}
	sortByLSN(page)
	if len(page) > max {
		page = page[:max]
	}
	if len(page) == 0 {
		answer(http.StatusNotModified)
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, from))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	answer(http.StatusOK)
	w.Header().Set("ETag", fmt.Sprintf(`"%d"`, page[len(page)-1].lsn))
	w.Header().Set("x-ms-request-charge", "2.5")
	bodies := make([]string, len(page))
	for i, d := range page {
		bodies[i] = d.body
	}
	_, _ = fmt.Fprintf(w, `{"_rid":"rid-orders","Documents":[%s],"_count":%d}`, strings.Join(bodies, ","), len(page))
}

func sortByLSN(ds []fakeDoc) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].lsn < ds[j-1].lsn; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

func feedIDs(t *testing.T, docs [][]byte) []string {
	t.Helper()
	var ids []string
	for _, d := range docs {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(d, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	return ids
}

func TestChangeFeed_FakeGateway_RangesContinuationsAnd304(t *testing.T) {
	g := newFeedGateway(t)
	s := storeFor(t, g.srv.URL+"/", noRetries())
	f := s.ChangeFeed()
	ctx := context.Background()
	ranges, err := f.FeedRanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ranges, ",") != "-80,80-FF" {
		t.Fatalf("ranges = %v", ranges)
	}
	g.write("a", "10", 1)
	g.write("b", "90", 1)
	g.write("c", "20", 1)
	g.write("a", "10", 2) // a written twice: once, in its latest version

	docs, cont, err := f.ReadChanges(ctx, ranges[0], "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if ids := feedIDs(t, docs); strings.Join(ids, ",") != "c,a" || !strings.Contains(string(docs[1]), `"v":2`) {
		t.Fatalf("first range: %s", docs)
	}
	if cont == "" {
		t.Fatal("no continuation")
	}
	first := g.sent()[0]
	if first.aIM != "Incremental Feed" || first.rangeID != "0" || first.ifNoneMatch != "" || first.maxItems != "10" {
		t.Errorf("first change feed request %+v: want A-IM Incremental Feed, range 0, no If-None-Match, max 10", first)
	}

	// Nothing new: 304, no documents, a continuation that still works.
	docs, cont2, err := f.ReadChanges(ctx, ranges[0], cont, 10)
	if err != nil || len(docs) != 0 || cont2 == "" {
		t.Fatalf("after 304: %d docs, continuation %q, err %v", len(docs), cont2, err)
	}
	last := g.sent()[len(g.sent())-1]
	if last.status != http.StatusNotModified || last.ifNoneMatch != `"4"` || last.rangeID != "0" {
		t.Errorf("re-read %+v: want If-None-Match \"4\" on range 0, answered 304", last)
	}
	g.write("c", "20", 2)
	docs, _, err = f.ReadChanges(ctx, ranges[0], cont2, 10)
	if err != nil || strings.Join(feedIDs(t, docs), ",") != "c" {
		t.Fatalf("after another write: %s, %v", docs, err)
	}
	// The other range is read on its own physical range.
	docs, _, err = f.ReadChanges(ctx, ranges[1], "", 10)
	if err != nil || strings.Join(feedIDs(t, docs), ",") != "b" || g.sent()[len(g.sent())-1].rangeID != "1" {
		t.Fatalf("second range: %s, %v, %+v", docs, err, g.sent()[len(g.sent())-1])
	}
	if s.RequestCharge() <= 0 {
		t.Errorf("request charge %v not counted", s.RequestCharge())
	}
}

// After a split, a continuation of the parent range goes on through the
// children from where it stopped: the SDK expands it, so the relay's lease
// of a range named before the split keeps covering its documents.
func TestChangeFeed_FakeGateway_ContinuationSurvivesASplit(t *testing.T) {
	g := newFeedGateway(t)
	s := storeFor(t, g.srv.URL+"/", noRetries())
	f := s.ChangeFeed()
	ctx := context.Background()
	g.write("a", "10", 1)
	g.write("b", "60", 1)
	_, cont, err := f.ReadChanges(ctx, "-80", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	g.split("0", "40")
	g.write("c", "10", 1) // lands in the left child
	g.write("d", "60", 1) // lands in the right child
	seen := map[string]int{}
	for range 6 {
		docs, next, err := f.ReadChanges(ctx, "-80", cont, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range feedIDs(t, docs) {
			seen[id]++
		}
		cont = next
	}
	if seen["c"] != 1 || seen["d"] != 1 || seen["a"] != 0 || seen["b"] != 0 {
		t.Errorf("after the split the parent's continuation read %v; want c and d once, nothing read before", seen)
	}
	var gone bool
	for _, r := range g.sent() {
		gone = gone || r.status == http.StatusGone
	}
	if !gone {
		t.Error("the fake never answered 410: the split was not exercised")
	}
}

func TestChangeFeed_FakeGateway_Failures(t *testing.T) {
	g := newFeedGateway(t)
	s := storeFor(t, g.srv.URL+"/", noRetries())
	f := s.ChangeFeed()
	ctx := context.Background()
	g.mu.Lock()
	g.fail = []int{http.StatusTooManyRequests}
	g.mu.Unlock()
	_, _, err := f.ReadChanges(ctx, "-80", "", 10)
	var ce *cosmosstore.Error
	if !errors.Is(err, idempotent.ErrTransient) || !errors.As(err, &ce) || ce.StatusCode != 429 || ce.Op != "read change feed" {
		t.Errorf("429: err = %v, want a transient *Error", err)
	}
	if _, _, err := f.ReadChanges(ctx, "-80", "not-a-token", 10); err == nil || !strings.Contains(err.Error(), "continuation") {
		t.Errorf("a foreign continuation: err = %v; the SDK would silently start the range over", err)
	}
	if _, _, err := f.ReadChanges(ctx, "nodash", "", 10); err == nil {
		t.Error("a malformed feed range was accepted")
	}
}

// countingTopic is a relay.Sender that counts the MessageIds it was sent.
type countingTopic struct{ ids map[string]int }

type countingBatch struct{ msgs []*azservicebus.Message }

func (b *countingBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	b.msgs = append(b.msgs, m)
	return nil
}
func (b *countingBatch) NumMessages() int32 { return int32(len(b.msgs)) }

func (c *countingTopic) NewBatch(context.Context) (relay.Batch, error) { return &countingBatch{}, nil }
func (c *countingTopic) SendBatch(_ context.Context, b relay.Batch) error {
	for _, m := range b.(*countingBatch).msgs {
		c.ids[*m.MessageID]++
	}
	return nil
}

// The relay runs on the adapter as on the model: its feed range names make
// legal lease ids, and its checkpoints are the SDK's continuation tokens.
func TestChangeFeed_FakeGateway_RelayPublishesThroughTheSDK(t *testing.T) {
	g := newFeedGateway(t)
	s := storeFor(t, g.srv.URL+"/", noRetries())
	leases := memstore.New("/orderId")
	topic := &countingTopic{ids: map[string]int{}}
	// memstore.New partitions on /orderId: the leases keep their id there.
	r, err := relay.New(s.ChangeFeed(), leases, topic, relay.Options{Name: "orderrelay", Owner: "a",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LeasePartitionKeyPath: order.OutboxLeasePartitionKeyPath})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		g.write(order.EventID(fmt.Sprintf("ord-%d", i)), []string{"10", "90"}[i%2], 1)
	}
	for range 3 {
		if err := r.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(topic.ids) != 5 {
		t.Fatalf("published %v, want the 5 events once", topic.ids)
	}
	for id, n := range topic.ids {
		if n != 1 {
			t.Errorf("%s sent %d times", id, n)
		}
	}
	if owned := r.Owned(); strings.Join(owned, ",") != "-80,80-FF" {
		t.Errorf("owned %v", owned)
	}
	body, _, err := leases.ReadDocument(context.Background(), relay.LeaseID("orderrelay", "-80"), relay.LeaseID("orderrelay", "-80"))
	if err != nil || !strings.Contains(string(body), `\"continuation\"`) {
		t.Errorf("lease of -80: %s, %v; want the SDK's composite token as its checkpoint", body, err)
	}
}

var _ relay.ChangeFeed = (*cosmosstore.ChangeFeed)(nil)
