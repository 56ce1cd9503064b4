package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// faultyStore is memstore with a hook on ReplaceDocument, which every write
// of a payment record after its creation goes through. The hook runs before
// the write; an error from it fails the write, which then changes nothing.
type faultyStore struct {
	*memstore.Store
	replace func(ctx context.Context, d idempotent.Document) error
	read    func(id string) // runs before every ReadDocument
}

func (s *faultyStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	if s.read != nil {
		s.read(id)
	}
	return s.Store.ReadDocument(ctx, pk, id)
}

func (s *faultyStore) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	if s.replace != nil {
		if err := s.replace(ctx, d); err != nil {
			return "", err
		}
	}
	return s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
}

var errStoreDown = fmt.Errorf("503 service unavailable: %w", idempotent.ErrTransient)

// failFromCompletedMark fails n record writes, starting with the first write
// that marks a payment record completed: n = 1 fails the completed mark
// alone, n = 2 the completed mark and the release that follows it.
func failFromCompletedMark(n int) func(context.Context, idempotent.Document) error {
	var mu sync.Mutex
	armed := false
	return func(_ context.Context, d idempotent.Document) error {
		mu.Lock()
		defer mu.Unlock()
		if !armed && strings.Contains(string(d.Body), `"state":"completed"`) {
			armed = true
		}
		if armed && n > 0 {
			n--
			return errStoreDown
		}
		return nil
	}
}

// delivery returns delivery dc of the copy seq of the order message body.
func delivery(body string, seq int64, dc uint32) idempotent.Message {
	return idempotent.Message{ID: "ord-1", Body: []byte(body), SequenceNumber: seq, DeliveryCount: dc}
}

// testClock is a hand-set clock shared by the processor and the payments
// service.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// captureOnly hides every method of a gateway but Capture, as a gateway
// without PaymentLookup.
type captureOnly struct{ g order.PaymentGateway }

func (c captureOnly) Capture(ctx context.Context, key string, cp order.Capture) (string, error) {
	return c.g.Capture(ctx, key, cp)
}

// Defect 1: a claim left in progress by a dead-lettered message, resubmitted
// after the payments service forgot its key, must not be captured blindly:
// that would be a second charge. The worker looks the payment up instead,
// and without a lookup it dead-letters the message for reconciliation.
func TestLateResubmissionChargesOnce(t *testing.T) {
	const keyRetention = 24 * time.Hour
	tests := []struct {
		name       string
		lookup     bool // the gateway implements PaymentLookup
		failFirst  bool // the service fails the first capture before charging; else the completed mark fails
		want       idempotent.Outcome
		wantReason string
		wantState  string
	}{
		{"charged, looked up", true, false, idempotent.Duplicate, "", order.PaymentCompleted},
		{"charged, no lookup", false, false, idempotent.Invalid, order.ReasonPaymentNeedsReconciliation, order.PaymentInProgress},
		{"never charged, looked up", true, true, idempotent.Duplicate, "", order.PaymentCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			clk := &testClock{now: fixedNow()}
			var requests atomic.Int32
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: keyRetention, Now: clk.Now,
				Faults: func(paymentservice.FaultRequest) paymentservice.Fault {
					if tt.failFirst && requests.Add(1) == 1 {
						return paymentservice.Fault{Kind: paymentservice.FaultFail}
					}
					return paymentservice.Fault{}
				}})
			srv := httptest.NewServer(svc)
			defer srv.Close()
			client, err := payments.NewClient(srv.URL, &payments.ClientOptions{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			var gw order.PaymentGateway = payments.Gateway{Client: client}
			if !tt.lookup {
				gw = captureOnly{gw}
			}
			s := &faultyStore{Store: memstore.New("/orderId")}
			if !tt.failFirst {
				s.replace = failFromCompletedMark(1)
			}
			p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPayments(gw, time.Minute, "w1"))

			// The last delivery of the first copy: its completed mark fails
			// (or its capture does), and the broker dead-letters the message
			// with the claim in progress.
			if r := p.Process(ctx, delivery(validBody, 1, 10)); r.Outcome != idempotent.Transient {
				t.Fatalf("first copy: %v %s, want a retry", r.Outcome, r.Description)
			}
			if rec := paymentRecord(t, s.Store); rec.State != order.PaymentInProgress {
				t.Fatalf("after the failure the record is %s, want in progress", rec.State)
			}
			// An operator resubmits it 48 hours later, after the service
			// forgot the key.
			clk.Advance(48 * time.Hour)
			r := p.Process(ctx, delivery(validBody, 2, 1))
			if r.Outcome != tt.want || r.Reason != tt.wantReason {
				t.Fatalf("resubmission: %v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if got := svc.Charges(); got != 1 {
				t.Errorf("the service charged %d times, want 1", got)
			}
			rec := paymentRecord(t, s.Store)
			if rec.State != tt.wantState {
				t.Errorf("record %+v, want %s", rec, tt.wantState)
			}
			if tt.wantReason != "" && (!strings.Contains(r.Description, order.PaymentKey("ord-1")) || !strings.Contains(r.Description, order.PaymentInProgress)) {
				t.Errorf("description %q does not carry the key and the record's state", r.Description)
			}
			if tt.wantState == order.PaymentCompleted {
				ps, err := client.Lookup(ctx, "ord-1")
				if err != nil || len(ps) != 1 || ps[0].PaymentID != rec.PaymentID {
					t.Errorf("record completed with %q; the service's ledger has %+v (%v)", rec.PaymentID, ps, err)
				}
			}
		})
	}
}

