package paymentservice_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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
