package cosmosstore_test

import (
	"context"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
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

// writeOrder creates the documents of w in one transactional batch under
// w.PartitionKey(), as the core's consumer writes an accepted order, and
// returns CreateBatch's error: it matches idempotent.ErrAlreadyExists when
// any of them exists.
func writeOrder(ctx context.Context, s idempotent.Store, w order.Write) error {
	docs, err := w.Documents()
	if err != nil {
		return err
	}
	_, err = s.CreateBatch(ctx, w.PartitionKey(), docs)
	return err
}
