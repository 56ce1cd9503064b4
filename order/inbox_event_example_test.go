package order_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// An OrderAccepted event as the outbox relay publishes it (MessageId the
// event id, Subject the event type, the event document as the body) is
// processed once by each inbox consumer: a republish is a duplicate for
// each, and neither suppresses the other.
func ExampleInboxConsumer_orderAcceptedEvent() {
	o := order.Order{OrderID: "ord-42", CustomerID: "cust-7", Currency: "EUR",
		Lines: []order.Line{{SKU: "sku-1", Quantity: 3, UnitPriceMinor: 1000}}, TotalMinor: 3000,
		PlacedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	docs, _ := order.NewWrite(o, o.OrderID, o.RequestHash(), time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC)).Documents()
	m := idempotent.Message{ID: order.EventID(o.OrderID), Subject: order.EventOrderAccepted, Body: docs[1].Body, DeliveryCount: 1}

	store := memstore.New("/orderId")
	loyalty, _ := order.NewInboxConsumer("loyalty", store, time.Hour, nil)
	audit, _ := order.NewInboxConsumer("audit", store, time.Hour, nil)
	ctx := context.Background()
	for _, c := range []*order.InboxConsumer{loyalty, loyalty, audit} {
		r := c.Process(ctx, m)
		fmt.Println(c.Name, r.Outcome, r.Key)
	}
	ev, _, err := order.DecodeAcceptedEvent(m.Body)
	fmt.Println(ev.ID, ev.TotalMinor, err)
	// Output:
	// loyalty created ord-42
	// loyalty duplicate ord-42
	// audit created ord-42
	// OrderAccepted:ord-42 3000 <nil>
}
