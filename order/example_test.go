package order_test

import (
	"context"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// The same message delivered twice creates the order once; the same order id
// with other content is a mismatch.
func ExampleProcessor_Process() {
	p := order.NewProcessor(memstore.New("/orderId"), nil)
	ctx := context.Background()
	body := []byte(`{"orderId":"ord-7","customerId":"c-1","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)

	fmt.Println(p.Process(ctx, idempotent.Message{ID: "ord-7", Body: body, DeliveryCount: 1}).Outcome)
	fmt.Println(p.Process(ctx, idempotent.Message{ID: "ord-7", Body: body, DeliveryCount: 2}).Outcome)

	other := []byte(`{"orderId":"ord-7","customerId":"c-2","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)
	res := p.Process(ctx, idempotent.Message{ID: "ord-7", Body: other, DeliveryCount: 1})
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

// A duplicate of an order this worker created, or read, is answered from
// its cache of confirmed facts, without a store call; CacheStats tells the
// hit rate.
func ExampleProcessor_CacheStats() {
	p := order.NewProcessor(memstore.New("/orderId"), nil, order.WithFactCache(1000))
	ctx := context.Background()
	body := []byte(`{"orderId":"ord-8","customerId":"c-1","currency":"EUR",
		"lines":[{"sku":"book","quantity":1,"unitPriceMinor":2500}],"totalMinor":2500,
		"placedAt":"2026-11-30T10:00:00Z"}`)
	p.Process(ctx, idempotent.Message{ID: "ord-8", Body: body, DeliveryCount: 1})
	p.Process(ctx, idempotent.Message{ID: "ord-8", Body: body, DeliveryCount: 2})
	st := p.CacheStats()
	fmt.Printf("%d hits, %d misses, %d of %d entries, hit rate %.2f\n", st.Hits, st.Misses, st.Entries, st.Capacity, st.HitRate())
	// Output:
	// 1 hits, 1 misses, 1 of 1000 entries, hit rate 0.50
}
