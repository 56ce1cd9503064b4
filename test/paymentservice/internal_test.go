package paymentservice

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
)

// The sweep forgets expired keys, so memory follows the keys of the last
// retention period, and keeps keys still in flight.
func TestSweepForgetsExpiredKeys(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := NewService(&ServiceOptions{KeyRetention: time.Hour, Now: func() time.Time { return now }})
	capture := func(key string) {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"orderId":"o","amountMinor":1,"currency":"EUR"}`))
		r.Header.Set(payments.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("capture %s: %d %s", key, w.Code, w.Body)
		}
	}
	capture("a")
	capture("b")
	s.decide("in-flight", payments.CaptureRequest{OrderID: "o", AmountMinor: 1, Currency: "EUR"})
	now = now.Add(30 * time.Minute)
	capture("c")
	now = now.Add(31 * time.Minute) // a and b expired, c not
	capture("d")

	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.keys {
		keys = append(keys, k)
	}
	if len(s.keys) != 3 || s.keys["c"] == nil || s.keys["d"] == nil || s.keys["in-flight"] == nil {
		t.Errorf("keys after the sweep: %q, want c, d and in-flight", keys)
	}
	if s.charges != 4 {
		t.Errorf("charges = %d, want 4: forgetting keys forgets no payment", s.charges)
	}
}