// lookupGateway is fakeGateway with a ledger lookup that answers found or
// fails with err.
type lookupGateway struct {
	*fakeGateway
	found   []order.CapturedPayment
	err     error
	lookups atomic.Int32
}

func (g *lookupGateway) LookupPayments(context.Context, string) ([]order.CapturedPayment, error) {
	g.lookups.Add(1)
	return g.found, g.err
}

// putRecord rewrites the stored payment record of ord-1.
func putRecord(t *testing.T, s *memstore.Store, change func(*order.PaymentRecord)) {
	t.Helper()
	rec := paymentRecord(t, s)
	change(&rec)
	body, _ := json.Marshal(rec)
	if _, err := s.ReplaceDocument(context.Background(), "ord-1", idempotent.Document{ID: rec.ID, Body: body}, ""); err != nil {
		t.Fatal(err)
	}
}

// Every answer of the lookup of an old claim, and what the worker makes of
// it. The record was created with the order's total, 4498 EUR.
func TestOldClaimIsLookedUp(t *testing.T) {
	transient := fmt.Errorf("503: %w", idempotent.ErrTransient)
	const total = 4498
	tests := []struct {
		name       string
		found      []order.CapturedPayment
		err        error
		legacy     bool // the record has no FirstAttemptAt
		want       idempotent.Outcome
		wantReason string
		wantCalls  int
		wantID     string // the completed record's payment id
	}{
		{"found with the same amount", []order.CapturedPayment{{"pay-9", total, "EUR"}}, nil, false, idempotent.Duplicate, "", 0, "pay-9"},
		{"not found: capture", nil, nil, false, idempotent.Duplicate, "", 1, "pay-1"},
		{"another amount", []order.CapturedPayment{{"pay-9", 100, "EUR"}}, nil, false, idempotent.Invalid, order.ReasonPaymentNeedsReconciliation, 0, ""},
		{"another currency", []order.CapturedPayment{{"pay-9", total, "USD"}}, nil, false, idempotent.Invalid, order.ReasonPaymentNeedsReconciliation, 0, ""},
		{"several payments", []order.CapturedPayment{{"pay-8", total, "EUR"}, {"pay-9", total, "EUR"}}, nil, false, idempotent.Invalid, order.ReasonPaymentNeedsReconciliation, 0, ""},
		{"lookup unavailable", nil, transient, false, idempotent.Transient, order.ReasonPaymentUnavailable, 0, ""},
		{"lookup rejected", nil, fmt.Errorf("400: %w", order.ErrPaymentRejected), false, idempotent.Invalid, order.ReasonPaymentNeedsReconciliation, 0, ""},
		{"legacy record without a first attempt", []order.CapturedPayment{{"pay-9", total, "EUR"}}, nil, true, idempotent.Duplicate, "", 0, "pay-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			clk := &testClock{now: fixedNow()}
			s := memstore.New("/orderId")
			g := &lookupGateway{fakeGateway: newGateway(), found: tt.found, err: tt.err}
			p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPaymentOptions(order.PaymentOptions{
				Gateway: g, Lease: time.Minute, Owner: "w1", KeyRetention: 24 * time.Hour}))
			// A first delivery that created the record and stopped.
			g.fail = func(int) (error, bool) { return transient, false }
			if r := p.Process(ctx, delivery(validBody, 1, 1)); r.Outcome != idempotent.Transient {
				t.Fatalf("setup: %v %s", r.Outcome, r.Description)
			}
			if tt.legacy {
				putRecord(t, s, func(r *order.PaymentRecord) { r.FirstAttemptAt = nil })
			}
			g.fail, g.calls = nil, 0
			if !tt.legacy {
				clk.Advance(24*time.Hour - time.Minute - order.PaymentClockSkew) // exactly the blind-retry age
			}
			r := p.Process(ctx, delivery(validBody, 2, 1))
			if r.Outcome != tt.want || r.Reason != tt.wantReason {
				t.Fatalf("%v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if g.lookups.Load() != 1 || g.calls != tt.wantCalls {
				t.Errorf("%d lookups and %d captures, want 1 and %d", g.lookups.Load(), g.calls, tt.wantCalls)
			}
			rec := paymentRecord(t, s)
			switch {
			case tt.wantID != "" && (rec.State != order.PaymentCompleted || rec.PaymentID != tt.wantID):
				t.Errorf("record %+v, want completed with %s", rec, tt.wantID)
			case tt.wantID == "" && (rec.State != order.PaymentInProgress || !rec.ClaimedAt.IsZero()):
				t.Errorf("record %+v, want in progress and released", rec)
			}
			if tt.wantReason == order.ReasonPaymentNeedsReconciliation && !strings.Contains(r.Description, order.PaymentKey("ord-1")) {
				t.Errorf("description %q does not carry the key", r.Description)
			}
		})
	}
}

