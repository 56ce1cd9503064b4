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
// capture answers 503 before its key is claimed, so nothing is charged, and
// so does the probe that asks whether a capture would go through, while the
// health endpoint and the ledger lookup answer; once it ends, the probe
// answers 204 and the same key charges once.
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
	if a := probe(t, c, srv.URL, "", ""); a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "2" {
		t.Errorf("probe during the outage: %d %v Retry-After %q, want 503 with Retry-After 2, as a capture", a.status, a.err, a.header.Get("Retry-After"))
	}
	if a := get(t, c, srv.URL, "/healthz"); a.status != http.StatusOK {
		t.Errorf("GET /healthz during the outage: %d %v, want 200: the service itself runs", a.status, a.err)
	}
	client, err := payments.NewClient(srv.URL, &payments.ClientOptions{HTTPClient: c, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := client.Lookup(context.Background(), "ord-1"); err != nil || len(ps) != 0 {
		t.Errorf("lookup during the outage: %v %v, want an answer with no payment", ps, err)
	}
	if svc.Charges() != 0 {
		t.Fatalf("%d charges during the outage, want none", svc.Charges())
	}
	end()
	if a := probe(t, c, srv.URL, "", ""); a.status != http.StatusNoContent {
		t.Errorf("probe after the outage: %d %v, want 204", a.status, a.err)
	}
	a := post(t, c, srv.URL, "capture:ord-1", "application/json", validBody)
	if a.status != http.StatusCreated || svc.ChargesFor("ord-1") != 1 {
		t.Errorf("capture after the outage: %d, %d charges; want 201 and one charge", a.status, svc.ChargesFor("ord-1"))
	}
}
