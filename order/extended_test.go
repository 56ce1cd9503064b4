package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// fakeGateway is a payments service that deduplicates on the key, like the
// real one; fail, if set, decides per call whether to fail and whether the
// charge happened first.
type fakeGateway struct {
	mu      sync.Mutex
	charges map[string]int    // key -> real charges
	ids     map[string]string // key -> payment id
	calls   int
	fail    func(call int) (err error, charged bool)
}

func newGateway() *fakeGateway {
	return &fakeGateway{charges: map[string]int{}, ids: map[string]string{}}
}

func (g *fakeGateway) Capture(_ context.Context, key string, c order.Capture) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	var failErr error
	charged := true
	if g.fail != nil {
		failErr, charged = g.fail(g.calls)
	}
	if charged {
		if _, ok := g.ids[key]; !ok {
			g.charges[key]++
			g.ids[key] = fmt.Sprintf("pay-%d", len(g.ids)+1)
		}
	}
	if failErr != nil {
		return "", failErr
	}
	return g.ids[key], nil
}

func (g *fakeGateway) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.charges {
		n += c
	}
	return n
}

func statusMsg(version int64, status string) idempotent.Message {
	body := fmt.Sprintf(`{"orderId":"ord-1","status":%q,"version":%d,"changedAt":"2026-11-30T12:00:00Z"}`, status, version)
	return idempotent.Message{ID: order.StatusMessageID("ord-1", version), Subject: order.SubjectOrderStatusChanged, Body: []byte(body), DeliveryCount: 1}
}

func TestStatusChanges(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))

	if r := p.Process(ctx, statusMsg(2, "paid")); r.Outcome != idempotent.Transient || r.Reason != order.ReasonOrderNotYetCreated {
		t.Fatalf("change before the order = %v %s, want a retry", r.Outcome, r.Reason)
	}
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	steps := []struct {
		m    idempotent.Message
		want idempotent.Outcome
		// the stored state after the step
		status  string
		version int64
	}{
		{statusMsg(3, "shipped"), idempotent.Applied, "shipped", 3}, // out of order: version 3 first
		{statusMsg(2, "paid"), idempotent.Stale, "shipped", 3},      // the older change is a no-op
		{statusMsg(3, "shipped"), idempotent.Stale, "shipped", 3},   // a redelivery too
		{statusMsg(4, "delivered"), idempotent.Applied, "delivered", 4},
	}
	for i, st := range steps {
		r := p.Process(ctx, st.m)
		if r.Outcome != st.want {
			t.Fatalf("step %d: %v (%s), want %v", i, r.Outcome, r.Description, st.want)
		}
		doc, err := order.ReadOrder(ctx, s, "ord-1")
		if err != nil || doc.Status != st.status || doc.Version != st.version {
			t.Fatalf("step %d: stored %s v%d (%v), want %s v%d", i, doc.Status, doc.Version, err, st.status, st.version)
		}
	}
}

func TestStatusChangeInvalid(t *testing.T) {
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	bad := statusMsg(2, "lost")
	wrongID := statusMsg(2, "paid")
	wrongID.ID = "ord-1"
	unknown := msg(validBody)
	unknown.Subject = "OrderRefunded"
	for name, m := range map[string]idempotent.Message{"bad status": bad, "MessageId not per version": wrongID, "unknown subject": unknown} {
		if r := p.Process(context.Background(), m); r.Outcome != idempotent.Invalid {
			t.Errorf("%s: %v, want invalid", name, r.Outcome)
		}
	}
}

// Concurrent status changes of one order: whatever the interleaving, the
// highest version wins and no change is lost to a lost update.
func TestConcurrentStatusChangesKeepHighestVersion(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	p.Process(ctx, msg(validBody))
	var wg sync.WaitGroup
	for v := int64(2); v <= 20; v++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r := p.Process(ctx, statusMsg(v, "shipped"))
				if r.Outcome != idempotent.Transient {
					return
				}
			}
		}()
	}
	wg.Wait()
	if doc, _ := order.ReadOrder(ctx, s, "ord-1"); doc.Version != 20 {
		t.Errorf("stored version %d, want 20", doc.Version)
	}
}

func TestPaymentCapturedOnce(t *testing.T) {
	ctx := context.Background()
	transient := fmt.Errorf("503: %w", idempotent.ErrTransient)
	tests := []struct {
		name   string
		fail   func(call int) (error, bool)
		rounds int // deliveries until done
	}{
		{"no faults", nil, 1},
		{"5xx before charging, then success", func(c int) (error, bool) {
			if c == 1 {
				return transient, false
			}
			return nil, true
		}, 2},
		{"timeout after the charge happened", func(c int) (error, bool) {
			if c == 1 {
				return context.DeadlineExceeded, true
			}
			return nil, true
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			g := newGateway()
			g.fail = tt.fail
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
			var r idempotent.Result
			for i := 1; i <= tt.rounds; i++ {
				m := msg(validBody)
				m.DeliveryCount = uint32(i)
				r = p.Process(ctx, m)
			}
			if r.Outcome != idempotent.Created && r.Outcome != idempotent.Duplicate {
				t.Fatalf("last delivery: %v %s", r.Outcome, r.Description)
			}
			if g.total() != 1 {
				t.Errorf("%d charges, want 1", g.total())
			}
			rec := paymentRecord(t, s)
			if rec.State != order.PaymentCompleted || rec.PaymentID == "" || rec.IdempotencyKey != order.PaymentKey("ord-1") {
				t.Errorf("record = %+v", rec)
			}
			// Every later delivery skips the capture.
			calls := g.calls
			if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Duplicate || g.calls != calls {
				t.Errorf("redelivery after completion: %v, %d more calls", r.Outcome, g.calls-calls)
			}
		})
	}
}

