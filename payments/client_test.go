package payments_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

var capture = payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"}

// newClient returns a client of srv whose backoff is recorded, not waited.
func newClient(t *testing.T, srv *httptest.Server, o payments.ClientOptions) (*payments.Client, *sleeper) {
	t.Helper()
	s := &sleeper{}
	if o.HTTPClient == nil {
		o.HTTPClient = srv.Client()
	}
	if o.Sleep == nil {
		o.Sleep = s.Sleep
	}
	c, err := payments.NewClient(srv.URL, &o)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// checkKeys checks that the server saw n requests, all with the same key.
func checkKeys(t *testing.T, rec *recorder, key string, n int) {
	t.Helper()
	got := rec.Keys()
	if len(got) != n || slices.ContainsFunc(got, func(k string) bool { return k != key }) {
		t.Errorf("server saw keys %q, want %q %d times", got, key, n)
	}
}

func TestClientRetriesWithTheSameKey(t *testing.T) {
	tests := []struct {
		name  string
		fault paymentservice.Fault
	}{
		{"503", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusServiceUnavailable}},
		{"500", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusInternalServerError}},
		{"429", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusTooManyRequests}},
		{"502", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusBadGateway}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: firstAttempts(2, tt.fault)})
			srv, rec := serve(t, svc)
			c, sl := newClient(t, srv, payments.ClientOptions{})

			p, err := c.Capture(context.Background(), payments.KeyFor("ord-1"), capture)
			if err != nil {
				t.Fatalf("Capture: %v", err)
			}
			if p.Replayed || p.OrderID != "ord-1" || p.AmountMinor != 3998 || p.Status != payments.StatusCaptured {
				t.Errorf("payment = %+v, want a fresh capture of ord-1", p)
			}
			checkKeys(t, rec, payments.KeyFor("ord-1"), 3)
			if svc.Charges() != 1 {
				t.Errorf("Charges() = %d, want 1", svc.Charges())
			}
			if n := len(sl.Delays()); n != 2 {
				t.Errorf("slept %d times, want 2", n)
			}
		})
	}
}

