package sbbroker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// Example runs the unmodified azservicebus client against the broker:
// send, receive with PeekLock, complete.
func Example() {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		log.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer broker.Close()

	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	sender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	id := "order-1"
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(`{"qty":2}`)}, nil); err != nil {
		log.Fatal(err)
	}

	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s %s delivery %d\n", m.MessageID, m.Body, m.DeliveryCount)
		if err := receiver.CompleteMessage(ctx, m, nil); err != nil {
			log.Fatal(err)
		}
	}
	q, _ := ns.Queue("orders") // the queue model shows what the broker did
	fmt.Println("completed:", q.Snapshot().Counters.Completed)
	// Output:
	// order-1 {"qty":2} delivery 1
	// completed: 1
}

// ExampleBroker_DetachReceivers shows a fault control: the broker detaches
// the receive link, and the SDK settles the message it already holds
// through $management instead.
func ExampleBroker_DetachReceivers() {
	ns := sbqueue.NewNamespace(nil)
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer broker.Close()
	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil); err != nil {
		log.Fatal(err)
	}
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println("detached links:", broker.DetachReceivers("orders"))
	fmt.Println("complete error:", receiver.CompleteMessage(ctx, msgs[0], nil))
	fmt.Println("completed:", q.Snapshot().Counters.Completed)
	// Output:
	// detached links: 1
	// complete error: <nil>
	// completed: 1
}

// Example_topic publishes to a topic and receives each subscription's own
// copy, as azservicebus addresses them.
func Example_topic() {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, sub := range []string{"loyalty", "shipping"} {
		if _, err := topic.CreateSubscription(sub, sbqueue.SubscriptionOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer broker.Close()

	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	sender, err := client.NewSender("order-events", nil)
	if err != nil {
		log.Fatal(err)
	}
	id := "order-1/created"
	for range 2 { // the resend is dropped at the topic
		if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(`{"orderId":"order-1"}`)}, nil); err != nil {
			log.Fatal(err)
		}
	}
	for _, sub := range []string{"loyalty", "shipping"} {
		receiver, err := client.NewReceiverForSubscription("order-events", sub, nil)
		if err != nil {
			log.Fatal(err)
		}
		msgs, err := receiver.ReceiveMessages(ctx, 1, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s delivery %d\n", sub, msgs[0].MessageID, msgs[0].DeliveryCount)
		if err := receiver.CompleteMessage(ctx, msgs[0], nil); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("dropped at the topic:", broker.Dropped()["order-events"].Duplicates)
	// Output:
	// loyalty: order-1/created delivery 1
	// shipping: order-1/created delivery 1
	// dropped at the topic: 1
}
