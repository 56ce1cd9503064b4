package payments_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// BenchmarkClientCapture is a first capture over loopback HTTP: one request,
// one charge.
func BenchmarkClientCapture(b *testing.B) {
	srv := httptest.NewServer(paymentservice.NewService(nil))
	defer srv.Close()
	c, err := payments.NewClient(srv.URL, &payments.ClientOptions{HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := "ord-" + strconv.Itoa(i)
		if _, err := c.Capture(ctx, payments.KeyFor(id), payments.CaptureRequest{OrderID: id, AmountMinor: 3998, Currency: "EUR"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientReplay is a repeated capture over loopback HTTP, answered
// from the idempotency store.
func BenchmarkClientReplay(b *testing.B) {
	srv := httptest.NewServer(paymentservice.NewService(nil))
	defer srv.Close()
	c, err := payments.NewClient(srv.URL, &payments.ClientOptions{HTTPClient: srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"}
	if _, err := c.Capture(ctx, payments.KeyFor("ord-1"), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p, err := c.Capture(ctx, payments.KeyFor("ord-1"), req); err != nil || !p.Replayed {
			b.Fatal(p, err)
		}
	}
}

// serviceRequest returns a capture request for the handler, without a network.
func serviceRequest(key, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	r.Header.Set(payments.HeaderIdempotencyKey, key)
	r.Header.Set("Content-Type", "application/json")
	return r
}

// BenchmarkServiceCapture is the service's own cost of a first capture.
func BenchmarkServiceCapture(b *testing.B) {
	svc := paymentservice.NewService(nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := "ord-" + strconv.Itoa(i)
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, serviceRequest(payments.KeyFor(id), `{"orderId":"`+id+`","amountMinor":3998,"currency":"EUR"}`))
		if w.Code != http.StatusCreated {
			b.Fatal(w.Code, w.Body)
		}
	}
}

// BenchmarkServiceReplay is the service's own cost of a replay.
func BenchmarkServiceReplay(b *testing.B) {
	svc := paymentservice.NewService(nil)
	svc.ServeHTTP(httptest.NewRecorder(), serviceRequest("capture:ord-1", `{"orderId":"ord-1","amountMinor":3998,"currency":"EUR"}`))
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, serviceRequest("capture:ord-1", `{"orderId":"ord-1","amountMinor":3998,"currency":"EUR"}`))
		if w.Code != http.StatusCreated || w.Header().Get(payments.HeaderIdempotentReplayed) != "true" {
			b.Fatal(w.Code, w.Body)
		}
	}
}
