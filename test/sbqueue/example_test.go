package sbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// A lock that lapses makes the message available again with the next
// delivery count; settling with the old lock token then fails.
func Example() {
	clock := sbqueue.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ns := sbqueue.NewNamespace(clock)
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{LockDuration: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, err := q.Send(ctx, sbqueue.Message{MessageID: "order-1", Body: []byte(`{"orderId":"order-1"}`)}); err != nil {
		panic(err)
	}

	first, _ := q.Receive(ctx, 1)
	fmt.Println(first[0].MessageID, "delivery", first[0].DeliveryCount, "locked until", first[0].LockedUntil.Format(time.TimeOnly))

	clock.Advance(30 * time.Second) // the handler overran its lock

	second, _ := q.Receive(ctx, 1)
	fmt.Println(second[0].MessageID, "delivery", second[0].DeliveryCount)
	fmt.Println("complete with the old token:", errors.Is(q.Complete(first[0].LockToken), sbqueue.ErrLockLost))
	fmt.Println("complete with the new token:", q.Complete(second[0].LockToken))
	// Output:
	// order-1 delivery 1 locked until 00:00:30
	// order-1 delivery 2
	// complete with the old token: true
	// complete with the new token: <nil>
}

// With duplicate detection on, a resend of the same MessageID inside the
// window is accepted and dropped, whatever its content.
func ExampleQueue_Send_duplicateDetection() {
	clock := sbqueue.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q, err := sbqueue.NewNamespace(clock).CreateQueue("orders", sbqueue.QueueOptions{
		RequiresDuplicateDetection: true,
		DuplicateDetectionWindow:   10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, step := range []struct {
		after time.Duration
		body  string
	}{{0, "v1"}, {time.Minute, "v2"}, {9 * time.Minute, "v3"}} {
		clock.Advance(step.after)
		enqueued, err := q.Send(ctx, sbqueue.Message{MessageID: "order-1", Body: []byte(step.body)})
		fmt.Println(step.body, "enqueued:", enqueued, err)
	}
	// Output:
	// v1 enqueued: true <nil>
	// v2 enqueued: false <nil>
	// v3 enqueued: true <nil>
}

// The dead-letter queue is received from and settled like any queue.
func ExampleQueue_DeadLetterQueue() {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, err := q.Send(ctx, sbqueue.Message{MessageID: "order-1", Body: []byte("not json")}); err != nil {
		panic(err)
	}
	m := q.TryReceive(1)[0]
	if err := q.DeadLetter(m.LockToken, "InvalidMessage", "body is not JSON", nil); err != nil {
		panic(err)
	}

	dlq, _ := ns.Queue("orders/$DeadLetterQueue")
	d := dlq.TryReceive(1)[0]
	fmt.Println(d.MessageID, d.DeadLetterReason, d.ApplicationProperties["DeadLetterErrorDescription"])
	fmt.Println(dlq.Complete(d.LockToken), len(dlq.Peek(10)))
	// Output:
	// order-1 InvalidMessage body is not JSON
	// <nil> 0
}

// A topic copies every message to each of its subscriptions; each
// subscription is a queue of its own. Duplicate detection is the topic's:
// a resend inside the window reaches no subscription.
func ExampleTopic() {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true})
	if err != nil {
		panic(err)
	}
	loyalty, _ := topic.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{})
	shipping, _ := topic.CreateSubscription("shipping", sbqueue.SubscriptionOptions{MaxDeliveryCount: 5})
	ctx := context.Background()
	for _, body := range []string{"created", "created again"} {
		enqueued, _ := topic.Send(ctx, sbqueue.Message{MessageID: "order-1/created", Body: []byte(body)})
		fmt.Println(body, "enqueued:", enqueued)
	}

	l := loyalty.TryReceive(1)[0]
	fmt.Println(loyalty.Complete(l.LockToken), len(loyalty.Peek(10)))
	s := shipping.TryReceive(1)[0]
	fmt.Println(string(s.Body), "delivery", s.DeliveryCount, "on", s.SequenceNumber == l.SequenceNumber)

	same, _ := ns.Queue("Order-Events/subscriptions/SHIPPING")
	fmt.Println(same == shipping, shipping.Name())
	// Output:
	// created enqueued: true
	// created again enqueued: false
	// <nil> 0
	// created delivery 1 on true
	// true order-events/Subscriptions/shipping
}
