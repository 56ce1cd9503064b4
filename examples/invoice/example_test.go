package invoice_test

import (
	"context"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// The invoice consumer on the in-memory model of Cosmos DB: the first
// delivery creates the invoice and its event, a redelivery is a duplicate,
// and the same invoiceId with another amount is dead-lettered.
func Example() {
	ctx := context.Background()
	store := memstore.NewWithPartitionKey("invoiceId") // the container's partition key path is /invoiceId
	consumer := invoice.NewConsumer(store)

	m := idempotent.Message{ID: "inv-1", DeliveryCount: 1,
		Body: []byte(`{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}`)}
	fmt.Println(consumer.Process(ctx, m).Outcome)

	m.DeliveryCount = 2 // the lock expired before the settlement: Service Bus delivers it again
	fmt.Println(consumer.Process(ctx, m).Outcome)

	reused := idempotent.Message{ID: "inv-1", DeliveryCount: 1,
		Body: []byte(`{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":2500,"issuedAt":"2026-11-30T10:00:00Z"}`)}
	r := consumer.Process(ctx, reused)
	fmt.Println(r.Outcome, r.Reason)

	for _, it := range store.Items() {
		fmt.Println(it.ID)
	}
	// Output:
	// created
	// duplicate
	// mismatch InvoiceIdReused
	// InvoiceIssued:inv-1
	// inv-1
}
