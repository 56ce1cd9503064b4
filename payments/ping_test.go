package payments_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// Ping is a circuit breaker's probe: one GET /healthz, no retry; a service
// that does not answer 200 is unavailable.
func TestClientPing(t *testing.T) {
	var calls int
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		calls++
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		paymentservice.NewService(nil).ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping of a healthy service = %v", err)
	}
	healthy = false
	err = c.Ping(ctx)
	if err == nil {
		t.Fatal("Ping of a service answering 503 = nil")
	}
	if calls != 2 {
		t.Errorf("Ping made %d requests for 2 calls: it must not retry", calls)
	}
	srv.Close()
	if err := c.Ping(ctx); !errors.Is(err, payments.ErrUnavailable) {
		t.Errorf("Ping of a closed service = %v, want ErrUnavailable", err)
	}
}
