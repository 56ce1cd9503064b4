package payments_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/payments"
)

// A connection error names the URL it failed on; net/http's *url.Error
// prints it whole, so a PAYMENTS_URL carrying a credential (user
// information, an Azure Functions ?code=) would reach the logs through the
// worker's error. The client's errors hide those parts and keep the rest.
func TestConnectionErrorsHideCredentials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every attempt fails to connect
	c, err := payments.NewClient("http://user:SECRET1@"+addr+"/api/?code=SECRET2#SECRET3", &payments.ClientOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["Capture"] = c.Capture(ctx, "key-1", payments.CaptureRequest{OrderID: "o-1", AmountMinor: 100, Currency: "EUR"})
	_, checks["Lookup"] = c.Lookup(ctx, "o-1")
	checks["Ping"] = c.Ping(ctx)
	for call, err := range checks {
		if err == nil {
			t.Fatalf("%s: no error from a closed port", call)
		}
		msg := err.Error()
		if strings.Contains(msg, "SECRET") {
			t.Errorf("%s: error shows a credential: %s", call, msg)
		}
		if !strings.Contains(msg, addr) {
			t.Errorf("%s: error lost the host: %s", call, msg)
		}
		if !errors.Is(err, payments.ErrUnavailable) || !payments.IsTransient(err) {
			t.Errorf("%s: %v is no longer a transient ErrUnavailable", call, err)
		}
	}
}

// A base URL may carry a query of its own, such as an Azure Functions
// ?code=: every request keeps it, and Lookup adds orderId beside it rather
// than appending a second "?" (which made the key "code=KEY?orderId=o-1").
// A fragment is never sent and must not swallow the orderId.
func TestBaseURLQueryIsKept(t *testing.T) {
	got := make(chan *http.Request, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/payments":
			if r.Method == http.MethodGet {
				io.WriteString(w, `{"payments":[]}`)
				return
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"paymentId":"p-1","orderId":"o-1","amountMinor":100,"currency":"EUR"}`)
		default:
			io.WriteString(w, `{}`)
		}
	}))
	defer srv.Close()
	c, err := payments.NewClient(srv.URL+"/api/?code=KEY#frag", &payments.ClientOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Lookup(ctx, "o-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Capture(ctx, "key-1", payments.CaptureRequest{OrderID: "o-1", AmountMinor: 100, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	want := []struct{ method, path, query string }{
		{http.MethodGet, "/api/payments", "code=KEY&orderId=o-1"},
		{http.MethodPost, "/api/payments", "code=KEY"},
		{http.MethodPost, "/api/payments/probe", "code=KEY"},
	}
	for _, w := range want {
		r := <-got
		if r.Method != w.method || r.URL.Path != w.path || r.URL.RawQuery != w.query {
			t.Errorf("request %s %s?%s, want %s %s?%s", r.Method, r.URL.Path, r.URL.RawQuery, w.method, w.path, w.query)
		}
	}
}
