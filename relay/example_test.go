package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// printer is a relay.Sender that prints what it sends.
type printer struct{}

type printBatch []*azservicebus.Message

func (b *printBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	*b = append(*b, m)
	return nil
}
func (b *printBatch) NumMessages() int32 { return int32(len(*b)) }

func (printer) NewBatch(context.Context) (relay.Batch, error) { return &printBatch{}, nil }
func (printer) SendBatch(_ context.Context, b relay.Batch) error {
	for _, m := range *b.(*printBatch) {
		fmt.Println("sent", *m.MessageID, *m.Subject, m.ApplicationProperties)
	}
	return nil
}

// A consumer writes an invoice and its InvoiceIssued event, in the generic
// event shape, in one transactional batch; the relay publishes the event
// (and only the event) and checkpoints its lease, which it keeps beside the
// invoices, partitioned on /invoiceId. In production the feed is
// cosmosstore's (*Store).ChangeFeed, the lease store a *cosmosstore.Store
// and the sender relay.NewServiceBusSender(client.NewSender(topic, nil)).
func Example() {
	ctx := context.Background()
	store := memstore.New("/invoiceId")
	invoice := []byte(`{"id":"inv-1","invoiceId":"inv-1","type":"invoice","totalMinor":1000}`)
	event := []byte(`{"id":"InvoiceIssued:inv-1","invoiceId":"inv-1","type":"event","eventType":"InvoiceIssued","totalMinor":1000}`)
	if _, err := store.CreateBatch(ctx, "inv-1", []idempotent.Document{{ID: "inv-1", Body: invoice}, {ID: "InvoiceIssued:inv-1", Body: event}}); err != nil {
		panic(err)
	}
	r, err := relay.New(store.ChangeFeed(memstore.ChangeFeedOptions{}), store, printer{}, relay.Options{
		Name: "invoicerelay", Owner: "relay-1",
		Events:                relay.EventFormat{PartitionKeyField: "invoiceId"}, // the generic shape, and the key as a property
		LeasePartitionKeyPath: "/invoiceId",                                      // the leases share the invoices' container
		Logger:                slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := r.Step(ctx); err != nil { // Run(ctx) loops on it until ctx ends
		panic(err)
	}
	// Skipped: the invoice, and the relay's own manifest and lease, which
	// share the container and so its change feed.
	st := r.Stats()
	fmt.Println("owned", r.Owned(), "checkpoints", st.Checkpoints, "skipped", st.Skipped)
	// Output:
	// sent InvoiceIssued:inv-1 InvoiceIssued map[invoiceId:inv-1]
	// owned [00000000-100000000] checkpoints 1 skipped 3
}

// An EventFormat reads events of another shape: here a document of kind
// "outbox" whose messageId and name become the MessageId and Subject. The
// leases live in a container of their own, partitioned on /id (the
// default), so the relay only reads the shipments' container.
func ExampleEventFormat() {
	ctx := context.Background()
	shipments := memstore.New("/shipmentId")
	leases := memstore.New("/id")
	docs := []idempotent.Document{
		{ID: "shp-7", Body: []byte(`{"id":"shp-7","shipmentId":"shp-7","kind":"shipment"}`)},
		{ID: "out-1", Body: []byte(`{"id":"out-1","shipmentId":"shp-7","kind":"outbox","messageId":"shp-7/dispatched","name":"Dispatched"}`)},
	}
	if _, err := shipments.CreateBatch(ctx, "shp-7", docs); err != nil {
		panic(err)
	}
	r, err := relay.New(shipments.ChangeFeed(memstore.ChangeFeedOptions{}), leases, printer{}, relay.Options{
		Name: "shipmentrelay", Owner: "relay-1",
		Events: relay.EventFormat{TypeField: "kind", TypeValue: "outbox", IDField: "messageId", SubjectField: "name"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := r.Step(ctx); err != nil {
		panic(err)
	}
	fmt.Println("skipped", r.Stats().Skipped)
	// Output:
	// sent shp-7/dispatched Dispatched map[]
	// skipped 1
}

// The order example's outbox, as cmd/orderrelay runs it: package order
// names its event shape and the orders container's partition key path.
func Example_orders() {
	ctx := context.Background()
	store := memstore.New("/orderId") // partitioned on /orderId
	o := order.Order{OrderID: "ord-1", CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: 1000}}, TotalMinor: 1000, PlacedAt: time.Now()}
	w := order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now()) // the order and its OrderAccepted event
	docs, err := w.Documents()
	if err != nil {
		panic(err)
	}
	if _, err := store.CreateBatch(ctx, w.PartitionKey(), docs); err != nil { // in one transactional batch
		panic(err)
	}
	r, err := relay.New(store.ChangeFeed(memstore.ChangeFeedOptions{}), store, printer{}, relay.Options{
		Name: "orderrelay", Owner: "relay-1",
		Events: relay.EventFormat{TypeField: order.OutboxTypeField, TypeValue: order.OutboxTypeValue, IDField: order.OutboxIDField,
			SubjectField: order.OutboxSubjectField, PartitionKeyField: order.OutboxPartitionKeyField, TimeField: order.OutboxTimeField},
		LeasePartitionKeyPath: order.OutboxLeasePartitionKeyPath,
		Logger:                slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := r.Step(ctx); err != nil {
		panic(err)
	}
	fmt.Println("owned", r.Owned(), "checkpoints", r.Stats().Checkpoints)
	// Output:
	// sent OrderAccepted:ord-1 OrderAccepted map[orderId:ord-1]
	// owned [00000000-100000000] checkpoints 1
}