func TestPaymentClaimLease(t *testing.T) {
	ctx := context.Background()
	now := fixedNow()
	clock := func() time.Time { return now }
	s := memstore.New("/orderId")
	g := newGateway()
	// The first delivery crashes between the call and the completed mark:
	// simulate it by a gateway that charges and then never returns control
	// to a live worker, i.e. leave the record in progress by hand.
	// No fact cache: the test turns the completed record back into a
	// claim by hand, which no component does (a completed payment is a
	// fact the cache may remember).
	p := order.NewProcessor(s, clock, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"), order.WithFactCache(0))
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	rec := paymentRecord(t, s)
	rec.State, rec.PaymentID, rec.CompletedAt, rec.ClaimedAt, rec.Owner = order.PaymentInProgress, "", nil, now, "crashed"
	body, _ := json.Marshal(rec)
	if _, err := s.ReplaceDocument(ctx, "ord-1", idempotent.Document{ID: rec.ID, Body: body}, ""); err != nil {
		t.Fatal(err)
	}

	now = now.Add(30 * time.Second) // fresh: someone may still hold it
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress {
		t.Fatalf("fresh claim: %v %s, want a retry", r.Outcome, r.Reason)
	}
	now = now.Add(31 * time.Second) // stale: reclaim and call again with the same key
	if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Duplicate {
		t.Fatalf("stale claim: %v %s", r.Outcome, r.Description)
	}
	if rec := paymentRecord(t, s); rec.State != order.PaymentCompleted || rec.Attempts != 2 {
		t.Errorf("record = %+v, want completed after a reclaim", rec)
	}
	if g.total() != 1 {
		t.Errorf("%d charges, want 1: the same key was replayed", g.total())
	}
}

func TestPaymentRejectedIsDeadLettered(t *testing.T) {
	s := memstore.New("/orderId")
	g := newGateway()
	g.fail = func(int) (error, bool) { return fmt.Errorf("422 key reused: %w", order.ErrPaymentRejected), false }
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
	if r := p.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Invalid || r.Reason != order.ReasonPaymentRejected {
		t.Errorf("%v %s, want invalid PaymentRejected", r.Outcome, r.Reason)
	}
}

func TestConcurrentDeliveriesChargeOnce(t *testing.T) {
	s := memstore.New("/orderId")
	g := newGateway()
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := msg(validBody)
			m.DeliveryCount = uint32(i + 1)
			p.Process(context.Background(), m)
		}()
	}
	wg.Wait()
	if g.total() != 1 {
		t.Errorf("%d charges, want 1", g.total())
	}
}

func paymentRecord(t *testing.T, s *memstore.Store) order.PaymentRecord {
	t.Helper()
	body, _, err := s.ReadDocument(context.Background(), "ord-1", order.PaymentRecordID("ord-1"))
	if err != nil {
		t.Fatal(err)
	}
	var rec order.PaymentRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestInboxConsumersAreIndependent(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	orders := order.NewProcessor(s, fixedNow) // the order document is its own marker
	loyalty := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: 35 * 24 * time.Hour, Now: fixedNow}
	audit := &order.InboxConsumer{Name: "audit", Store: s, MarkerTTL: 35 * 24 * time.Hour, Now: fixedNow}
	type handler interface {
		Process(context.Context, idempotent.Message) idempotent.Result
	}
	for round, want := range []idempotent.Outcome{idempotent.Created, idempotent.Duplicate, idempotent.Duplicate} {
		for name, h := range map[string]handler{"orders": orders, "loyalty": loyalty, "audit": audit} {
			if r := h.Process(ctx, msg(validBody)); r.Outcome != want {
				t.Errorf("round %d, %s: %v (%s), want %v", round, name, r.Outcome, r.Description, want)
			}
		}
	}
	entries := map[string]int{}
	for _, it := range s.Items() {
		var d struct{ Type, Consumer string }
		json.Unmarshal(it.Body, &d)
		if d.Type == order.TypeLoyaltyEntry {
			entries[d.Consumer]++
		}
	}
	if entries["loyalty"] != 1 || entries["audit"] != 1 {
		t.Errorf("loyalty entries by consumer = %v, want one each", entries)
	}
	other := msg(strings.Replace(validBody, `"cust-1"`, `"cust-2"`, 1))
	if r := loyalty.Process(ctx, other); r.Outcome != idempotent.Mismatch {
		t.Errorf("reused id at the inbox consumer: %v", r.Outcome)
	}
}

func TestInboxMarkerExpiryReopensTheWindow(t *testing.T) {
	// Why the retention check exists: once the marker has expired, a late
	// copy is processed again.
	ctx := context.Background()
	now := fixedNow()
	clock := func() time.Time { return now }
	s := memstore.NewWithClock("/orderId", clock)
	c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: clock}
	c.Process(ctx, msg(validBody))
	now = now.Add(time.Hour)
	if r := c.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatalf("after the TTL: %v, want created (a second effect)", r.Outcome)
	}
	h := order.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 10, MessageTimeToLive: time.Hour}
	if err := h.CheckRetention(time.Hour); err == nil {
		t.Error("a one-hour marker TTL passed the retention check for a one-hour message TTL")
	}
}