// A claim younger than the blind-retry age is captured again with the same
// key, without a lookup: the service still remembers the key.
func TestYoungClaimIsCapturedWithoutLookup(t *testing.T) {
	ctx := t.Context()
	clk := &testClock{now: fixedNow()}
	s := memstore.New("/orderId")
	g := &lookupGateway{fakeGateway: newGateway()}
	p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
	g.fail = func(int) (error, bool) { return context.DeadlineExceeded, true } // charged, answer lost
	p.Process(ctx, delivery(validBody, 1, 1))
	g.fail = nil
	clk.Advance(order.DefaultPaymentKeyRetention - time.Minute - order.PaymentClockSkew - time.Nanosecond)
	if r := p.Process(ctx, delivery(validBody, 2, 1)); r.Outcome != idempotent.Duplicate {
		t.Fatalf("%v %s", r.Outcome, r.Description)
	}
	if g.lookups.Load() != 0 || g.total() != 1 {
		t.Errorf("%d lookups, %d charges; want 0 and 1", g.lookups.Load(), g.total())
	}
	if rec := paymentRecord(t, s); rec.Attempts != 2 || rec.Epoch != 2 {
		t.Errorf("record %+v, want 2 claims in 2 epochs", rec)
	}
}

// Defect 2: one failed completed mark must not make every redelivery inside
// the lease wait: the next delivery of the same copy takes the claim over at
// once, since Service Bus redelivered it only after the lock ended. Another
// copy still waits for the lease, unless the claim was released.
func TestSameCopyRedeliveryTakesOverAtOnce(t *testing.T) {
	tests := []struct {
		name     string
		failures int  // record writes failed from the completed mark on
		released bool // the release after the failed mark succeeded
	}{
		{"completed mark fails, release succeeds", 1, true},
		{"completed mark and release fail", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := &faultyStore{Store: memstore.New("/orderId"), replace: failFromCompletedMark(tt.failures)}
			g := newGateway()
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Hour, "w1"))
			if r := p.Process(ctx, delivery(validBody, 7, 1)); r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonStoreUnavailable {
				t.Fatalf("delivery 1: %v %q (%s), want a store retry", r.Outcome, r.Reason, r.Description)
			}
			rec := paymentRecord(t, s.Store)
			if rec.ClaimedAt.IsZero() != tt.released {
				t.Fatalf("record %+v: released %v, want %v", rec, rec.ClaimedAt.IsZero(), tt.released)
			}
			if !tt.released {
				// The clock has not moved: another copy must wait out the lease.
				if r := p.Process(ctx, delivery(validBody, 8, 1)); r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress {
					t.Fatalf("another copy: %v %q, want PaymentInProgress", r.Outcome, r.Reason)
				}
			}
			// The same copy's next delivery, at once.
			if r := p.Process(ctx, delivery(validBody, 7, 2)); r.Outcome != idempotent.Duplicate {
				t.Fatalf("delivery 2: %v %q (%s), want the payment completed on this delivery", r.Outcome, r.Reason, r.Description)
			}
			rec = paymentRecord(t, s.Store)
			if rec.State != order.PaymentCompleted || rec.Claim.DeliveryCount != 2 || rec.Epoch != 2 {
				t.Errorf("record %+v, want completed by delivery 2 in epoch 2", rec)
			}
			if g.total() != 1 || g.calls != 2 {
				t.Errorf("%d charges in %d calls, want 1 in 2 (the second replayed)", g.total(), g.calls)
			}
		})
	}
}

