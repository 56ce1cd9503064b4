package paymentservice_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// probe sends one POST /payments/probe with a raw body ("" sends none) and
// an Idempotency-Key header if key is not empty.
func probe(t testing.TB, c *http.Client, base, key, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/payments/probe", rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(payments.HeaderIdempotencyKey, key)
	}
	return send(c, req)
}

// TestProbeAnswersAsCapturesWould: POST /payments/probe answers 204 with no
// body while captures go through, and what a capture would get during an
// outage (its status, its Retry-After, a problem document); once the
// outage ends it answers 204 again. It charges nothing, records nothing in
// the ledger, and claims no key, even one sent with it; GET /healthz
// answers 200 throughout.
func TestProbeAnswersAsCapturesWould(t *testing.T) {
	withRetry := paymentservice.AcquirerOutage()
	withRetry.RetryAfter = 1500 * time.Millisecond
	tests := []struct {
		name      string
		outage    *paymentservice.Outage // nil: none
		key, body string                 // of the probe
		want      int
		wantRetry string
	}{
		{"healthy", nil, "", "", http.StatusNoContent, ""},
		{"healthy, a key sent is not claimed", nil, "capture:ord-1", "", http.StatusNoContent, ""},
		{"acquirer outage", new(paymentservice.AcquirerOutage()), "", "", http.StatusServiceUnavailable, ""},
		{"acquirer outage with Retry-After", &withRetry, "", "", http.StatusServiceUnavailable, "2"},
		{"outage answering 500", &paymentservice.Outage{Status: http.StatusInternalServerError}, "", "", http.StatusInternalServerError, ""},
		{"a body", nil, "", validBody, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(nil)
			srv, _ := serve(t, svc)
			c := srv.Client()
			end := func() {}
			if tt.outage != nil {
				end = svc.SetOutage(*tt.outage)
				if a := post(t, c, srv.URL, "capture:ord-2", "application/json", validBody); a.status != tt.want || a.header.Get("Retry-After") != tt.wantRetry {
					t.Fatalf("the case is wrong: a capture gets %d Retry-After %q", a.status, a.header.Get("Retry-After"))
				}
			}
			a := probe(t, c, srv.URL, tt.key, tt.body)
			if a.err != nil || a.status != tt.want || a.header.Get("Retry-After") != tt.wantRetry {
				t.Fatalf("probe: %d %v Retry-After %q, want %d Retry-After %q", a.status, a.err, a.header.Get("Retry-After"), tt.want, tt.wantRetry)
			}
			if tt.want == http.StatusNoContent && a.body != "" {
				t.Errorf("probe answered 204 with a body %q", a.body)
			}
			if tt.want >= 400 {
				decodeProblem(t, a)
			}
			if h := get(t, c, srv.URL, "/healthz"); h.status != http.StatusOK {
				t.Errorf("GET /healthz: %d, want 200", h.status)
			}
			end()
			if a := probe(t, c, srv.URL, "", ""); a.status != http.StatusNoContent {
				t.Errorf("probe after the outage ended: %d %v, want 204", a.status, a.err)
			}
			if n := svc.Charges(); n != 0 || len(svc.ChargesByOrder()) != 0 {
				t.Errorf("after probes: %d charges, %v by order; want none", n, svc.ChargesByOrder())
			}
			if l := get(t, c, srv.URL, "/payments/pay_00000001"); l.status != http.StatusNotFound {
				t.Errorf("after probes, GET /payments/pay_00000001: %d, want 404: a probe records no payment", l.status)
			}
			// The key a probe carried is free: the capture with it charges
			// and is no replay.
			first := post(t, c, srv.URL, "capture:ord-1", "application/json", validBody)
			if first.status != http.StatusCreated || first.header.Get(payments.HeaderIdempotentReplayed) != "" || svc.ChargesFor("ord-1") != 1 {
				t.Errorf("first capture after probes: %d replayed %q, %d charges; want 201, a first request, one charge",
					first.status, first.header.Get(payments.HeaderIdempotentReplayed), svc.ChargesFor("ord-1"))
			}
		})
	}
}

