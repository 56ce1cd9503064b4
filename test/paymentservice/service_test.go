package paymentservice_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

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

func TestServiceCaptureThenReplay(t *testing.T) {
	clk := newClock()
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{Now: clk.Now})
	srv, _ := serve(t, svc)
	c := srv.Client()

	first := post(t, c, srv.URL, "capture:ord-1", "application/json", validBody)
	if first.err != nil || first.status != http.StatusCreated {
		t.Fatalf("first capture: %d %v %s, want 201", first.status, first.err, first.body)
	}
	if got := first.header.Get(payments.HeaderIdempotentReplayed); got != "" {
		t.Errorf("first capture: %s = %q, want no header", payments.HeaderIdempotentReplayed, got)
	}
	p := decodePayment(t, first.body)
	want := payments.Payment{PaymentID: p.PaymentID, OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR",
		Status: payments.StatusCaptured, CapturedAt: clk.Now()}
	if !strings.HasPrefix(p.PaymentID, "pay_") || p != want {
		t.Errorf("payment = %+v, want %+v", p, want)
	}
	if loc := first.header.Get("Location"); loc != "/payments/"+p.PaymentID {
		t.Errorf("Location = %q, want /payments/%s", loc, p.PaymentID)
	}
	if svc.Charges() != 1 || svc.ChargesFor("ord-1") != 1 {
		t.Fatalf("after the first capture: Charges() = %d, ChargesFor = %d, want 1 and 1", svc.Charges(), svc.ChargesFor("ord-1"))
	}

	clk.Advance(time.Hour)
	// The bare key and the IETF draft's quoted string form are the same key;
	// the order of the JSON fields is not part of the fingerprint.
	for _, key := range []string{"capture:ord-1", `"capture:ord-1"`} {
		again := post(t, c, srv.URL, key, "application/json; charset=utf-8", `{"currency":"EUR","amountMinor":3998,"orderId":"ord-1"}`)
		if again.status != first.status || again.body != first.body || again.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("replay with key %s: %d %s, want the original %d %s", key, again.status, again.body, first.status, first.body)
		}
		if got := again.header.Get(payments.HeaderIdempotentReplayed); got != "true" {
			t.Errorf("replay with key %s: %s = %q, want true", key, payments.HeaderIdempotentReplayed, got)
		}
	}
	if svc.Charges() != 1 {
		t.Errorf("after the replays: Charges() = %d, want 1", svc.Charges())
	}

	resp, err := c.Get(srv.URL + "/payments/" + p.PaymentID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got payments.Payment
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got != p {
		t.Errorf("GET /payments/%s: %d %+v %v, want 200 %+v", p.PaymentID, resp.StatusCode, got, err, p)
	}
}

func TestServiceRejectsMalformedRequests(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		contentType string
		body        string
		want        int
	}{
		{"missing key", "", "application/json", validBody, http.StatusBadRequest},
		{"key too long", strings.Repeat("k", payments.MaxKeyLength+1), "application/json", validBody, http.StatusBadRequest},
		{"bare key with a space", "capture: ord-1", "application/json", validBody, http.StatusBadRequest},
		{"quoted key with a bad escape", `"capture\n"`, "application/json", validBody, http.StatusBadRequest},
		{"quoted empty key", `""`, "application/json", validBody, http.StatusBadRequest},
		{"not JSON", "k", "application/json", `orderId=ord-1`, http.StatusBadRequest},
		{"empty body", "k", "application/json", ``, http.StatusBadRequest},
		{"unknown field", "k", "application/json", `{"orderId":"ord-1","amountMinor":1,"currency":"EUR","tip":5}`, http.StatusBadRequest},
		{"trailing data", "k", "application/json", validBody + `{}`, http.StatusBadRequest},
		{"missing orderId", "k", "application/json", `{"amountMinor":1,"currency":"EUR"}`, http.StatusBadRequest},
		{"orderId too long", "k", "application/json", `{"orderId":"` + strings.Repeat("o", payments.MaxOrderIDLength+1) + `","amountMinor":1,"currency":"EUR"}`, http.StatusBadRequest},
		{"zero amount", "k", "application/json", `{"orderId":"ord-1","amountMinor":0,"currency":"EUR"}`, http.StatusBadRequest},
		{"negative amount", "k", "application/json", `{"orderId":"ord-1","amountMinor":-5,"currency":"EUR"}`, http.StatusBadRequest},
		{"fractional amount", "k", "application/json", `{"orderId":"ord-1","amountMinor":39.98,"currency":"EUR"}`, http.StatusBadRequest},
		{"amount as a string", "k", "application/json", `{"orderId":"ord-1","amountMinor":"3998","currency":"EUR"}`, http.StatusBadRequest},
		{"lower-case currency", "k", "application/json", `{"orderId":"ord-1","amountMinor":1,"currency":"eur"}`, http.StatusBadRequest},
		{"not JSON content type", "k", "text/plain", validBody, http.StatusUnsupportedMediaType},
		{"body too large", "k", "application/json", `{"orderId":"` + strings.Repeat(" ", payments.MaxBodySize) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(nil)
			srv, _ := serve(t, svc)
			a := post(t, srv.Client(), srv.URL, tt.key, tt.contentType, tt.body)
			if a.err != nil || a.status != tt.want {
				t.Fatalf("got %d %v %s, want %d", a.status, a.err, a.body, tt.want)
			}
			decodeProblem(t, a)
			if svc.Charges() != 0 {
				t.Errorf("Charges() = %d, want 0", svc.Charges())
			}
			// A request rejected for its body does not use up its key.
			if tt.key == "k" {
				if again := post(t, srv.Client(), srv.URL, tt.key, "application/json", validBody); again.status != http.StatusCreated || again.header.Get(payments.HeaderIdempotentReplayed) != "" {
					t.Errorf("valid request with the same key: %d %s, want a first 201", again.status, again.body)
				}
			}
		})
	}
}