// gatedGateway is fakeGateway whose calls can be held: entered receives each
// call's number (1, 2, ...) when it starts, and a call whose number has a
// gate waits for it (or for its context) before it charges.
type gatedGateway struct {
	*fakeGateway
	n       atomic.Int32
	entered chan int
	gates   map[int]chan struct{}
}

func (g *gatedGateway) Capture(ctx context.Context, key string, c order.Capture) (string, error) {
	n := int(g.n.Add(1))
	g.entered <- n
	if gate, ok := g.gates[n]; ok {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return g.fakeGateway.Capture(ctx, key, c)
}

// Defect 2, fencing: a delivery whose claim was taken over must not write.
// Its completed mark fails with 412 and changes nothing; it reports success
// only once the record is completed, with its payment.
func TestStaleOwnerIsFenced(t *testing.T) {
	for _, newOwnerDone := range []bool{true, false} {
		t.Run(fmt.Sprintf("new owner completed: %v", newOwnerDone), func(t *testing.T) {
			ctx := t.Context()
			s := memstore.New("/orderId")
			g := &gatedGateway{fakeGateway: newGateway(), entered: make(chan int, 4),
				gates: map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}}
			if newOwnerDone {
				delete(g.gates, 2)
			}
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Hour, "w1"))

			// Delivery 1 claims and hangs in its capture; its lock lapses.
			stale := make(chan idempotent.Result, 1)
			go func() { stale <- p.Process(ctx, delivery(validBody, 7, 1)) }()
			<-g.entered
			// Delivery 2 of the same copy takes the claim over.
			fresh := make(chan idempotent.Result, 1)
			go func() { fresh <- p.Process(ctx, delivery(validBody, 7, 2)) }()
			select {
			case <-g.entered:
			case r := <-fresh:
				// With no gate of its own, delivery 2 may already have
				// returned; it entered its capture first if it took over.
				select {
				case <-g.entered:
					fresh <- r
				default:
					t.Fatalf("delivery 2 did not take the claim over: %v %q (%s)", r.Outcome, r.Reason, r.Description)
				}
			}
			if newOwnerDone {
				if r := <-fresh; r.Outcome != idempotent.Duplicate {
					t.Fatalf("delivery 2: %v %s", r.Outcome, r.Description)
				}
			}
			before := s.Items()

			// The stale delivery's capture returns; its writes are fenced.
			close(g.gates[1])
			r := <-stale
			assertUnchanged(t, before, s.Items())
			if newOwnerDone {
				if r.Outcome != idempotent.Created {
					t.Errorf("stale delivery: %v %s, want success: the record is completed with its payment", r.Outcome, r.Description)
				}
			} else {
				if r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress {
					t.Errorf("stale delivery: %v %q (%s), want a retry: the record is not completed yet", r.Outcome, r.Reason, r.Description)
				}
				if rec := paymentRecord(t, s); rec.State != order.PaymentInProgress || rec.Claim.DeliveryCount != 2 {
					t.Errorf("record %+v, want still held by delivery 2", rec)
				}
				close(g.gates[2])
				if r := <-fresh; r.Outcome != idempotent.Duplicate {
					t.Fatalf("delivery 2: %v %s", r.Outcome, r.Description)
				}
			}
			rec := paymentRecord(t, s)
			if rec.State != order.PaymentCompleted || rec.Claim.DeliveryCount != 2 || g.total() != 1 {
				t.Errorf("record %+v with %d charges, want completed by delivery 2 and 1 charge", rec, g.total())
			}
		})
	}
}