// TestProbeFaults: ServiceOptions.Faults strikes probes with the kinds it
// strikes captures with, telling them apart by FaultRequest.Kind; Attempt
// counts the probes. A fault model of the acquirer (whatever the kind)
// fails a probe and a capture alike; one of an order's key (captures only)
// leaves probes alone.
func TestProbeFaults(t *testing.T) {
	fail := paymentservice.Fault{Kind: paymentservice.FaultFail}
	tests := []struct {
		name        string
		fault       paymentservice.Fault
		onlyKind    *paymentservice.RequestKind // strike only this kind; nil: every request
		wantStatus  int                         // of the first probe; 0 means no answer
		wantRetry   string
		wantCapture int // of the first capture, sent after two probes; 0: none is sent
	}{
		{"fail with default status", fail, nil, http.StatusServiceUnavailable, "", http.StatusServiceUnavailable},
		{"fail with 429 and Retry-After", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond}, nil, http.StatusTooManyRequests, "2", http.StatusTooManyRequests},
		{"delay", paymentservice.Fault{Kind: paymentservice.FaultDelay, Delay: time.Millisecond}, nil, http.StatusNoContent, "", http.StatusCreated},
		{"drop the answer", paymentservice.Fault{Kind: paymentservice.FaultDrop}, nil, 0, "", 0},
		{"hang until Delay", paymentservice.Fault{Kind: paymentservice.FaultHang, Delay: time.Millisecond}, nil, 0, "", 0},
		{"captures only", fail, new(paymentservice.RequestCapture), http.StatusNoContent, "", http.StatusServiceUnavailable},
		{"probes only", fail, new(paymentservice.RequestProbe), http.StatusServiceUnavailable, "", http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []paymentservice.FaultRequest
			var mu sync.Mutex
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(r paymentservice.FaultRequest) paymentservice.Fault {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, r)
				if r.Attempt == 1 && (tt.onlyKind == nil || *tt.onlyKind == r.Kind) {
					return tt.fault
				}
				return paymentservice.Fault{}
			}})
			srv, _ := serve(t, svc)
			c := srv.Client()
			a := probe(t, c, srv.URL, "", "")
			switch {
			case tt.wantStatus == 0 && a.err == nil:
				t.Fatalf("first probe: %d %s, want no answer", a.status, a.body)
			case tt.wantStatus != 0 && a.status != tt.wantStatus:
				t.Fatalf("first probe: %d %v %s, want %d", a.status, a.err, a.body, tt.wantStatus)
			case tt.wantStatus >= 400:
				decodeProblem(t, a)
				if got := a.header.Get("Retry-After"); got != tt.wantRetry {
					t.Errorf("Retry-After = %q, want %q", got, tt.wantRetry)
				}
			}
			if second := probe(t, c, srv.URL, "", ""); second.status != http.StatusNoContent {
				t.Errorf("second probe: %d %v, want 204", second.status, second.err)
			}
			want := []paymentservice.FaultRequest{{Kind: paymentservice.RequestProbe, Attempt: 1}, {Kind: paymentservice.RequestProbe, Attempt: 2}}
			if tt.wantCapture != 0 {
				if a := post(t, c, srv.URL, "capture:ord-1", "", validBody); a.status != tt.wantCapture {
					t.Errorf("first capture: %d %v, want %d", a.status, a.err, tt.wantCapture)
				}
				want = append(want, paymentservice.FaultRequest{Kind: paymentservice.RequestCapture, Key: "capture:ord-1",
					Request: payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"}, Attempt: 1})
			}
			wantCharges := 0
			if tt.wantCapture == http.StatusCreated {
				wantCharges = 1
			}
			if n := svc.Charges(); n != wantCharges {
				t.Errorf("%d charges, want one for a capture that answered 201 and none for the probes", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, want) {
				t.Errorf("Faults saw %+v, want %+v", seen, want)
			}
		})
	}
}

// During an outage the outage answers a probe before Faults is asked, as
// it answers a capture.
func TestProbeOutageBeforeFaults(t *testing.T) {
	var calls int
	var mu sync.Mutex
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(paymentservice.FaultRequest) paymentservice.Fault {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return paymentservice.Fault{}
	}})
	srv, _ := serve(t, svc)
	end := svc.SetOutage(paymentservice.AcquirerOutage())
	if a := probe(t, srv.Client(), srv.URL, "", ""); a.status != http.StatusServiceUnavailable {
		t.Fatalf("probe during the outage: %d %v, want 503", a.status, a.err)
	}
	end()
	if a := probe(t, srv.Client(), srv.URL, "", ""); a.status != http.StatusNoContent {
		t.Fatalf("probe after the outage: %d %v, want 204", a.status, a.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("Faults called %d times for a probe in an outage and one after, want 1", calls)
	}
}

// A probe handed to the service in process, as a client built it (its Body
// nil, no server in between), is answered like one over the network: the
// simulation and the breaker's tests call the service so.
func TestProbeInProcess(t *testing.T) {
	svc := paymentservice.NewService(nil)
	for _, tt := range []struct {
		name   string
		outage bool
		want   int
	}{
		{"healthy", false, http.StatusNoContent},
		{"acquirer outage", true, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.outage {
				defer svc.SetOutage(paymentservice.AcquirerOutage())()
			}
			r, err := http.NewRequest(http.MethodPost, "http://payments.invalid/payments/probe", nil)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			svc.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("in-process probe: %d %s, want %d", w.Code, w.Body, tt.want)
			}
		})
	}
}
