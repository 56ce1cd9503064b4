package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// store is what the tests write a world into and audit: memstore.Store or
// cosmosstore.Store.
type store interface {
	idempotent.DocumentStore
	audit.Container
}

// ledger is a fake payments ledger: the charges by order reference.
type ledger struct {
	mu      sync.Mutex
	charges map[string][]order.CapturedPayment
}

func (l *ledger) LookupPayments(ctx context.Context, orderID string) ([]order.CapturedPayment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.charges[orderID]), nil
}

func (l *ledger) charge(orderID string, p order.CapturedPayment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charges[orderID] = append(l.charges[orderID], p)
}

// world is a healthy deployment's store: orders accepted two hours ago,
// each with its event, its completed payment (also in the ledger; the
// last order's payment is still in progress, within the horizon), both
// consumers' markers and entries, one order with an applied status
// change, and relay r1's manifest and leases checkpointed at the feed's
// head.
type world struct {
	s      store
	feed   audit.Feed
	now    time.Time
	ledger *ledger
	orders []string
	ranges []string
}

const worldOrders = 4 // the last one's payment is still in progress

var consumers = []string{"loyalty", "shipping"}

func newOrder(id string, total int64) order.Order {
	return order.Order{OrderID: id, CustomerID: "cust-" + id, Currency: "EUR",
		Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: total}}, TotalMinor: total,
		PlacedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

// completed returns the completed payment record of w's order.
func completed(w order.Write, at time.Time) *order.PaymentRecord {
	o := w.Order
	done := at.Add(time.Second)
	return &order.PaymentRecord{ID: order.PaymentRecordID(o.OrderID), OrderID: o.OrderID, Type: order.TypePayment, State: order.PaymentCompleted,
		IdempotencyKey: order.PaymentKey(o.OrderID), AmountMinor: o.TotalMinor, Currency: o.Currency, RequestHash: o.RequestHash,
		Owner: "worker-1", Claim: order.PaymentClaim{Worker: "worker-1", MessageID: o.OrderID, SequenceNumber: 1, DeliveryCount: 1},
		Epoch: 1, ClaimedAt: at, FirstAttemptAt: &at, Attempts: 1, PaymentID: "pay-" + o.OrderID, CompletedAt: &done}
}

// newWrite returns the write of order id with total, accepted at.
func newWrite(id string, total int64, at time.Time) order.Write {
	o := newOrder(id, total)
	return order.NewWrite(o, id, o.RequestHash(), at)
}

// mustWrite writes w's documents, and the payment record pay if not nil,
// in one batch, as the worker's create does.
func mustWrite(t *testing.T, s idempotent.Store, w order.Write, pay ...*order.PaymentRecord) {
	t.Helper()
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pay {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, idempotent.Document{ID: p.ID, Body: b})
	}
	if _, err := s.CreateBatch(context.Background(), w.PartitionKey(), docs); err != nil {
		t.Fatalf("write order %s: %v", w.Order.OrderID, err)
	}
}

