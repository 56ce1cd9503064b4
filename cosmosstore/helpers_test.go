package cosmosstore_test

import (
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// newWrite returns the documents of a valid order, as the processor builds
// them.
func newWrite(orderID, customerID string) order.Write {
	o := order.Order{
		OrderID:    orderID,
		CustomerID: customerID,
		Currency:   "EUR",
		Lines:      []order.Line{{SKU: "SKU-1", Quantity: 2, UnitPriceMinor: 1999}},
		TotalMinor: 3998,
		PlacedAt:   time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	}
	processed := time.Date(2026, 11, 30, 10, 0, 1, 123456789, time.UTC)
	return order.NewWrite(o, orderID, o.RequestHash(), processed)
}
