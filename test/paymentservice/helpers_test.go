package paymentservice_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
)

// The service tests' helpers: a hand-set clock, a recording server and
// raw HTTP answers.

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
	return send(c, req)
}

// send sends req on c and reads the whole answer.
func send(c *http.Client, req *http.Request) answer {
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
