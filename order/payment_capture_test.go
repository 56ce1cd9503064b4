package order_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// sentCapture is what a capture call saw as it was made: the key's age on
// the Processor's clock, the lookups made before it, and how long its
// context had left (ok false: no deadline).
type sentCapture struct {
	age     time.Duration
	lookups int
	left    time.Duration
	ok      bool
}

// agedGateway is fakeGateway with a lookup that finds nothing, recording
// every capture call with the key's age on clk; onLookup, if set, runs in
// every lookup.
type agedGateway struct {
	*fakeGateway
	clk      *testClock
	first    func() time.Time // the key's first send, from the stored record
	onLookup func()

	mu      sync.Mutex
	lookups int
	sent    []sentCapture
}

func (g *agedGateway) Capture(ctx context.Context, key string, c order.Capture) (string, error) {
	d, ok := ctx.Deadline()
	g.mu.Lock()
	g.sent = append(g.sent, sentCapture{age: g.clk.Now().Sub(g.first()), lookups: g.lookups, left: time.Until(d), ok: ok})
	g.mu.Unlock()
	return g.fakeGateway.Capture(ctx, key, c)
}

func (g *agedGateway) LookupPayments(context.Context, string) ([]order.CapturedPayment, error) {
	if g.onLookup != nil {
		g.onLookup()
	}
	g.mu.Lock()
	g.lookups++
	g.mu.Unlock()
	return nil, nil
}

// A capture is never sent with a key older than the safe age (the
// blind-retry age) without a lookup before it, and its context ends when
// that age, or the retention after the lookup, would pass: the margin the
// payment step keeps (the lease) then covers only a request's way to the
// service, not the store calls, the lookup and the client's retries before
// it. The clock moves inside the store and lookup calls, as a slow store or
// a stalled process moves it, between the age check and the send.
func TestCaptureIsNeverSentWithAKeyOlderThanTheSafeAge(t *testing.T) {
	const (
		lease     = time.Minute
		retention = 24 * time.Hour
	)
	safe := order.PaymentOptions{Lease: lease, KeyRetention: retention}.BlindRetryAge()
	tests := []struct {
		name string
		// age is the key's age when the redelivery starts; stall is how far
		// the clock moves during the takeover write, lookupStall during the
		// lookup.
		age, stall, lookupStall time.Duration
		wantLookups             int
		wantSent                bool
		// wantLeft bounds the capture context's time left: the safe age
		// left at the send, or the retention minus the lease after a
		// lookup.
		wantLeft time.Duration
	}{
		{"young key, no stall", time.Hour, 0, 0, 0, true, safe - time.Hour},
		{"the takeover write passes the safe age", safe - time.Second, 2 * time.Second, 0, 1, true, retention - lease},
		{"old key, looked up", safe, 0, 0, 1, true, retention - lease},
		{"the lookup outlasts the retention", safe, 0, retention, 1, false, 0},
		{"the lookup takes most of the retention", safe, 0, retention - lease - time.Second, 1, true, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			clk := &testClock{now: fixedNow()}
			s := &faultyStore{Store: memstore.New("/orderId")}
			g := &agedGateway{fakeGateway: newGateway(), clk: clk}
			g.first = func() time.Time { return *paymentRecord(t, s.Store).FirstAttemptAt }
			p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPaymentOptions(order.PaymentOptions{
				Gateway: g, Lease: lease, Owner: "w1", KeyRetention: retention}))
			// A first delivery whose capture failed before charging: the
			// claim is released, the key first sent.
			g.fail = func(int) (error, bool) { return fmt.Errorf("503: %w", idempotent.ErrTransient), false }
			if r := p.Process(ctx, delivery(validBody, 1, 1)); r.Outcome != idempotent.Transient {
				t.Fatalf("setup: %v %s", r.Outcome, r.Description)
			}
			g.fail, g.sent, g.lookups = nil, nil, 0

			clk.Advance(tt.age)
			s.replace = func(_ context.Context, d idempotent.Document) error {
				if strings.Contains(string(d.Body), `"epoch":2`) && strings.Contains(string(d.Body), `"state":"in-progress"`) {
					clk.Advance(tt.stall) // the takeover write
				}
				return nil
			}
			g.onLookup = func() { clk.Advance(tt.lookupStall) }
			r := p.Process(ctx, delivery(validBody, 2, 1))

			if g.lookups != tt.wantLookups {
				t.Errorf("%d lookups, want %d", g.lookups, tt.wantLookups)
			}
			if len(g.sent) != map[bool]int{true: 1, false: 0}[tt.wantSent] {
				t.Fatalf("%d capture calls (%v %s), want sent %v", len(g.sent), r.Outcome, r.Description, tt.wantSent)
			}
			if !tt.wantSent {
				if r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentUnavailable {
					t.Errorf("%v %q (%s), want a retry", r.Outcome, r.Reason, r.Description)
				}
				if rec := paymentRecord(t, s.Store); rec.State != order.PaymentInProgress || !rec.ClaimedAt.IsZero() {
					t.Errorf("record %+v, want in progress and released", rec)
				}
				return
			}
			c := g.sent[0]
			if c.lookups == 0 && c.age >= safe {
				t.Errorf("capture sent blindly with a key %v old, the safe age is %v", c.age, safe)
			}
			if !c.ok || c.left > tt.wantLeft {
				t.Errorf("capture context has %v left (deadline %v), want at most %v", c.left, c.ok, tt.wantLeft)
			}
			if r.Outcome != idempotent.Duplicate || g.total() != 1 {
				t.Errorf("%v %s, %d charges; want the order done with one charge", r.Outcome, r.Description, g.total())
			}
		})
	}
}