func createDoc(t *testing.T, s idempotent.Store, pk, id string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateBatch(context.Background(), pk, []idempotent.Document{{ID: id, Body: b}}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

func replaceDoc(t *testing.T, s idempotent.DocumentStore, pk, id string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceDocument(context.Background(), pk, idempotent.Document{ID: id, Body: b}, ""); err != nil {
		t.Fatalf("replace %s: %v", id, err)
	}
}

// consume has consumer name process the event of w as the relay delivers
// it, at now.
func consume(t *testing.T, s idempotent.DocumentStore, name string, ev order.AcceptedEvent, at time.Time) {
	t.Helper()
	c, err := order.NewInboxConsumer(name, s, 48*time.Hour, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	res := c.Process(context.Background(), idempotent.Message{ID: ev.ID, Subject: order.EventOrderAccepted, Body: body, DeliveryCount: 1})
	if res.Outcome != idempotent.Created {
		t.Fatalf("consumer %s on %s: %v", name, ev.ID, res)
	}
}

// head returns the continuation of range fr at the feed's head.
func head(t *testing.T, feed audit.Feed, fr string) string {
	t.Helper()
	token := ""
	for {
		docs, next, err := feed.ReadChanges(context.Background(), fr, token, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) == 0 {
			return next
		}
		token = next
	}
}

// keyedLease and keyedManifest are the relay's documents as it stores them
// in the orders container (relay.Options.LeasePartitionKeyPath /orderId):
// with their id, their partition key value, under orderId.
type (
	keyedLease struct {
		relay.Lease
		OrderID string `json:"orderId"`
	}
	keyedManifest struct {
		relay.Manifest
		OrderID string `json:"orderId"`
	}
)

// writeRelay writes relay name's manifest and a lease per range, owned,
// checkpointed at the head of the feed.
func (w *world) writeRelay(t *testing.T, name string) {
	t.Helper()
	m := relay.Manifest{ID: relay.ManifestID(name), Type: relay.TypeManifest, Relay: name, FeedRanges: w.ranges, CreatedAt: w.now}
	createDoc(t, w.s, m.ID, m.ID, keyedManifest{m, m.ID})
	for _, fr := range w.ranges {
		id := relay.LeaseID(name, fr)
		l := relay.Lease{ID: id, Type: relay.TypeLease, Relay: name, FeedRange: fr, Owner: name + "-a",
			ExpiresAt: w.now.Add(time.Minute), Continuation: head(t, w.feed, fr), CheckpointedAt: w.now}
		createDoc(t, w.s, id, id, keyedLease{l, id})
	}
}

func newWorld(t *testing.T, newStore func(*testing.T) (store, audit.Feed)) *world {
	t.Helper()
	s, feed := newStore(t)
	ctx := context.Background()
	w := &world{s: s, feed: feed, now: time.Now().UTC(), ledger: &ledger{charges: map[string][]order.CapturedPayment{}}}
	ranges, err := feed.FeedRanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.ranges = ranges
	accepted := w.now.Add(-2 * time.Hour)
	for i := range worldOrders {
		id := fmt.Sprintf("ord-%d", i)
		wr := newWrite(id, int64(1000+i), accepted)
		pay := completed(wr, accepted)
		if i == worldOrders-1 {
			pay.State, pay.PaymentID, pay.CompletedAt = order.PaymentInProgress, "", nil
		}
		mustWrite(t, s, wr, pay)
		if pay.State == order.PaymentCompleted {
			w.ledger.charge(id, order.CapturedPayment{PaymentID: pay.PaymentID, AmountMinor: wr.Order.TotalMinor, Currency: wr.Order.Currency})
		}
		for _, c := range consumers {
			consume(t, s, c, wr.Event, accepted.Add(time.Minute))
		}
		w.orders = append(w.orders, id)
	}
	// ord-0 was paid: status change version 2, applied as the worker does.
	doc, err := order.ReadOrder(ctx, s, "ord-0")
	if err != nil {
		t.Fatal(err)
	}
	changed := accepted.Add(10 * time.Minute)
	c := order.StatusChange{OrderID: "ord-0", Status: "paid", Version: 2, ChangedAt: changed}
	doc.Status, doc.Version, doc.StatusChangedAt = c.Status, c.Version, &changed
	doc.StatusHashes = map[int64]string{2: c.ContentHash()}
	doc.StatusHashCount = 1
	replaceDoc(t, s, doc.OrderID, doc.ID, doc)
	w.writeRelay(t, "r1")
	return w
}

// config returns the audit's configuration of w.
func (w *world) config() audit.Config {
	cfg := audit.Config{Orders: w.s, Feed: w.feed, Relays: []string{"r1"}, MinMarkerRetention: time.Hour,
		ClaimHorizon: 24 * time.Hour, Payments: true, Ledger: w.ledger, Settle: time.Hour, PageSize: 3, MaxIDs: 1000,
		Now: func() time.Time { return w.now.Add(time.Second) }}
	for _, c := range consumers {
		cfg.Consumers = append(cfg.Consumers, audit.Consumer{Name: c, Store: w.s, MarkerTTL: 48 * time.Hour})
	}
	return cfg
}

// ids returns the ids of r's violations of invariant name, sorted.
func ids(r *audit.Report, name string) []string {
	res := r.Result(name)
	if res == nil {
		return nil
	}
	out := []string{}
	for _, v := range res.First {
		out = append(out, v.ID)
	}
	sort.Strings(out)
	return out
}

// plant is one broken pattern: it breaks w (and may change the audit's
// configuration) and returns the invariant that must catch it and the ids
// it must name.
type plant struct {
	name      string
	invariant string
	plant     func(t *testing.T, w *world, cfg *audit.Config) []string
}

var plants = []plant{
	{"order without its event", audit.OrderEvent, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("lonely", 500, w.now.Add(-2*time.Hour))
		createDoc(t, w.s, "lonely", "lonely", wr.Order)
		return []string{"lonely"}
	}},
	{"event with another request hash", audit.OrderEvent, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("rehash", 500, w.now)
		other := newOrder("other", 1)
		wr.Event.RequestHash = other.RequestHash()
		mustWrite(t, w.s, wr)
		return []string{"rehash"}
	}},
	{"order changed after its hash", audit.OrderEvent, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("tampered", 500, w.now)
		wr.Order.TotalMinor, wr.Event.TotalMinor = 499, 499
		mustWrite(t, w.s, wr)
		return []string{"tampered"}
	}},
	{"event without its order", audit.EventOrder, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("ghost", 500, w.now)
		createDoc(t, w.s, "ghost", wr.Event.ID, wr.Event)
		return []string{order.EventID("ghost")}
	}},
	{"payment for another amount", audit.Payment, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("short", 500, w.now)
		pay := completed(wr, w.now)
		pay.AmountMinor = 400
		mustWrite(t, w.s, wr, pay)
		return []string{"short"}
	}},
	{"old order never paid", audit.Payment, func(t *testing.T, w *world, cfg *audit.Config) []string {
		mustWrite(t, w.s, newWrite("unpaid", 500, w.now.Add(-48*time.Hour)))
		return []string{"unpaid"}
	}},
	{"two charges in the ledger", audit.PaymentLedger, func(t *testing.T, w *world, cfg *audit.Config) []string {
		w.ledger.charge("ord-1", order.CapturedPayment{PaymentID: "pay-twice", AmountMinor: 1001, Currency: "EUR"})
		return []string{"ord-1"}
	}},
	{"claim in progress beyond the horizon", audit.PaymentClaim, func(t *testing.T, w *world, cfg *audit.Config) []string {
		at := w.now.Add(-48 * time.Hour)
		wr := newWrite("stuck", 500, at)
		pay := completed(wr, at)
		pay.State, pay.PaymentID, pay.CompletedAt = order.PaymentInProgress, "", nil
		mustWrite(t, w.s, wr, pay)
		return []string{"stuck"}
	}},
	{"status hash of other content", audit.Status, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("badstatus", 500, w.now)
		at := w.now
		wr.Order.Status, wr.Order.Version, wr.Order.StatusChangedAt = "shipped", 3, &at
		other := order.StatusChange{Status: "cancelled", Version: 3, ChangedAt: at}
		wr.Order.StatusHashes, wr.Order.StatusHashCount = map[int64]string{3: other.ContentHash()}, 1
		mustWrite(t, w.s, wr)
		return []string{"badstatus"}
	}},
	{"version 1 with a status change", audit.Status, func(t *testing.T, w *world, cfg *audit.Config) []string {
		wr := newWrite("v1", 500, w.now)
		wr.Order.Status = "paid"
		mustWrite(t, w.s, wr)
		return []string{"v1"}
	}},
	{"a consumer that got no event", audit.Inbox, func(t *testing.T, w *world, cfg *audit.Config) []string {
		cfg.Consumers = append(cfg.Consumers, audit.Consumer{Name: "billing", Store: w.s, MarkerTTL: 48 * time.Hour})
		var want []string
		for _, id := range w.orders {
			want = append(want, order.EventID(id))
		}
		return want
	}},
	{"an entry without its marker", audit.Inbox, func(t *testing.T, w *world, cfg *audit.Config) []string {
		e := order.LoyaltyEntry{ID: "loyalty-extra", OrderID: "ord-2", Type: order.TypeLoyaltyEntry, Consumer: "loyalty", CustomerID: "c", Points: 10, AwardedAt: w.now}
		createDoc(t, w.s, "ord-2", e.ID, e)
		return []string{"ord-2"}
	}},
	{"a marker without ttl", audit.MarkerTTL, func(t *testing.T, w *world, cfg *audit.Config) []string {
		id := order.InboxMarkerID("loyalty", "ord-1")
		m := map[string]any{"id": id, "orderId": "ord-1", "type": order.TypeInboxMarker, "consumer": "loyalty", "messageId": "ord-1",
			"requestHash": "x", "processedAt": w.now}
		createDoc(t, w.s, "ord-1", id, m)
		return []string{id}
	}},
	{"a marker past its ttl", audit.MarkerTTL, func(t *testing.T, w *world, cfg *audit.Config) []string {
		id := order.InboxMarkerID("shipping", "ord-1")
		m := order.InboxMarker{ID: id, OrderID: "ord-1", Type: order.TypeInboxMarker, Consumer: "shipping", MessageID: "ord-1",
			RequestHash: "x", ProcessedAt: w.now.Add(-3 * time.Hour), TTL: 3600}
		createDoc(t, w.s, "ord-1", id, m)
		return []string{id}
	}},
	{"a relay behind its feed", audit.RelayLag, func(t *testing.T, w *world, cfg *audit.Config) []string {
		var want []string
		for _, fr := range w.ranges {
			id := relay.LeaseID("r1", fr)
			body, _, err := w.s.ReadDocument(context.Background(), id, id)
			if err != nil {
				t.Fatal(err)
			}
			var l relay.Lease
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			l.Continuation = ""
			replaceDoc(t, w.s, id, id, keyedLease{l, id})
			if rangeHasEvents(t, w.feed, fr) {
				want = append(want, id)
			}
		}
		return want
	}},
	{"two relays hold one range", audit.RelayLease, func(t *testing.T, w *world, cfg *audit.Config) []string {
		w.writeRelay(t, "r2")
		cfg.Relays = append(cfg.Relays, "r2")
		var want []string
		for _, fr := range w.ranges {
			want = append(want, relay.LeaseID("r2", fr))
		}
		return want
	}},
	{"a relay that never ran", audit.RelayLease, func(t *testing.T, w *world, cfg *audit.Config) []string {
		cfg.Relays = append(cfg.Relays, "r3")
		return []string{relay.ManifestID("r3")}
	}},
}

