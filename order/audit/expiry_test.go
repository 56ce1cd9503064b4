package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// defaultMarkerTTL is the workers' default WORKER_INBOX_TTL (36 days): the
// deployed markers' time to live.
const defaultMarkerTTL = 36 * 24 * time.Hour

// virtualClock is a clock the test moves.
type virtualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *virtualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// agingWorld is a healthy deployment living through days on a virtual
// clock: every day one order is accepted, paid, relayed and consumed by
// both consumers, whose markers expire after their TTL as the store
// expires them, while their loyalty entries stay.
type agingWorld struct {
	clock  *virtualClock
	s      *memstore.Store
	feed   audit.Feed
	ledger *ledger
	start  time.Time
	ttl    time.Duration
	ranges []string
	orders []string // by day
}

func newAgingWorld(t *testing.T, ttl time.Duration) *agingWorld {
	t.Helper()
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	clock := &virtualClock{t: start}
	s := memstore.NewWithClock("/orderId", clock.Now)
	w := &agingWorld{clock: clock, s: s, feed: s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 2, Seed: 1}),
		ledger: &ledger{charges: map[string][]order.CapturedPayment{}}, start: start, ttl: ttl}
	ranges, err := w.feed.FeedRanges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.ranges = ranges
	m := relay.Manifest{ID: relay.ManifestID("r1"), Type: relay.TypeManifest, Relay: "r1", FeedRanges: ranges, CreatedAt: start}
	createDoc(t, s, m.ID, m.ID, keyedManifest{m, m.ID})
	return w
}

// day lives day d: its order is accepted at the day's start, paid, and
// consumed by every consumer a minute later.
func (w *agingWorld) day(t *testing.T, d int) {
	t.Helper()
	at := w.start.Add(time.Duration(d) * 24 * time.Hour)
	w.clock.Set(at)
	id := fmt.Sprintf("day-%03d", d)
	wr := newWrite(id, int64(1000+d), at)
	pay := completed(wr, at)
	mustWrite(t, w.s, wr, pay)
	w.ledger.charge(id, order.CapturedPayment{PaymentID: pay.PaymentID, AmountMinor: wr.Order.TotalMinor, Currency: wr.Order.Currency})
	w.clock.Set(at.Add(time.Minute))
	for _, c := range consumers {
		consumeTTL(t, w.s, c, wr.Event, w.ttl, w.clock.Now)
	}
	w.orders = append(w.orders, id)
}

// consumeTTL has consumer name process ev with markers of ttl, on clock now.
func consumeTTL(t *testing.T, s idempotent.Store, name string, ev order.AcceptedEvent, ttl time.Duration, now func() time.Time) {
	t.Helper()
	c, err := order.NewInboxConsumer(name, s, ttl, now)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if res := c.Process(context.Background(), idempotent.Message{ID: ev.ID, Subject: order.EventOrderAccepted, Body: body, DeliveryCount: 1}); res.Outcome != idempotent.Created {
		t.Fatalf("consumer %s on %s: %v", name, ev.ID, res)
	}
}

