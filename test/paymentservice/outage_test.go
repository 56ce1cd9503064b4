package paymentservice_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// TestAcquirerOutageFailsCapturesOnly: during an acquirer outage every
// capture answers 503 before its key is claimed, so nothing is charged,
// while the health endpoint the client's Ping calls and the ledger lookup
// answer; once it ends, the same key charges once.
func TestAcquirerOutageFailsCapturesOnly(t *testing.T) {
	svc := paymentservice.NewService(nil)
	srv, _ := serve(t, svc)
	c := srv.Client()
	o := paymentservice.AcquirerOutage()
	o.RetryAfter = 1500 * time.Millisecond
	end := svc.SetOutage(o)
	for range 3 {
		a := post(t, c, srv.URL, "capture:ord-1", "application/json", validBody)
		if a.err != nil || a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "2" {
			t.Fatalf("capture during the outage: %d %v Retry-After %q, want 503 with Retry-After 2", a.status, a.err, a.header.Get("Retry-After"))
		}
		decodeProblem(t, a)
	}
	client, err := payments.NewClient(srv.URL, &payments.ClientOptions{HTTPClient: c, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Ping(context.Background()); err != nil {
		t.Errorf("Ping during the outage: %v, want the health endpoint to answer", err)
	}
	if ps, err := client.Lookup(context.Background(), "ord-1"); err != nil || len(ps) != 0 {
		t.Errorf("lookup during the outage: %v %v, want an answer with no payment", ps, err)
	}
	if svc.Charges() != 0 {
		t.Fatalf("%d charges during the outage, want none", svc.Charges())
	}
	end()
	a := post(t, c, srv.URL, "capture:ord-1", "application/json", validBody)
	if a.status != http.StatusCreated || svc.ChargesFor("ord-1") != 1 {
		t.Errorf("capture after the outage: %d, %d charges; want 201 and one charge", a.status, svc.ChargesFor("ord-1"))
	}
}
