package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// get sends one GET to base+path.
func get(t *testing.T, c *http.Client, base, path string) answer {
	t.Helper()
	resp, err := c.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

// The service forgets a key after its retention, on its own clock, but never
// a payment: the ledger lookup lists the order's payments before and after
// the key expired, and an empty list for an order never charged.
func TestServiceLedgerOutlivesKeys(t *testing.T) {
	const retention = time.Hour
	clk := newClock()
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: retention, Now: clk.Now})
	srv, _ := serve(t, svc)
	c := srv.Client()
	list := func(orderID string) payments.PaymentList {
		t.Helper()
		a := get(t, c, srv.URL, "/payments?orderId="+orderID)
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("lookup of %s: %d %s", orderID, a.status, a.body)
		}
		var l payments.PaymentList
		if err := json.Unmarshal([]byte(a.body), &l); err != nil || l.Payments == nil {
			t.Fatalf("lookup body %q: %v, want a list (empty, not null)", a.body, err)
		}
		return l
	}

	first := decodePayment(t, post(t, c, srv.URL, "capture:ord-1", "", validBody).body)
	clk.Advance(retention) // the key is forgotten now
	if l := list("ord-1"); len(l.Payments) != 1 || l.Payments[0] != first || l.OrderID != "ord-1" {
		t.Errorf("after the key expired: %+v, want the first payment %+v", l, first)
	}
	second := post(t, c, srv.URL, "capture:ord-1", "", validBody)
	if second.status != http.StatusCreated || second.header.Get(payments.HeaderIdempotentReplayed) != "" {
		t.Fatalf("capture after the key expired: %d %s, want a new charge", second.status, second.body)
	}
	if l := list("ord-1"); len(l.Payments) != 2 || l.Payments[0].PaymentID != first.PaymentID || l.Payments[1].PaymentID == first.PaymentID {
		t.Errorf("after a second charge: %+v, want both payments, oldest first", l)
	}
	if l := list("ord-2"); len(l.Payments) != 0 {
		t.Errorf("an order never charged: %+v, want no payment", l)
	}
	if a := get(t, c, srv.URL, "/payments?orderId="+strings.Repeat("x", payments.MaxOrderIDLength+1)); a.status != http.StatusBadRequest {
		t.Errorf("a too long order id: %d, want 400", a.status)
	}
}

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