// A stale delivery does not take a claim over from a later delivery of its
// own copy at once: for it, as for another copy, the lease applies.
func TestEarlierDeliveryWaitsForTheLease(t *testing.T) {
	ctx := t.Context()
	clk := &testClock{now: fixedNow()}
	s := memstore.New("/orderId")
	g := newGateway()
	// No fact cache: the completed record is turned back into a claim by
	// hand below, which no component does.
	p := order.NewProcessor(s, clk.Now, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"), order.WithFactCache(0))
	if r := p.Process(ctx, delivery(validBody, 7, 3)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	putRecord(t, s, func(r *order.PaymentRecord) { r.State, r.PaymentID, r.CompletedAt = order.PaymentInProgress, "", nil })
	clk.Advance(time.Minute - time.Nanosecond)
	before := s.Items()
	for _, m := range []idempotent.Message{delivery(validBody, 7, 2), delivery(validBody, 7, 3), delivery(validBody, 8, 9)} {
		if r := p.Process(ctx, m); r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress {
			t.Fatalf("seq %d delivery %d inside the lease: %v %q, want PaymentInProgress", m.SequenceNumber, m.DeliveryCount, r.Outcome, r.Reason)
		}
	}
	assertUnchanged(t, before, s.Items())
	clk.Advance(time.Nanosecond)
	if r := p.Process(ctx, delivery(validBody, 7, 2)); r.Outcome != idempotent.Duplicate || g.total() != 1 {
		t.Fatalf("after the lease: %v %s with %d charges, want the capture completed once", r.Outcome, r.Description, g.total())
	}
}

// Defect 2: different copies of one message (a producer retry, a
// resubmission) processed at the same time charge once. A copy that finds
// another copy's fresh claim waits; the claim's holder completes it.
func TestConcurrentCopiesChargeOnce(t *testing.T) {
	ctx := t.Context()
	s := memstore.New("/orderId")
	g := &gatedGateway{fakeGateway: newGateway(), entered: make(chan int, 64), gates: map[int]chan struct{}{1: make(chan struct{})}}
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Hour, "w1"))

	// Copy 1 holds the claim inside its capture; copy 2 must wait.
	first := make(chan idempotent.Result, 1)
	go func() { first <- p.Process(ctx, delivery(validBody, 1, 1)) }()
	<-g.entered
	if r := p.Process(ctx, delivery(validBody, 2, 1)); r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress {
		t.Fatalf("copy 2 while copy 1 captures: %v %q", r.Outcome, r.Reason)
	}
	close(g.gates[1])
	if r := <-first; r.Outcome != idempotent.Created {
		t.Fatalf("copy 1: %v %s", r.Outcome, r.Description)
	}

	// Then many copies at once, each redelivered until it settles.
	const copies = 8
	s2 := memstore.New("/orderId")
	g2 := newGateway()
	p2 := order.NewProcessor(s2, fixedNow, order.WithDocuments(s2), order.WithPayments(g2, time.Hour, "w1"))
	var wg sync.WaitGroup
	start := make(chan struct{})
	var settled atomic.Int32
	for c := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for dc := uint32(1); dc <= 10_000; dc++ {
				r := p2.Process(ctx, delivery(validBody, int64(c+1), dc))
				switch r.Outcome {
				case idempotent.Created, idempotent.Duplicate:
					settled.Add(1)
					return
				case idempotent.Transient:
				default:
					t.Errorf("copy %d: %v %s", c+1, r.Outcome, r.Description)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if settled.Load() != copies || g2.total() != 1 || g.total() != 1 {
		t.Errorf("%d of %d copies settled, %d and %d charges; want all and 1 each", settled.Load(), copies, g2.total(), g.total())
	}
}

// blockingGateway's Capture waits for its context to end, as a payments
// service that hangs until the handler's deadline.
type blockingGateway struct{}

func (blockingGateway) Capture(ctx context.Context, _ string, _ order.Capture) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// Defect 11: the writes made after the handler's context may have ended
// (the release after a failed capture, the completed mark and the release
// after it) are bounded by a deadline of their own. The store blocks every
// replace until its context ends: without a deadline, Process never returns
// and synctest reports the deadlock.
func TestRecordWritesAfterTheHandlerAreBounded(t *testing.T) {
	tests := []struct {
		name       string
		gateway    order.PaymentGateway
		wantReason string
	}{
		{"release after a capture that timed out", blockingGateway{}, order.ReasonPaymentUnavailable},
		{"completed mark and release", newGateway(), idempotent.ReasonStoreUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var blocked atomic.Int32
				s := &faultyStore{Store: memstore.New("/orderId"), replace: func(ctx context.Context, _ idempotent.Document) error {
					blocked.Add(1)
					<-ctx.Done()
					return ctx.Err()
				}}
				p := order.NewProcessor(s, nil, order.WithDocuments(s), order.WithPayments(tt.gateway, time.Minute, "w1"))
				ctx, cancel := context.WithTimeout(t.Context(), 48*time.Second) // the message timeout
				defer cancel()
				r := p.Process(ctx, delivery(validBody, 1, 1))
				if r.Outcome != idempotent.Transient || r.Reason != tt.wantReason {
					t.Errorf("%v %q (%s), want a retry %q", r.Outcome, r.Reason, r.Description, tt.wantReason)
				}
				if blocked.Load() == 0 {
					t.Error("no record write was attempted")
				}
			})
		})
	}
}