func TestServiceKeyReusedForAnotherRequest(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"other amount", `{"orderId":"ord-1","amountMinor":3999,"currency":"EUR"}`},
		{"other currency", `{"orderId":"ord-1","amountMinor":3998,"currency":"USD"}`},
		{"other order", `{"orderId":"ord-2","amountMinor":3998,"currency":"EUR"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(nil)
			srv, _ := serve(t, svc)
			c := srv.Client()
			first := post(t, c, srv.URL, "capture:ord-1", "", validBody)
			if first.status != http.StatusCreated {
				t.Fatalf("first capture: %d %s", first.status, first.body)
			}
			reused := post(t, c, srv.URL, "capture:ord-1", "", tt.body)
			if reused.status != http.StatusUnprocessableEntity {
				t.Fatalf("same key, %s: %d %s, want 422", tt.name, reused.status, reused.body)
			}
			decodeProblem(t, reused)
			if svc.Charges() != 1 || svc.ChargesFor("ord-2") != 0 {
				t.Errorf("Charges() = %d, ChargesFor(ord-2) = %d, want 1 and 0", svc.Charges(), svc.ChargesFor("ord-2"))
			}
			if again := post(t, c, srv.URL, "capture:ord-1", "", validBody); again.body != first.body {
				t.Errorf("the original request after the 422: %d %s, want a replay of %s", again.status, again.body, first.body)
			}
		})
	}
}

// concurrentCaptures sends n captures with one key at once and returns the
// answers.
func concurrentCaptures(t *testing.T, srv string, c *http.Client, n int) []answer {
	t.Helper()
	answers := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			answers[i] = post(t, c, srv, "capture:ord-1", "application/json", validBody)
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// checkOneCharge checks that exactly one answer charged, that every other
// answer is a replay of it or a 409, and returns the number of 409s.
func checkOneCharge(t *testing.T, svc *paymentservice.Service, answers []answer) (conflicts int) {
	t.Helper()
	var charged []answer
	var bodies = map[string]int{}
	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("request failed: %v", a.err)
		case a.status == http.StatusCreated:
			bodies[a.body]++
			if a.header.Get(payments.HeaderIdempotentReplayed) != "true" {
				charged = append(charged, a)
			}
		case a.status == http.StatusConflict:
			decodeProblem(t, a)
			if a.header.Get("Retry-After") != "1" {
				t.Errorf("409 without Retry-After: 1: %v", a.header)
			}
			conflicts++
		default:
			t.Errorf("unexpected answer %d %s", a.status, a.body)
		}
	}
	if len(charged) != 1 || len(bodies) != 1 {
		t.Errorf("%d answers charged and the 201s had %d distinct bodies, want 1 and 1", len(charged), len(bodies))
	}
	if svc.Charges() != 1 || svc.ChargesFor("ord-1") != 1 {
		t.Errorf("Charges() = %d, ChargesFor = %d, want 1 and 1", svc.Charges(), svc.ChargesFor("ord-1"))
	}
	return conflicts
}

func TestServiceConcurrentFirstRequestsChargeOnce(t *testing.T) {
	const n = 64

	t.Run("free running", func(t *testing.T) {
		svc := paymentservice.NewService(nil)
		srv, _ := serve(t, svc)
		answers := concurrentCaptures(t, srv.URL, srv.Client(), n)
		conflicts := checkOneCharge(t, svc, answers)
		t.Logf("%d of %d concurrent first requests got 409 Conflict", conflicts, n)
	})

	// The fault hook holds the request that claimed the key until every other
	// request has been answered: all of them must be 409s.
	t.Run("first request held in flight", func(t *testing.T) {
		release := make(chan struct{})
		var held atomic.Bool
		var wrongKey bool
		svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(r paymentservice.FaultRequest) paymentservice.Fault {
			if r.Attempt == 1 && !held.Swap(true) {
				<-release
			}
			return paymentservice.Fault{}
		}})
		srv, rec := serve(t, svc)
		answers := make(chan answer, n)
		for range n {
			go func() { answers <- post(t, srv.Client(), srv.URL, "capture:ord-1", "application/json", validBody) }()
		}
		var got []answer
		for range n - 1 {
			got = append(got, <-answers)
		}
		close(release)
		got = append(got, <-answers)
		if conflicts := checkOneCharge(t, svc, got); conflicts != n-1 {
			t.Errorf("%d answers were 409 Conflict, want %d", conflicts, n-1)
		}
		for _, k := range rec.Keys() {
			wrongKey = wrongKey || k != "capture:ord-1"
		}
		if wrongKey || len(rec.Keys()) != n {
			t.Errorf("server saw keys %q, want %d times capture:ord-1", rec.Keys(), n)
		}
	})
}

func TestServiceInFlightKeyWithOtherRequestIs422(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(r paymentservice.FaultRequest) paymentservice.Fault {
		if r.Attempt == 1 {
			close(held)
			<-release
		}
		return paymentservice.Fault{}
	}})
	srv, _ := serve(t, svc)
	first := make(chan answer)
	go func() { first <- post(t, srv.Client(), srv.URL, "k", "", validBody) }()
	<-held
	if a := post(t, srv.Client(), srv.URL, "k", "", strings.Replace(validBody, "3998", "1", 1)); a.status != http.StatusUnprocessableEntity {
		t.Errorf("other request while the first is in flight: %d %s, want 422", a.status, a.body)
	}
	if a := post(t, srv.Client(), srv.URL, "k", "", validBody); a.status != http.StatusConflict {
		t.Errorf("same request while the first is in flight: %d %s, want 409", a.status, a.body)
	}
	close(release)
	if a := <-first; a.status != http.StatusCreated {
		t.Errorf("first request: %d %s, want 201", a.status, a.body)
	}
	if svc.Charges() != 1 {
		t.Errorf("Charges() = %d, want 1", svc.Charges())
	}
}

// A key is remembered for the retention period after its charge, and then
// forgotten: a retry after that charges again. This is why the retention must
// exceed the consumer's redelivery horizon.
func TestServiceKeyExpiresAfterRetention(t *testing.T) {
	const retention = time.Hour
	clk := newClock()
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: retention, Now: clk.Now})
	srv, _ := serve(t, svc)
	c := srv.Client()

	first := post(t, c, srv.URL, "capture:ord-1", "", validBody)
	clk.Advance(retention - time.Nanosecond)
	if a := post(t, c, srv.URL, "capture:ord-1", "", validBody); a.body != first.body || a.header.Get(payments.HeaderIdempotentReplayed) != "true" {
		t.Errorf("just before the key expires: %d %s, want a replay of %s", a.status, a.body, first.body)
	}
	clk.Advance(time.Nanosecond)
	second := post(t, c, srv.URL, "capture:ord-1", "", validBody)
	if second.status != http.StatusCreated || second.header.Get(payments.HeaderIdempotentReplayed) != "" {
		t.Fatalf("once the key expired: %d %v %s, want a new 201", second.status, second.header, second.body)
	}
	if p1, p2 := decodePayment(t, first.body), decodePayment(t, second.body); p1.PaymentID == p2.PaymentID {
		t.Errorf("both captures returned payment %s, want a new payment", p1.PaymentID)
	}
	if got := svc.ChargesFor("ord-1"); got != 2 {
		t.Errorf("ChargesFor(ord-1) = %d, want 2: an expired key charges again", got)
	}
	if got := svc.ChargesByOrder(); len(got) != 1 || got["ord-1"] != 2 {
		t.Errorf("ChargesByOrder() = %v, want map[ord-1:2]", got)
	}
}

func TestServiceFaults(t *testing.T) {
	tests := []struct {
		name       string
		fault      paymentservice.Fault
		wantStatus int    // of the first request; 0 means no answer
		wantRetry  string // its Retry-After
		wantCharge int    // after the first request
	}{
		{"fail with default status", paymentservice.Fault{Kind: paymentservice.FaultFail}, http.StatusServiceUnavailable, "", 0},
		{"fail with 500", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusInternalServerError}, http.StatusInternalServerError, "", 0},
		{"fail with 429 and Retry-After", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond}, http.StatusTooManyRequests, "2", 0},
		{"delay", paymentservice.Fault{Kind: paymentservice.FaultDelay, Delay: time.Millisecond}, http.StatusCreated, "", 1},
		{"drop the answer after charging", paymentservice.Fault{Kind: paymentservice.FaultDrop}, 0, "", 1},
		{"hang after charging, until Delay", paymentservice.Fault{Kind: paymentservice.FaultHang, Delay: time.Millisecond}, 0, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []paymentservice.FaultRequest
			var mu sync.Mutex
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(r paymentservice.FaultRequest) paymentservice.Fault {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, r)
				if r.Attempt == 1 {
					return tt.fault
				}
				return paymentservice.Fault{}
			}})
			srv, _ := serve(t, svc)
			a := post(t, srv.Client(), srv.URL, "capture:ord-1", "", validBody)
			switch {
			case tt.wantStatus == 0 && a.err == nil:
				t.Fatalf("first request: %d %s, want no answer", a.status, a.body)
			case tt.wantStatus != 0 && a.status != tt.wantStatus:
				t.Fatalf("first request: %d %v %s, want %d", a.status, a.err, a.body, tt.wantStatus)
			case tt.wantStatus >= 400:
				decodeProblem(t, a)
				if got := a.header.Get("Retry-After"); got != tt.wantRetry {
					t.Errorf("Retry-After = %q, want %q", got, tt.wantRetry)
				}
			}
			if svc.Charges() != tt.wantCharge {
				t.Errorf("after the first request: Charges() = %d, want %d", svc.Charges(), tt.wantCharge)
			}
			second := post(t, srv.Client(), srv.URL, "capture:ord-1", "", validBody)
			replayed := second.header.Get(payments.HeaderIdempotentReplayed) == "true"
			if second.status != http.StatusCreated || replayed != (tt.wantCharge == 1) {
				t.Errorf("second request: %d replayed=%v, want 201 replayed=%v", second.status, replayed, tt.wantCharge == 1)
			}
			if svc.Charges() != 1 {
				t.Errorf("after the second request: Charges() = %d, want 1", svc.Charges())
			}
			want := payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 3998, Currency: "EUR"}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 2 || seen[0] != (paymentservice.FaultRequest{Key: "capture:ord-1", Request: want, Attempt: 1}) || seen[1].Attempt != 2 {
				t.Errorf("Faults saw %+v, want attempts 1 and 2 of capture:ord-1", seen)
			}
		})
	}
}

func TestServiceRoutes(t *testing.T) {
	srv, _ := serve(t, paymentservice.NewService(nil))
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodPost, "/payments/probe", http.StatusNoContent},
		{http.MethodGet, "/payments/probe", http.StatusNotFound}, // a payment id, and no payment has it
		{http.MethodPut, "/payments/probe", http.StatusMethodNotAllowed},
		{http.MethodGet, "/payments/pay_00000001", http.StatusNotFound},
		{http.MethodGet, "/payments", http.StatusBadRequest}, // the lookup needs its orderId
		{http.MethodGet, "/payments?orderId=ord-1", http.StatusOK},
		{http.MethodGet, "/payments?orderId=ord-1&orderId=ord-2", http.StatusBadRequest},
		{http.MethodGet, "/payments?orderId=", http.StatusBadRequest},
		{http.MethodGet, "/payments?orderRef=ord-1", http.StatusBadRequest},
		{http.MethodPut, "/payments", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/payments/pay_00000001", http.StatusMethodNotAllowed},
		{http.MethodGet, "/refunds", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.method, " ", tt.path), func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
}

func TestFaultKindString(t *testing.T) {
	for k, want := range map[paymentservice.FaultKind]string{
		paymentservice.FaultNone: "FaultNone", paymentservice.FaultFail: "FaultFail", paymentservice.FaultDelay: "FaultDelay",
		paymentservice.FaultDrop: "FaultDrop", paymentservice.FaultHang: "FaultHang", 9: "FaultKind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("FaultKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

func TestRequestKindString(t *testing.T) {
	for k, want := range map[paymentservice.RequestKind]string{
		paymentservice.RequestCapture: "RequestCapture", paymentservice.RequestProbe: "RequestProbe", 9: "RequestKind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("RequestKind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
