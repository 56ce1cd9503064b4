package order_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// A resubmission two days after the first capture, once the payments service
// has forgotten the key: the worker looks the payment up in the service's
// ledger instead of capturing again, and the order is charged once.
func ExampleWithPaymentOptions() {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: 24 * time.Hour, Now: clock})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	client, err := payments.NewClient(srv.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	store := memstore.New("/orderId")
	p := order.NewProcessor(store, clock, order.WithDocuments(store), order.WithPaymentOptions(order.PaymentOptions{
		Gateway:      payments.Gateway{Client: client},
		Lease:        time.Minute, // the queue's lock duration
		Owner:        "worker-1",
		KeyRetention: 24 * time.Hour, // never more than the service keeps keys
	}))
	body := []byte(`{"orderId":"ord-7","customerId":"c-1","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)
	ctx := context.Background()

	fmt.Println(p.Process(ctx, idempotent.Message{ID: "ord-7", Body: body, SequenceNumber: 1, DeliveryCount: 1}).Outcome)
	now = now.Add(48 * time.Hour)
	fmt.Println(p.Process(ctx, idempotent.Message{ID: "ord-7", Body: body, SequenceNumber: 2, DeliveryCount: 1}).Outcome)
	fmt.Println("charges:", svc.ChargesFor("ord-7"))
	// Output:
	// created
	// duplicate
	// charges: 1
}