// Defect 3: an order whose total is zero has nothing to capture: no record,
// no call. The payments API rejects a zero amount, so a capture could never
// succeed.
func TestZeroTotalOrderSkipsThePayment(t *testing.T) {
	free := strings.NewReplacer(`"unitPriceMinor": 1999`, `"unitPriceMinor": 0`, `"unitPriceMinor": 500`, `"unitPriceMinor": 0`,
		`"totalMinor": 4498`, `"totalMinor": 0`).Replace(validBody)
	if _, err := order.Decode([]byte(free)); err != nil {
		t.Fatalf("a zero-total order is invalid: %v", err)
	}
	s := memstore.New("/orderId")
	g := newGateway()
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
	for i, want := range []idempotent.Outcome{idempotent.Created, idempotent.Duplicate} {
		if r := p.Process(t.Context(), delivery(free, 1, uint32(i+1))); r.Outcome != want {
			t.Fatalf("delivery %d: %v %q (%s), want %v", i+1, r.Outcome, r.Reason, r.Description, want)
		}
	}
	if _, ok := s.Get("ord-1", order.PaymentRecordID("ord-1")); ok || g.calls != 0 {
		t.Errorf("payment record written (%v) or %d captures, want neither", ok, g.calls)
	}
}

func TestPaymentOptionsValidate(t *testing.T) {
	g := newGateway()
	tests := []struct {
		name string
		o    order.PaymentOptions
		want string // empty: valid
	}{
		{"defaults", order.PaymentOptions{Gateway: g, Lease: time.Minute}, ""},
		{"no gateway", order.PaymentOptions{Lease: time.Minute}, "effect Payment: no downstream"},
		{"no lease", order.PaymentOptions{Gateway: g}, "lease"},
		{"negative retention", order.PaymentOptions{Gateway: g, Lease: time.Minute, KeyRetention: -time.Hour}, "key retention"},
		{"write timeout over the lease", order.PaymentOptions{Gateway: g, Lease: time.Minute, WriteTimeout: time.Minute}, "write timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	if got, want := (order.PaymentOptions{Gateway: g, Lease: time.Minute}).BlindRetryAge(), order.DefaultPaymentKeyRetention-time.Minute-order.PaymentClockSkew; got != want {
		t.Errorf("BlindRetryAge = %v, want %v", got, want)
	}
	// Invalid options make every payment step a retry that names them.
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, 0, "w1"))
	if r := p.Process(t.Context(), msg(validBody)); r.Outcome != idempotent.Transient || !strings.Contains(r.Description, "lease") || g.calls != 0 {
		t.Errorf("%v %s with %d captures, want a retry naming the lease and none", r.Outcome, r.Description, g.calls)
	}
}

