package payments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// orderBody returns an order message body with the given id, currency and
// lines (quantity, unit price), its total computed.
func orderBody(id, currency string, lines ...[2]int64) string {
	var ls []string
	var total int64
	for i, l := range lines {
		ls = append(ls, fmt.Sprintf(`{"sku":"SKU-%d","quantity":%d,"unitPriceMinor":%d}`, i, l[0], l[1]))
		total += l[0] * l[1]
	}
	return fmt.Sprintf(`{"orderId":%q,"customerId":"c","currency":%q,"lines":[%s],"totalMinor":%d,"placedAt":"2026-11-30T10:00:00Z"}`,
		id, currency, strings.Join(ls, ","), total)
}

// checkCapturable fails t if the payments service would reject the capture
// the worker makes for an order that order.Decode accepted: no committed
// order may carry a payment step that can never succeed. An order with a
// zero total has no payment step.
func checkCapturable(t *testing.T, body []byte) {
	t.Helper()
	o, err := order.Decode(body)
	if err != nil || o.TotalMinor == 0 {
		return
	}
	req := payments.CaptureRequest{OrderID: o.OrderID, AmountMinor: o.TotalMinor, Currency: o.Currency}
	if err := req.Validate(); err != nil {
		t.Fatalf("order %s passed order.Validate, but its capture %+v does not: %v", o.OrderID, req, err)
	}
	data, _ := json.Marshal(req)
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(string(data)))
	r.Header.Set(payments.HeaderIdempotencyKey, order.PaymentKey(o.OrderID))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	paymentservice.NewService(nil).ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		t.Fatalf("order %s passed order.Validate, but the service answered its capture %d: %s", o.OrderID, w.Code, w.Body)
	}
}

// Every order that order.Validate accepts with a positive total is a capture
// the payments service accepts: the id (as a reference and inside the key),
// the currency and the amount, at the limits of both contracts.
func TestValidOrdersAreCapturable(t *testing.T) {
	allChars := "AZaz09._-" // order ids exclude ":"
	tests := []struct {
		name string
		body string
	}{
		{"ordinary", orderBody("ord-1", "EUR", [2]int64{2, 1999})},
		{"longest id", orderBody(strings.Repeat("x", order.MaxOrderIDLength), "EUR", [2]int64{1, 1})},
		{"every id character", orderBody(allChars, "ZZZ", [2]int64{1, 1})},
		{"smallest amount", orderBody("o", "AAA", [2]int64{1, 1})},
		{"largest amount", orderBody("o", "EUR", [2]int64{1, order.MaxSafeInteger})},
		{"free line beside a paid one", orderBody("o", "EUR", [2]int64{1, 0}, [2]int64{order.MaxQuantity, 3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := order.Decode([]byte(tt.body)); err != nil {
				t.Fatalf("the case is not a valid order: %v", err)
			}
			checkCapturable(t, []byte(tt.body))
		})
	}
	// And the service's one amount rule the order side may meet: a zero
	// total, which the worker never sends.
	if err := (payments.CaptureRequest{OrderID: "o", AmountMinor: 0, Currency: "EUR"}).Validate(); err == nil {
		t.Error("the service accepts a zero amount; the worker's skip of zero totals is then unneeded")
	}
}

func FuzzValidOrdersAreCapturable(f *testing.F) {
	f.Add([]byte(orderBody("ord-1", "EUR", [2]int64{2, 1999})))
	f.Add([]byte(orderBody(strings.Repeat("x", order.MaxOrderIDLength), "ZZZ", [2]int64{1, math.MaxInt64})))
	f.Add([]byte(orderBody("a:b", "EUR", [2]int64{1, 0})))
	f.Add([]byte(orderBody("o", "EUR", [2]int64{1, order.MaxSafeInteger})))
	f.Fuzz(func(t *testing.T, body []byte) { checkCapturable(t, body) })
}

// The client and the reference service agree on the routes: every call the
// client makes reaches a route the service serves and gets its success
// status, the probe included (a client probing a path the service does not
// serve would keep a circuit breaker open).
func TestClientAndServiceAgreeOnRoutes(t *testing.T) {
	svc := paymentservice.NewService(nil)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		svc.ServeHTTP(sw, r)
		mu.Lock()
		got = append(got, fmt.Sprint(r.Method, " ", r.URL.Path, " ", sw.status))
		mu.Unlock()
	}))
	defer srv.Close()
	c, err := payments.NewClient(srv.URL, &payments.ClientOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		call string
		do   func() error
		want string
	}{
		{"Capture", func() error {
			_, err := c.Capture(ctx, payments.KeyFor("ord-1"), payments.CaptureRequest{OrderID: "ord-1", AmountMinor: 1, Currency: "EUR"})
			return err
		}, "POST /payments 201"},
		{"Lookup", func() error { _, err := c.Lookup(ctx, "ord-1"); return err }, "GET /payments 200"},
		{"Ping", func() error { return c.Ping(ctx) }, "POST /payments/probe 204"},
	}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			if err := tt.do(); err != nil {
				t.Fatalf("%s against the reference service: %v", tt.call, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("%s: the service saw %q, want [%q]", tt.call, got, tt.want)
			}
		})
	}
}

// statusWriter records the status code a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