// checkpoint has relay r1 hold every range, checkpointed at the feed's
// head now, as a healthy relay keeps it.
func (w *agingWorld) checkpoint(t *testing.T) {
	t.Helper()
	now := w.clock.Now()
	for _, fr := range w.ranges {
		id := relay.LeaseID("r1", fr)
		l := relay.Lease{ID: id, Type: relay.TypeLease, Relay: "r1", FeedRange: fr, Owner: "r1-a",
			ExpiresAt: now.Add(time.Minute), Continuation: head(t, w.feed, fr), CheckpointedAt: now}
		b, err := json.Marshal(keyedLease{l, id})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.s.ReplaceDocument(context.Background(), id, idempotent.Document{ID: id, Body: b}, "")
		if errors.Is(err, idempotent.ErrNotFound) {
			_, err = w.s.CreateBatch(context.Background(), id, []idempotent.Document{{ID: id, Body: b}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// config is the audit of w as the deployed job runs it: the redelivery
// horizon's claim horizon and minimum retention, the default settle time,
// each consumer's marker TTL.
func (w *agingWorld) config() audit.Config {
	cfg := audit.Config{Orders: w.s, Feed: w.feed, Relays: []string{"r1"}, MinMarkerRetention: 35*24*time.Hour + 12*time.Minute,
		ClaimHorizon: 35*24*time.Hour + 12*time.Minute, Payments: true, Ledger: w.ledger, MaxIDs: 1000, Now: w.clock.Now}
	for _, c := range consumers {
		cfg.Consumers = append(cfg.Consumers, audit.Consumer{Name: c, Store: w.s, MarkerTTL: w.ttl})
	}
	return cfg
}

// auditAt audits w two hours after day d's order (past the settle time).
func (w *agingWorld) auditAt(t *testing.T, d int) *audit.Report {
	t.Helper()
	w.clock.Set(w.start.Add(time.Duration(d)*24*time.Hour + 2*time.Hour))
	w.checkpoint(t)
	return run(t, w.config())
}

// TestAudit_90Days_MarkersExpiredByDesignAreNoViolation: a healthy store
// audited every few days for 90 days with the default marker TTL (36 days)
// reports no violation, though the markers of every order older than the
// TTL are gone and their loyalty entries stay; every invariant is checked
// (payment-claim has no claim in progress to check), and the inbox checks
// of the orders within the TTL go on. Before the audit knew the TTL it
// reported 2 violations on day 36, 10 on day 40 and 108 on day 89 (each
// expired order's entry of each consumer without its marker).
func TestAudit_90Days_MarkersExpiredByDesignAreNoViolation(t *testing.T) {
	w := newAgingWorld(t, defaultMarkerTTL)
	audits := []int{0, 35, 36, 37, 40, 60, 89}
	for d := range 90 {
		w.day(t, d)
		if !slices.Contains(audits, d) {
			continue
		}
		rep := w.auditAt(t, d)
		for _, r := range rep.Invariants {
			// payment-claim checks claims in progress, and every payment
			// of this world completed at once.
			if r.Violations != 0 || r.NotChecked != "" || r.Checked == 0 && r.Name != audit.PaymentClaim {
				t.Errorf("day %d: %s: checked %d, %d violations %v, not checked %q; want checked, clean", d, r.Name, r.Checked, r.Violations, r.First, r.NotChecked)
			}
		}
		// The markers of the orders within the TTL are still required.
		within := min(d+1, 36)
		if got, want := rep.Result(audit.Inbox).Checked, len(consumers)*2*within; got < want {
			t.Errorf("day %d: inbox checked %d, want at least %d (an event and a partition per consumer for each of the %d orders within the TTL)", d, got, want, within)
		}
		t.Logf("day %d: %d documents, %d violations, inbox checked %d", d, rep.Documents, rep.Violations(), rep.Result(audit.Inbox).Checked)
	}
}

// TestAudit_90Days_MissingMarkerWithinItsTTLIsAViolation: on day 89 of
// the aging world, a marker missing for an order within its TTL (day 80's)
// is reported, as the event without its marker and as an entry without
// one, while day 10's markers, gone by design, are not.
func TestAudit_90Days_MissingMarkerWithinItsTTLIsAViolation(t *testing.T) {
	w := newAgingWorld(t, defaultMarkerTTL)
	for d := range 90 {
		w.day(t, d)
	}
	if _, ok := w.s.Get("day-010", order.InboxMarkerID("loyalty", order.EventID("day-010"))); ok {
		t.Fatal("day 10's marker has not expired on day 89")
	}
	if !w.s.Delete("day-080", order.InboxMarkerID("loyalty", order.EventID("day-080"))) {
		t.Fatal("day 80's marker is not there to delete")
	}
	rep := w.auditAt(t, 89)
	want := []string{order.EventID("day-080"), "day-080"}
	slices.Sort(want)
	if got := ids(rep, audit.Inbox); !slices.Equal(got, want) {
		t.Errorf("inbox violations %q, want %q (%v)", got, want, rep.Result(audit.Inbox).First)
	}
	if rep.Violations() != len(want) {
		t.Errorf("%d violations, want %d: %+v", rep.Violations(), len(want), rep.Invariants)
	}
}