// The claim is written in the order's batch, whose response reports its
// ETag, so the creator does not read it back before it captures: a takeover
// in between (this copy's next delivery, when the creator's lock lapsed) is
// fenced at the creator's completed mark, which fails with 412 on the
// batch's ETag. The creator then reports success only if the record is
// completed with its payment; both captures used the same key, so the
// customer is charged once.
func TestTakeoverRightAfterTheBatchIsFenced(t *testing.T) {
	for _, completed := range []bool{true, false} {
		t.Run(fmt.Sprintf("taken over and completed: %v", completed), func(t *testing.T) {
			ctx := t.Context()
			s := &faultyStore{Store: memstore.New("/orderId")}
			g := newGateway()
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Hour, "w1"))
			var first atomic.Bool
			s.replace = func(_ context.Context, d idempotent.Document) error {
				if !first.CompareAndSwap(false, true) {
					return nil
				}
				func() { // delivery 1's completed mark, before it is written
					if completed {
						if r := p.Process(ctx, delivery(validBody, 7, 2)); r.Outcome != idempotent.Duplicate {
							t.Errorf("delivery 2: %v %s", r.Outcome, r.Description)
						}
						return
					}
					putRecord(t, s.Store, func(r *order.PaymentRecord) {
						r.Claim, r.Owner, r.Epoch, r.Attempts = order.PaymentClaim{Worker: "w2", MessageID: "ord-1", SequenceNumber: 7, DeliveryCount: 2}, "w2", 2, 2
					})
				}()
				return nil
			}
			r := p.Process(ctx, delivery(validBody, 7, 1))
			after := s.Items()
			rec := paymentRecord(t, s.Store)
			if completed {
				if r.Outcome != idempotent.Created || rec.Claim.DeliveryCount != 2 || g.total() != 1 {
					t.Errorf("delivery 1: %v (%s), record %+v, %d charges; want success, the record left to delivery 2, 1 charge", r.Outcome, r.Description, rec, g.total())
				}
			} else if r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentInProgress || rec.State != order.PaymentInProgress || g.total() != 1 {
				t.Errorf("delivery 1: %v %q (%s), record %+v, %d charges; want PaymentInProgress, the record left to w2, 1 charge", r.Outcome, r.Reason, r.Description, rec, g.total())
			}
			for _, it := range after {
				if it.ID == order.PaymentRecordID("ord-1") && it.Writes != map[bool]int{true: 3, false: 2}[completed] {
					t.Errorf("payment record written %d times, want only by the batch and the takeover", it.Writes)
				}
			}
		})
	}
}
