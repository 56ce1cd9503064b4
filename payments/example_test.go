package payments_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// A redelivered order captures its payment again with the same key: the
// service answers with the original payment and charges once.
func ExampleClient_Capture() {
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{
		Now: func() time.Time { return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC) },
	})
	srv := httptest.NewServer(svc)
	defer srv.Close()

	client, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	req := payments.CaptureRequest{OrderID: "ord-000123", AmountMinor: 3998, Currency: "EUR"}
	for delivery := 1; delivery <= 2; delivery++ {
		p, err := client.Capture(ctx, payments.KeyFor(req.OrderID), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(delivery, p.PaymentID, p.Status, p.AmountMinor, p.Currency, p.CapturedAt.Format(time.RFC3339), "replayed:", p.Replayed)
	}

	req.AmountMinor = 4999
	_, err = client.Capture(ctx, payments.KeyFor(req.OrderID), req)
	fmt.Println(err)
	fmt.Println("charges:", svc.ChargesFor("ord-000123"))
	// Output:
	// 1 pay_00000001 captured 3998 EUR 2026-11-30T10:00:00Z replayed: false
	// 2 pay_00000001 captured 3998 EUR 2026-11-30T10:00:00Z replayed: true
	// payments: capture with key "capture:ord-000123": attempt 1 of 4: payment service answered 422 Unprocessable Entity: this idempotency key was used for a different request
	// charges: 1
}

// Fault hooks make the service fail deterministically: here the first two
// attempts of every key answer 503, and the client's retries, with the same
// key, capture the payment once.
func ExampleService_faults() {
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{
		Faults: func(r paymentservice.FaultRequest) paymentservice.Fault {
			if r.Attempt <= 2 {
				return paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusServiceUnavailable}
			}
			return paymentservice.Fault{}
		},
	})
	srv := httptest.NewServer(svc)
	defer srv.Close()

	client, err := payments.NewClient(srv.URL, &payments.ClientOptions{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := client.Capture(context.Background(), payments.KeyFor("ord-7"), payments.CaptureRequest{OrderID: "ord-7", AmountMinor: 2500, Currency: "EUR"})
	fmt.Println(p.Status, err, "charges:", svc.Charges())
	// Output:
	// captured <nil> charges: 1
}

func ExampleKeyFor() {
	fmt.Println(payments.KeyFor("ord-000123"))
	// Output:
	// capture:ord-000123
}

// The ledger outlives the idempotency keys: after the key has expired, a
// lookup still finds the payment, and tells a worker not to capture again.
func ExampleClient_Lookup() {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	client, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := client.Capture(ctx, payments.KeyFor("ord-7"), payments.CaptureRequest{OrderID: "ord-7", AmountMinor: 2500, Currency: "EUR"}); err != nil {
		fmt.Println(err)
		return
	}
	now = now.Add(48 * time.Hour) // the key is forgotten
	ps, err := client.Lookup(ctx, "ord-7")
	fmt.Println(len(ps), ps[0].PaymentID, ps[0].AmountMinor, err)
	ps, err = client.Lookup(ctx, "ord-8")
	fmt.Println(len(ps), err)
	// Output:
	// 1 pay_00000001 2500 <nil>
	// 0 <nil>
}

// A circuit breaker's probe: Ping asks whether a capture would go through.
// During an acquirer outage the service's own process answers GET /healthz,
// but the probe fails as a capture would, and nothing is charged.
func ExampleClient_Ping() {
	svc := paymentservice.NewService(nil)
	srv := httptest.NewServer(svc)
	defer srv.Close()

	client, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	fmt.Println("healthy:", client.Ping(ctx))

	end := svc.SetOutage(paymentservice.AcquirerOutage())
	err = client.Ping(ctx)
	fmt.Println("acquirer down:", errors.Is(err, payments.ErrUnavailable), err)
	end()

	fmt.Println("recovered:", client.Ping(ctx), "charges:", svc.Charges())
	// Output:
	// healthy: <nil>
	// acquirer down: true payments: probe (POST /payments/probe): payment service answered 503 Service Unavailable: outage: the service cannot capture payments now
	// recovered: <nil> charges: 0
}
