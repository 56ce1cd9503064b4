package order_test

import (
	"context"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// The same message delivered twice creates the order once; the same order id
// with other content is a mismatch.
func ExampleProcessor_Process() {
	p := order.NewProcessor(memstore.New(), nil)
	ctx := context.Background()
	body := []byte(`{"orderId":"ord-7","customerId":"c-1","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)

	fmt.Println(p.Process(ctx, order.Message{ID: "ord-7", Body: body, DeliveryCount: 1}).Outcome)
	fmt.Println(p.Process(ctx, order.Message{ID: "ord-7", Body: body, DeliveryCount: 2}).Outcome)

	other := []byte(`{"orderId":"ord-7","customerId":"c-2","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)
	res := p.Process(ctx, order.Message{ID: "ord-7", Body: other, DeliveryCount: 1})
	fmt.Println(res.Outcome, res.Reason)
	// Output:
	// created
	// duplicate
	// mismatch OrderIdReused
}

func ExampleDecode() {
	_, err := order.Decode([]byte(`{"orderId":"ord-1","customerId":"c","currency":"EUR",
		"lines":[{"sku":"a","quantity":2,"unitPriceMinor":100}],"totalMinor":150,
		"placedAt":"2026-11-30T10:00:00Z"}`))
	fmt.Println(err)
	// Output:
	// order: totalMinor: 150 does not equal the sum of the lines, 200
}
