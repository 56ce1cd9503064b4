package payments_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// seenRequest is what a probe carried to the service.
type seenRequest struct {
	method, path, key string
	body              int // bytes
}

// requestLog is middleware that records every request it passes on.
type requestLog struct {
	next http.Handler
	mu   sync.Mutex
	seen []seenRequest
}

func (l *requestLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	l.seen = append(l.seen, seenRequest{r.Method, r.URL.Path, r.Header.Get(payments.HeaderIdempotencyKey), len(data)})
	l.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(data))
	l.next.ServeHTTP(w, r)
}

func (l *requestLog) Seen() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenRequest(nil), l.seen...)
}

// Ping is a circuit breaker's probe: one POST /payments/probe with no key
// and no body, never retried (though the client's MaxAttempts is 4). It
// succeeds when a capture would go through, and fails with ErrUnavailable
// when a capture would not (an acquirer outage behind a service whose
// GET /healthz answers 200, a fault that fails the acquirer's call), when
// the service answers anything but 204 or 200, when it does not answer in
// time, and when it cannot be reached.
func TestClientPing(t *testing.T) {
	failAcquirer := func(paymentservice.FaultRequest) paymentservice.Fault {
		return paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusBadGateway}
	}
	tests := []struct {
		name       string
		outage     *paymentservice.Outage                                 // set on the reference service
		faults     func(paymentservice.FaultRequest) paymentservice.Fault // of the reference service
		answer     int                                                    // if not 0, a stand-in answers this status instead
		hang       bool                                                   // a stand-in never answers
		closed     bool                                                   // nothing listens
		wantErr    bool
		wantStatus int // of the *ResponseError in the error, if any
	}{
		{name: "healthy service"},
		{name: "acquirer outage", outage: new(paymentservice.AcquirerOutage()), wantErr: true, wantStatus: http.StatusServiceUnavailable},
		{name: "acquirer outage with Retry-After", outage: &paymentservice.Outage{RetryAfter: time.Minute}, wantErr: true, wantStatus: http.StatusServiceUnavailable},
		{name: "fault on the acquirer's call", faults: failAcquirer, wantErr: true, wantStatus: http.StatusBadGateway},
		{name: "200 from a service", answer: http.StatusOK},
		{name: "500", answer: http.StatusInternalServerError, wantErr: true, wantStatus: http.StatusInternalServerError},
		{name: "429", answer: http.StatusTooManyRequests, wantErr: true, wantStatus: http.StatusTooManyRequests},
		{name: "404 from a service without the probe", answer: http.StatusNotFound, wantErr: true, wantStatus: http.StatusNotFound},
		{name: "400", answer: http.StatusBadRequest, wantErr: true, wantStatus: http.StatusBadRequest},
		{name: "no answer in time", hang: true, wantErr: true},
		{name: "nothing listens", closed: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: tt.faults})
			var h http.Handler = svc
			switch {
			case tt.answer != 0:
				h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tt.answer) })
			case tt.hang:
				h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
			}
			if tt.outage != nil {
				svc.SetOutage(*tt.outage)
			}
			log := &requestLog{next: h}
			srv := httptest.NewServer(log)
			defer srv.Close()
			var sl sleeper
			c, err := payments.NewClient(srv.URL, &payments.ClientOptions{AttemptTimeout: 100 * time.Millisecond, Sleep: sl.Sleep})
			if err != nil {
				t.Fatal(err)
			}
			if tt.closed {
				srv.Close()
			}
			err = c.Ping(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("Ping = %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil && (!errors.Is(err, payments.ErrUnavailable) || !payments.IsTransient(err)) {
				t.Errorf("Ping = %v, want a transient ErrUnavailable", err)
			}
			if rerr, ok := errors.AsType[*payments.ResponseError](err); tt.wantStatus != 0 && (!ok || rerr.StatusCode != tt.wantStatus) {
				t.Errorf("Ping = %v, want a *ResponseError of %d", err, tt.wantStatus)
			}
			if tt.closed {
				return
			}
			want := seenRequest{method: http.MethodPost, path: "/payments/probe"}
			if seen := log.Seen(); len(seen) != 1 || seen[0] != want {
				t.Errorf("Ping sent %+v, want one %+v: no retry, no key, no body", seen, want)
			}
			if d := sl.Delays(); len(d) != 0 {
				t.Errorf("Ping waited %v to retry; it must not retry", d)
			}
			if tt.outage != nil {
				h, err := srv.Client().Get(srv.URL + "/healthz")
				if err != nil || h.StatusCode != http.StatusOK {
					t.Fatalf("GET /healthz during the outage: %v %v, want 200: the outage is one /healthz cannot see", h, err)
				}
				h.Body.Close()
			}
			if n := svc.Charges(); n != 0 {
				t.Errorf("%d charges after a probe, want none", n)
			}
		})
	}
}

// Ping charges nothing and records nothing: after probes, the service has
// no charge and no payment, and the next capture is its first payment;
// no probe claims a key, so the capture is no replay.
func TestClientPingChargesNothing(t *testing.T) {
	svc := paymentservice.NewService(nil)
	srv, rec := serve(t, svc)
	c, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("Ping of a healthy service = %v", err)
		}
	}
	for _, k := range rec.Keys() {
		if k != "" {
			t.Errorf("Ping sent Idempotency-Key %q, want none", k)
		}
	}
	if n := svc.Charges(); n != 0 || len(svc.ChargesByOrder()) != 0 {
		t.Fatalf("after 3 probes: %d charges %v, want none", n, svc.ChargesByOrder())
	}
	if ps, err := c.Lookup(ctx, "ord-1"); err != nil || len(ps) != 0 {
		t.Fatalf("lookup after probes: %v %v, want no payment", ps, err)
	}
	p, err := c.Capture(ctx, payments.KeyFor("ord-1"), payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if p.PaymentID != "pay_00000001" || p.Replayed || svc.Charges() != 1 {
		t.Errorf("first capture after probes: %+v, %d charges; want pay_00000001, not replayed, one charge", p, svc.Charges())
	}
}
