package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

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
		fmt.Println("sent", *m.MessageID, *m.Subject)
	}
	return nil
}

// The worker writes an order and its OrderAccepted event in one batch; the
// relay publishes the event (and only the event) and checkpoints its lease.
// In production the feed is cosmosstore's (*Store).ChangeFeed, the lease
// store the same *cosmosstore.Store and the sender
// relay.NewServiceBusSender(client.NewSender("order-events", nil)).
func Example() {
	ctx := context.Background()
	store := memstore.New()
	o := order.Order{OrderID: "ord-1", CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: 1000}}, TotalMinor: 1000, PlacedAt: time.Now()}
	if _, err := order.WriteOrder(ctx, store, order.NewWrite(o, o.OrderID, o.RequestHash(), time.Now())); err != nil {
		panic(err)
	}
	r, err := relay.New(store.ChangeFeed(memstore.ChangeFeedOptions{}), store, printer{},
		relay.Options{Name: "orderrelay", Owner: "relay-1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	if err := r.Step(ctx); err != nil { // Run(ctx) loops on it until ctx ends
		panic(err)
	}
	fmt.Println("owned", r.Owned(), "checkpoints", r.Stats().Checkpoints)
	// Output:
	// sent OrderAccepted:ord-1 OrderAccepted
	// owned [00000000-100000000] checkpoints 1
}
