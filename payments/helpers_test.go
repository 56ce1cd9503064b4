package payments_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// clock is a hand-set clock for ServiceOptions.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

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

// answer is one raw HTTP response.
type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

// post sends one capture request with a raw body; key "" sends no header.
func post(t testing.TB, c *http.Client, base, key, contentType, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(payments.HeaderIdempotencyKey, key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(data)}
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

const validBody = `{"orderId":"ord-1","amountMinor":3998,"currency":"EUR"}`

func decodePayment(t *testing.T, body string) payments.Payment {
	t.Helper()
	var p payments.Payment
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("body %q is not a payment: %v", body, err)
	}
	return p
}

func decodeProblem(t *testing.T, a answer) payments.Problem {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p payments.Problem
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		t.Fatalf("body %q is not a problem document: %v", a.body, err)
	}
	if p.Status != a.status || p.Title != http.StatusText(a.status) || p.Detail == "" {
		t.Errorf("problem %+v does not describe a %d", p, a.status)
	}
	return p
}
