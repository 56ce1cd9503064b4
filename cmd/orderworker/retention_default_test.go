package main

import (
	"context"
	"flag"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// defaultConfig returns the worker's configuration with only what it
// requires set, and a payments service.
func defaultConfig(t *testing.T) config {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseConfig(fs, nil, envOf(map[string]string{
		"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "COSMOS_ENDPOINT": "https://x.documents.azure.com:443/",
		"PAYMENTS_URL": "http://127.0.0.1:8090",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The worker's default key retention is the payment step's safe
// assumption, order.DefaultPaymentKeyRetention (24 hours), not the 30 days
// the reference payments service keeps: a real provider may keep keys for
// only 24 hours, and assuming more repeats a forgotten key.
func TestPaymentKeyRetentionDefaultsToTheSafeValue(t *testing.T) {
	c := defaultConfig(t)
	if c.PaymentsKeyRetention != order.DefaultPaymentKeyRetention {
		t.Errorf("PAYMENTS_KEY_RETENTION defaults to %v, want order.DefaultPaymentKeyRetention, %v", c.PaymentsKeyRetention, order.DefaultPaymentKeyRetention)
	}
	if got := c.paymentOptions(payments.Gateway{}, "w1").KeyRetention; got != order.DefaultPaymentKeyRetention {
		t.Errorf("the payment step assumes a key retention of %v, want %v", got, order.DefaultPaymentKeyRetention)
	}
}

// failCompletedMark is memstore whose first write that marks a payment
// record completed fails, as when the store is unreachable just after the
// capture: the claim is left in progress.
type failCompletedMark struct {
	*memstore.Store
	once sync.Once
}

func (s *failCompletedMark) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	fail := false
	if strings.Contains(string(d.Body), `"state":"completed"`) {
		s.once.Do(func() { fail = true })
	}
	if fail {
		return "", idempotent.ErrTransient
	}
	return s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
}

// With the worker's default options, a payments service that keeps keys for
// 24 hours is never charged twice: the capture succeeds but its completed
// mark fails, leaving the claim in progress, and the message is resubmitted
// 48 hours later, after the service forgot the key. A worker that assumed
// the reference service's 30 days would capture again blindly with the
// forgotten key, a second charge; on the safe default it looks the payment
// up and completes the record without a call.
func TestDefaultKeyRetentionNeverChargesTwice(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: 24 * time.Hour, Now: clock})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	client, err := payments.NewClient(srv.URL, &payments.ClientOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &failCompletedMark{Store: memstore.New("/orderId")}
	c := defaultConfig(t)
	opts := c.paymentOptions(payments.Gateway{Client: client}, "w1")
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	p := order.NewProcessor(s, clock, order.WithDocuments(s), order.WithPaymentOptions(opts))

	o := ordergen.New(1, "ret").Order(0)
	body := ordergen.Body(o, now, "")
	m := idempotent.Message{ID: o.OrderID, Body: body, SequenceNumber: 1, DeliveryCount: 10}
	if r := p.Process(ctx, m); r.Outcome != idempotent.Transient {
		t.Fatalf("the delivery whose completed mark fails: %v %q (%s), want a retry", r.Outcome, r.Reason, r.Description)
	}
	if svc.Charges() != 1 {
		t.Fatalf("the service charged %d times, want 1", svc.Charges())
	}
	// The last delivery failed: the message is dead-lettered with its claim
	// in progress, and an operator resubmits it 48 hours later.
	mu.Lock()
	now = now.Add(48 * time.Hour)
	mu.Unlock()
	r := p.Process(ctx, idempotent.Message{ID: o.OrderID, Body: body, SequenceNumber: 2, DeliveryCount: 1})
	if r.Outcome != idempotent.Duplicate {
		t.Errorf("resubmission 48 hours later: %v %q (%s), want a duplicate completed by a lookup", r.Outcome, r.Reason, r.Description)
	}
	if got := svc.Charges(); got != 1 {
		t.Errorf("the service charged %d times, want 1: the worker's default key retention (%v) assumed more than the service keeps (24h)", got, opts.KeyRetention)
	}
}
