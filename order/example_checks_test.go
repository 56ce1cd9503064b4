package order_test

import (
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// A producer checks the order ids it builds; a colon would let an order
// share a MessageId with a status change.
func ExampleValidateOrderID() {
	fmt.Println(order.ValidateOrderID("ord-000123"))
	fmt.Println(order.ValidateOrderID("X:v2"))
	// Output:
	// <nil>
	// order: orderId: character ':' at offset 1 is not allowed in an order id (it separates the parts of the ids derived from it)
}

// A worker checks its inbox consumer's name and marker TTL at start.
func ExampleNewInboxConsumer() {
	s := memstore.New("/orderId")
	_, err := order.NewInboxConsumer("loyalty", s, 36*24*time.Hour, nil)
	fmt.Println(err)
	_, err = order.NewInboxConsumer("loyalty/eu", s, 36*24*time.Hour, nil)
	fmt.Println(err)
	// Output:
	// <nil>
	// inbox consumer name "loyalty/eu": character '/' at offset 7 is not one of A-Z a-z 0-9 . _ - (Cosmos DB ids forbid / \ ? #, and ':' separates the parts of a marker id)
}

// The retention check is generic: here, a payments service's idempotency
// keys against the queue's redelivery horizon.
func ExampleRedeliveryHorizon_CheckRetentionOf() {
	h := order.RedeliveryHorizon{LockDuration: time.Minute, MaxDeliveryCount: 10, MessageTimeToLive: time.Hour,
		DuplicateDetectionWindow: 10 * time.Minute, ResubmissionHorizon: time.Hour}
	min, _ := h.MinRetention()
	fmt.Println(min)
	fmt.Println(h.CheckRetentionOf("payment idempotency keys", 24*time.Hour))
	h.MessageTimeToLive = 0 // unlimited
	fmt.Println(h.CheckRetentionOf("payment idempotency keys", 24*time.Hour) != nil)
	// Output:
	// 3h12m0s
	// <nil>
	// true
}