func rangeHasEvents(t *testing.T, feed audit.Feed, fr string) bool {
	token := ""
	for {
		docs, next, err := feed.ReadChanges(context.Background(), fr, token, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) == 0 {
			return false
		}
		for _, d := range docs {
			var h struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(d, &h) == nil && h.Type == order.TypeEvent {
				return true
			}
		}
		token = next
	}
}

// plantedMemstore returns the configuration of a memstore world with every
// plant in it but the relay-lag one, which rewrites r1's leases that
// another plant reads.
func plantedMemstore(t *testing.T) audit.Config {
	t.Helper()
	w := newWorld(t, newMemstore)
	cfg := w.config()
	for _, p := range plants {
		if p.invariant == audit.RelayLag {
			continue
		}
		p.plant(t, w, &cfg)
	}
	return cfg
}

// run audits cfg to the end, resuming while it returns a continuation.
func run(t *testing.T, cfg audit.Config) *audit.Report {
	t.Helper()
	rep, err := audit.Run(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// testPlants runs every plant on a fresh world from newStore.
func testPlants(t *testing.T, newStore func(t *testing.T) (store, audit.Feed)) {
	t.Run("clean", func(t *testing.T) {
		w := newWorld(t, newStore)
		rep := run(t, w.config())
		for _, r := range rep.Invariants {
			if r.Violations != 0 || r.NotChecked != "" || r.Checked == 0 {
				t.Errorf("%s: checked %d, %d violations %v, not checked %q; want checked, clean", r.Name, r.Checked, r.Violations, r.First, r.NotChecked)
			}
		}
		if rep.Continuation != "" {
			t.Errorf("continuation %q after a complete audit", rep.Continuation)
		}
	})
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			w := newWorld(t, newStore)
			cfg := w.config()
			want := p.plant(t, w, &cfg)
			sort.Strings(want)
			if len(want) == 0 {
				t.Fatal("the plant names no violation")
			}
			rep := run(t, cfg)
			if got := ids(rep, p.invariant); !slices.Equal(got, want) {
				t.Errorf("%s violations %q, want %q (%v)", p.invariant, got, want, rep.Result(p.invariant).First)
			}
		})
	}
}
