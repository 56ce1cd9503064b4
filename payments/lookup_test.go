package payments_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// failingGets answers the first n GET requests with status, then hands every
// request to next.
func failingGets(n int32, status int, next http.Handler) http.Handler {
	var seen atomic.Int32
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && seen.Add(1) <= n {
			fixed(status).ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func TestClientLookup(t *testing.T) {
	ctx := context.Background()
	svc := paymentservice.NewService(nil)
	srv, _ := serve(t, failingGets(2, http.StatusServiceUnavailable, svc))
	c, sl := newClient(t, srv, payments.ClientOptions{})
	p, err := c.Capture(ctx, payments.KeyFor("ord/1?a=b&c#d%"), payments.CaptureRequest{OrderID: "ord/1?a=b&c#d%", AmountMinor: 5, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	// The order id is escaped in the query; 503s are retried.
	ps, err := c.Lookup(ctx, "ord/1?a=b&c#d%")
	if err != nil || len(ps) != 1 || ps[0].PaymentID != p.PaymentID {
		t.Fatalf("Lookup = %+v, %v; want the payment %s", ps, err, p.PaymentID)
	}
	if n := len(sl.Delays()); n != 2 {
		t.Errorf("slept %d times, want 2", n)
	}
	if ps, err := c.Lookup(ctx, "ord-2"); err != nil || len(ps) != 0 {
		t.Errorf("Lookup of an order never charged = %+v, %v; want none", ps, err)
	}
	if _, err := c.Lookup(ctx, ""); !errors.Is(err, payments.ErrRejected) {
		t.Errorf("Lookup of an empty id: %v, want ErrRejected", err)
	}
}

func TestClientLookupGivesUpAndRejectsAForeignAnswer(t *testing.T) {
	ctx := context.Background()
	down, _ := serve(t, fixed(http.StatusServiceUnavailable))
	c, _ := newClient(t, down, payments.ClientOptions{MaxAttempts: 2})
	if _, err := c.Lookup(ctx, "ord-1"); !errors.Is(err, payments.ErrUnavailable) || !payments.IsTransient(err) {
		t.Errorf("Lookup against a 503: %v, want a transient ErrUnavailable", err)
	}
	foreign, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"orderId":"ord-1","payments":[{"paymentId":"pay_1","orderId":"ord-2","amountMinor":1,"currency":"EUR"}]}`))
	}))
	c, _ = newClient(t, foreign, payments.ClientOptions{})
	if ps, err := c.Lookup(ctx, "ord-1"); err == nil || !strings.Contains(err.Error(), "ord-2") {
		t.Errorf("Lookup answered with another order's payment: %+v, %v; want an error", ps, err)
	}
}

func TestGatewayLookupPayments(t *testing.T) {
	ctx := context.Background()
	svc := paymentservice.NewService(nil)
	srv := httptest.NewServer(svc)
	defer srv.Close()
	c, _ := payments.NewClient(srv.URL, &payments.ClientOptions{MaxAttempts: 1})
	g := payments.Gateway{Client: c}
	id, err := g.Capture(ctx, order.PaymentKey("ord-1"), order.Capture{OrderID: "ord-1", AmountMinor: 100, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.LookupPayments(ctx, "ord-1")
	if want := (order.CapturedPayment{PaymentID: id, AmountMinor: 100, Currency: "EUR"}); err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("LookupPayments = %+v, %v; want [%+v]", got, err, want)
	}

	down := httptest.NewServer(fixed(http.StatusServiceUnavailable))
	defer down.Close()
	c, _ = payments.NewClient(down.URL, &payments.ClientOptions{MaxAttempts: 1})
	if _, err := (payments.Gateway{Client: c}).LookupPayments(ctx, "ord-1"); !errors.Is(err, idempotent.ErrTransient) {
		t.Errorf("LookupPayments against a 503: %v, want idempotent.ErrTransient", err)
	}
	if _, err := (payments.Gateway{Client: c}).LookupPayments(ctx, ""); !errors.Is(err, order.ErrPaymentRejected) {
		t.Errorf("LookupPayments of an empty id: %v, want order.ErrPaymentRejected", err)
	}
}