// fixed is a handler that answers every request with one status code and a
// problem document.
func fixed(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"about:blank","status":%d,"detail":"fixed answer %d"}`, status, status)
	})
}

func TestClientDoesNotRetryOther4xx(t *testing.T) {
	tests := []struct {
		status    int
		want      error
		transient bool
	}{
		{http.StatusBadRequest, payments.ErrRejected, false},
		{http.StatusUnauthorized, payments.ErrRejected, false},
		{http.StatusNotFound, payments.ErrRejected, false},
		{http.StatusRequestTimeout, payments.ErrRejected, false},
		{http.StatusConflict, payments.ErrInProgress, true},
		{http.StatusRequestEntityTooLarge, payments.ErrRejected, false},
		{http.StatusUnsupportedMediaType, payments.ErrRejected, false},
		{http.StatusUnprocessableEntity, payments.ErrKeyReused, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv, rec := serve(t, fixed(tt.status))
			c, sl := newClient(t, srv, payments.ClientOptions{})
			_, err := c.Capture(context.Background(), "k", capture)
			if !errors.Is(err, tt.want) || payments.IsTransient(err) != tt.transient {
				t.Errorf("err = %v, want %v with IsTransient %v", err, tt.want, tt.transient)
			}
			var re *payments.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tt.status || re.Problem.Detail != fmt.Sprint("fixed answer ", tt.status) {
				t.Errorf("err = %#v, want a *ResponseError for %d with the problem detail", err, tt.status)
			}
			checkKeys(t, rec, "k", 1)
			if len(sl.Delays()) != 0 {
				t.Errorf("slept %v, want no backoff", sl.Delays())
			}
		})
	}
}

func TestClientKeyReusedForAnotherAmount(t *testing.T) {
	svc := paymentservice.NewService(nil)
	srv, rec := serve(t, svc)
	c, _ := newClient(t, srv, payments.ClientOptions{})
	key := payments.KeyFor("ord-1")
	if _, err := c.Capture(context.Background(), key, capture); err != nil {
		t.Fatal(err)
	}
	other := capture
	other.AmountMinor++
	_, err := c.Capture(context.Background(), key, other)
	if !errors.Is(err, payments.ErrKeyReused) || payments.IsTransient(err) {
		t.Errorf("err = %v, want ErrKeyReused, not transient", err)
	}
	checkKeys(t, rec, key, 2)
	if svc.Charges() != 1 {
		t.Errorf("Charges() = %d, want 1", svc.Charges())
	}
}

func TestClientRejectsInvalidRequestsWithoutSending(t *testing.T) {
	tests := []struct {
		name string
		key  string
		req  payments.CaptureRequest
	}{
		{"empty key", "", capture},
		{"key with a space", "capture: ord-1", capture},
		{"key too long", strings.Repeat("k", payments.MaxKeyLength+1), capture},
		{"no order id", "k", payments.CaptureRequest{AmountMinor: 1, Currency: "EUR"}},
		{"zero amount", "k", payments.CaptureRequest{OrderID: "ord-1", Currency: "EUR"}},
		{"bad currency", "k", payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 1, Currency: "euro"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, rec := serve(t, paymentservice.NewService(nil))
			c, _ := newClient(t, srv, payments.ClientOptions{})
			_, err := c.Capture(context.Background(), tt.key, tt.req)
			if !errors.Is(err, payments.ErrRejected) || payments.IsTransient(err) {
				t.Errorf("err = %v, want ErrRejected, not transient", err)
			}
			checkKeys(t, rec, "", 0)
		})
	}
}

// The charge happens but its answer is lost: the retry with the same key is
// answered from the service's store, and the order is charged once.
func TestClientAnswerLostAfterTheCharge(t *testing.T) {
	tests := []struct {
		name  string
		fault paymentservice.Fault
	}{
		{"attempt times out", paymentservice.Fault{Kind: paymentservice.FaultHang}},
		{"connection dropped", paymentservice.Fault{Kind: paymentservice.FaultDrop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: firstAttempts(1, tt.fault)})
			srv, rec := serve(t, svc)
			c, sl := newClient(t, srv, payments.ClientOptions{AttemptTimeout: 200 * time.Millisecond})

			p, err := c.Capture(context.Background(), payments.KeyFor("ord-1"), capture)
			if err != nil {
				t.Fatalf("Capture: %v", err)
			}
			if !p.Replayed {
				t.Errorf("payment = %+v, want the replayed answer of the first attempt", p)
			}
			checkKeys(t, rec, payments.KeyFor("ord-1"), 2)
			if svc.Charges() != 1 {
				t.Errorf("Charges() = %d, want 1", svc.Charges())
			}
			if n := len(sl.Delays()); n != 1 {
				t.Errorf("slept %d times, want 1", n)
			}
		})
	}
}

// hang is a handler that never answers: every attempt times out. It reads
// the body first, since the server notices a client hanging up only then.
var hang = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
})

func TestClientGivesUp(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.Handler
		opts     payments.ClientOptions
		attempts int
		wantIs   []error
		status   int // of the *ResponseError, if any
	}{
		{
			name:     "503 on every attempt",
			handler:  paymentservice.NewService(&paymentservice.ServiceOptions{Faults: firstAttempts(100, paymentservice.Fault{Kind: paymentservice.FaultFail})}),
			attempts: payments.DefaultMaxAttempts,
			wantIs:   []error{payments.ErrUnavailable},
			status:   http.StatusServiceUnavailable,
		},
		{
			name:     "429 on every attempt",
			handler:  fixed(http.StatusTooManyRequests),
			opts:     payments.ClientOptions{MaxAttempts: 2},
			attempts: 2,
			wantIs:   []error{payments.ErrUnavailable},
			status:   http.StatusTooManyRequests,
		},
		{
			name:     "timeout on every attempt",
			handler:  hang,
			opts:     payments.ClientOptions{MaxAttempts: 3, AttemptTimeout: 20 * time.Millisecond},
			attempts: 3,
			wantIs:   []error{payments.ErrUnavailable, context.DeadlineExceeded},
		},
		{
			name:     "one attempt only",
			handler:  fixed(http.StatusInternalServerError),
			opts:     payments.ClientOptions{MaxAttempts: 1},
			attempts: 1,
			wantIs:   []error{payments.ErrUnavailable},
			status:   http.StatusInternalServerError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, rec := serve(t, tt.handler)
			c, sl := newClient(t, srv, tt.opts)
			_, err := c.Capture(context.Background(), "k", capture)
			if !payments.IsTransient(err) {
				t.Errorf("IsTransient(%v) = false, want true", err)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("err = %v, want it to match %v", err, target)
				}
			}
			var re *payments.ResponseError
			if got := errors.As(err, &re); got != (tt.status != 0) || got && re.StatusCode != tt.status {
				t.Errorf("err = %v, want a *ResponseError with status %d: %v", err, tt.status, got)
			}
			checkKeys(t, rec, "k", tt.attempts)
			if n := len(sl.Delays()); n != tt.attempts-1 {
				t.Errorf("slept %d times, want %d", n, tt.attempts-1)
			}
		})
	}
	if svc, ok := tests[0].handler.(*paymentservice.Service); !ok || svc.Charges() != 0 {
		t.Errorf("the failing service charged")
	}
}

func TestClientConnectionRefusedIsTransient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sl := &sleeper{}
	c, err := payments.NewClient("http://"+addr, &payments.ClientOptions{MaxAttempts: 2, Sleep: sl.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Capture(context.Background(), "k", capture)
	if !errors.Is(err, payments.ErrUnavailable) || !payments.IsTransient(err) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
	if len(sl.Delays()) != 1 {
		t.Errorf("slept %d times, want 1", len(sl.Delays()))
	}
}

func TestClientBackoffIsCappedFullJitter(t *testing.T) {
	srv, _ := serve(t, fixed(http.StatusServiceUnavailable))
	const base, maxDelay = 100 * time.Millisecond, 250 * time.Millisecond
	ceilings := []time.Duration{base, 2 * base, maxDelay, maxDelay, maxDelay}
	for range 20 {
		c, sl := newClient(t, srv, payments.ClientOptions{MaxAttempts: len(ceilings) + 1, BaseDelay: base, MaxDelay: maxDelay})
		if _, err := c.Capture(context.Background(), "k", capture); !payments.IsTransient(err) {
			t.Fatalf("err = %v, want a transient error", err)
		}
		got := sl.Delays()
		if len(got) != len(ceilings) {
			t.Fatalf("slept %v, want %d delays", got, len(ceilings))
		}
		for i, d := range got {
			if d < 0 || d > ceilings[i] {
				t.Errorf("delay %d = %v, want between 0 and %v", i+1, d, ceilings[i])
			}
		}
	}
}

func TestClientHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration // -1: jitter, between 0 and the base delay
	}{
		{"1", time.Second},
		{"0", 0},
		{"7", 2 * time.Second}, // capped at MaxDelay
		{"soon", -1},
		{"-3", -1},
		{"", -1},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			svc := paymentservice.NewService(nil)
			var answered atomic.Bool
			srv, rec := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !answered.Swap(true) {
					if tt.header != "" {
						w.Header().Set("Retry-After", tt.header)
					}
					fixed(http.StatusTooManyRequests).ServeHTTP(w, r)
					return
				}
				svc.ServeHTTP(w, r)
			}))
			c, sl := newClient(t, srv, payments.ClientOptions{BaseDelay: 10 * time.Millisecond, MaxDelay: 2 * time.Second})
			if _, err := c.Capture(context.Background(), "k", capture); err != nil {
				t.Fatalf("Capture: %v", err)
			}
			checkKeys(t, rec, "k", 2)
			got := sl.Delays()
			switch {
			case len(got) != 1:
				t.Errorf("slept %v, want once", got)
			case tt.want >= 0 && got[0] != tt.want:
				t.Errorf("slept %v, want %v", got[0], tt.want)
			case tt.want < 0 && (got[0] < 0 || got[0] > 10*time.Millisecond):
				t.Errorf("slept %v, want jitter up to 10ms", got[0])
			}
		})
	}
}

func TestClientStopsWhenContextEndsDuringBackoff(t *testing.T) {
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: firstAttempts(100, paymentservice.Fault{Kind: paymentservice.FaultFail})})
	srv, rec := serve(t, svc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var slept []time.Duration
	c, _ := newClient(t, srv, payments.ClientOptions{Sleep: func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		cancel() // the worker shuts down while the client waits to retry
		<-ctx.Done()
		return ctx.Err()
	}})
	_, err := c.Capture(ctx, "k", capture)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, payments.ErrUnavailable) {
		t.Errorf("err = %v, want context.Canceled wrapping the last attempt's ErrUnavailable", err)
	}
	if len(slept) != 1 {
		t.Errorf("slept %v, want once", slept)
	}
	checkKeys(t, rec, "k", 1)
}

func TestClientContextAlreadyDone(t *testing.T) {
	srv, rec := serve(t, paymentservice.NewService(nil))
	c, sl := newClient(t, srv, payments.ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Capture(ctx, "k", capture)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	checkKeys(t, rec, "k", 0)
	if len(sl.Delays()) != 0 {
		t.Errorf("slept %v, want no backoff", sl.Delays())
	}
}

func TestClientRejectsAPaymentForAnotherRequest(t *testing.T) {
	srv, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"paymentId":"pay_1","orderId":"ord-2","amountMinor":3998,"currency":"EUR","status":"captured"}`)
	}))
	c, _ := newClient(t, srv, payments.ClientOptions{})
	_, err := c.Capture(context.Background(), "k", capture)
	if err == nil || payments.IsTransient(err) || !strings.Contains(err.Error(), `"ord-2"`) {
		t.Errorf("err = %v, want a permanent error naming ord-2", err)
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		base    string
		opts    *payments.ClientOptions
		wantErr bool
	}{
		{"http://127.0.0.1:8090", nil, false},
		{"https://payments.example/v1/", &payments.ClientOptions{MaxAttempts: 1}, false},
		{"", nil, true},
		{"127.0.0.1:8090", nil, true},
		{"ftp://127.0.0.1", nil, true},
		{"http://", nil, true},
		{"http://127.0.0.1:8090", &payments.ClientOptions{AttemptTimeout: -time.Second}, true},
		{"http://127.0.0.1:8090", &payments.ClientOptions{MaxAttempts: -1}, true},
	}
	for _, tt := range tests {
		_, err := payments.NewClient(tt.base, tt.opts)
		if (err != nil) != tt.wantErr {
			t.Errorf("NewClient(%q, %+v): err = %v, want error %v", tt.base, tt.opts, err, tt.wantErr)
		}
	}
}

// A base URL with a path prefix keeps it.
func TestClientBaseURLWithPath(t *testing.T) {
	svc := paymentservice.NewService(nil)
	srv, _ := serve(t, http.StripPrefix("/psp", svc))
	c, err := payments.NewClient(srv.URL+"/psp/", &payments.ClientOptions{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Capture(context.Background(), "k", capture); err != nil || svc.Charges() != 1 {
		t.Errorf("Capture: %v, Charges() = %d, want nil and 1", err, svc.Charges())
	}
}

func TestKeyFor(t *testing.T) {
	if payments.KeyFor("ord-1") != payments.KeyFor("ord-1") || payments.KeyFor("ord-1") == payments.KeyFor("ord-2") {
		t.Errorf("KeyFor is not a function of the order id alone: %q %q", payments.KeyFor("ord-1"), payments.KeyFor("ord-2"))
	}
}
