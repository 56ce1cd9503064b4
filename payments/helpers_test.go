package payments_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// recorder is middleware that records the Idempotency-Key header of every
// request that reaches the handler it wraps.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	keys []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.keys = append(rec.keys, r.Header.Get(payments.HeaderIdempotencyKey))
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

// Keys returns the keys of the requests seen so far.
func (rec *recorder) Keys() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.keys...)
}

// serve starts an HTTP server for h, wrapped in a recorder.
func serve(t testing.TB, h http.Handler) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{next: h}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return srv, rec
}

// sleeper is a ClientOptions.Sleep that records the delays and does not wait.
type sleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) Delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// firstAttempts returns a Faults function that injects f on the first n
// attempts of every key.
func firstAttempts(n int, f paymentservice.Fault) func(paymentservice.FaultRequest) paymentservice.Fault {
	return func(r paymentservice.FaultRequest) paymentservice.Fault {
		if r.Attempt <= n {
			return f
		}
		return paymentservice.Fault{}
	}
}
