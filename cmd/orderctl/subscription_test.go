package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// topicStack is a stack whose broker also has the topic order-events with
// the subscriptions loyalty and shipping, as the outbox relay publishes to.
type topicStack struct {
	*stack
	topic             *sbqueue.Topic
	loyalty, shipping *sbqueue.Queue
}

func newTopicStack(t *testing.T) *topicStack {
	t.Helper()
	ctx := context.Background()
	cosmium := cosmiumtest.Start(t)
	cc, err := cosmosstore.NewClientWithKey(cosmium.Endpoint, cosmium.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, cc, "orders", "orders", order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	store, err := cosmosstore.New(cc, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	clock := sbqueue.NewVirtualClock(time.Now())
	ns := sbqueue.NewNamespace(clock)
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{
		LockDuration: defaultLockDuration, MaxDeliveryCount: 10, RequiresDuplicateDetection: true,
		DuplicateDetectionWindow: defaultDuplicateWindow, DefaultMessageTimeToLive: defaultMessageTTL, DeadLetteringOnMessageExpiration: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{
		RequiresDuplicateDetection: true, DuplicateDetectionWindow: defaultDuplicateWindow, DefaultMessageTimeToLive: defaultMessageTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	so := sbqueue.SubscriptionOptions{LockDuration: defaultLockDuration, MaxDeliveryCount: 10, DeadLetteringOnMessageExpiration: true}
	ts := &topicStack{topic: topic}
	if ts.loyalty, err = topic.CreateSubscription("loyalty", so); err != nil {
		t.Fatal(err)
	}
	if ts.shipping, err = topic.CreateSubscription("shipping", so); err != nil {
		t.Fatal(err)
	}
	broker := sbbroker.New(ns, sbbroker.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Close() })
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	ts.stack = &stack{t: t, clock: clock, q: q, broker: broker, client: client, store: store, env: map[string]string{
		"SERVICEBUS_CONNECTION_STRING": broker.ConnectionString(), "SERVICEBUS_QUEUE": "orders",
		"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty",
		"COSMOS_ENDPOINT": cosmium.Endpoint, "COSMOS_KEY": cosmium.Key,
	}}
	return ts
}

// publish sends an OrderAccepted event to the topic as the outbox relay
// does: MessageId = the event id, Subject = the event type, the event
// document as the JSON body.
func (s *topicStack) publish(ev order.AcceptedEvent) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := json.Marshal(ev)
	if err != nil {
		s.t.Fatal(err)
	}
	sender, err := s.client.NewSender("order-events", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer sender.Close(ctx)
	id, subject, ct := ev.ID, ev.EventType, "application/json"
	if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Subject: &subject, ContentType: &ct, Body: body}, nil); err != nil {
		s.t.Fatal(err)
	}
}

// settleAll receives n messages from a subscription through the SDK and
// settles each with settle.
func (s *topicStack) settleAll(sub string, n int, settle func(context.Context, *azservicebus.Receiver, *azservicebus.ReceivedMessage) error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.client.NewReceiverForSubscription("order-events", sub, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer r.Close(ctx)
	var got []*azservicebus.ReceivedMessage
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			s.t.Fatalf("receive from %s: %v", sub, err)
		}
		got = append(got, msgs...)
	}
	for _, m := range got {
		if err := settle(ctx, r, m); err != nil {
			s.t.Fatalf("settle %s on %s: %v", m.MessageID, sub, err)
		}
	}
}

// state is what a subscription holds: active, locked and dead-lettered
// messages, and how many were completed.
func state(q *sbqueue.Queue) [4]int64 {
	snap := q.Snapshot()
	return [4]int64{int64(len(snap.Active)), int64(len(snap.Locked)), int64(len(snap.DeadLetters)), snap.Counters.Completed}
}

// TestSubscriptionDeadLetters runs list, show, purge and the refused
// resubmit on the dead-letter queue of the loyalty subscription, through
// the public SDK against the test broker, and checks that the shipping
// subscription and the orders queue's dead-letter queue are untouched.
func TestSubscriptionDeadLetters(t *testing.T) {
	s := newTopicStack(t)
	gen := ordergen.New(11, "sub")
	now := s.clock.Now()

	// Order 0 is stored; order 1's event is published but its order is not
	// in this container (deleted since).
	o0, o1 := gen.Order(0), gen.Order(1)
	w0 := order.NewWrite(o0, gen.ID(0), o0.RequestHash(), now)
	e2etest.WriteOrder(t, s.store, w0)
	w1 := order.NewWrite(o1, gen.ID(1), o1.RequestHash(), now)
	// Order 2 was deleted after its event and created again with other
	// content.
	o2 := gen.Order(2)
	w2 := order.NewWrite(o2, gen.ID(2), o2.RequestHash(), now)
	o2b := ordergen.Changed(o2)
	if o2b.RequestHash() == o2.RequestHash() {
		t.Fatal("ordergen.Changed kept the request hash")
	}
	e2etest.WriteOrder(t, s.store, order.NewWrite(o2b, gen.ID(2), o2b.RequestHash(), now))
	for _, w := range []order.Write{w0, w1, w2} {
		s.publish(w.Event)
	}
	// loyalty dead-letters every event, shipping processes every one.
	reason, desc := idempotent.ReasonUnsupportedMessage, "unknown subject OrderAccepted"
	s.settleAll("loyalty", 3, func(ctx context.Context, r *azservicebus.Receiver, m *azservicebus.ReceivedMessage) error {
		return r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
	})
	s.settleAll("shipping", 3, func(ctx context.Context, r *azservicebus.Receiver, m *azservicebus.ReceivedMessage) error {
		return r.CompleteMessage(ctx, m, nil)
	})
	// The orders queue has a dead letter of its own, which the
	// subscription's commands must not see.
	s.deadLetter("orders-dead", ordergen.Malformed("orders-dead", 0), idempotent.ReasonInvalidMessage, "malformed JSON", nil)
	shipping := state(s.shipping)
	if want := [4]int64{0, 0, 0, 3}; shipping != want {
		t.Fatalf("shipping (active, locked, dead-lettered, completed) = %v, want %v", shipping, want)
	}
	s.clock.Advance(2 * time.Hour)

	t.Run("list", func(t *testing.T) {
		out, err := s.orderctl("dlq", "list")
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "list", out, "order-events/Subscriptions/loyalty/$DeadLetterQueue: 3 messages", w0.Event.ID+" (2h ago)")
		if !regexp.MustCompile(`(?m)^` + reason + `\s+3\s+0\s+3\s+0\s+0\s`).MatchString(out) {
			t.Errorf("list has no line %s with 3 messages, 1h-1d old:\n%s", reason, out)
		}
		if strings.Contains(out, "orders-dead") || strings.Contains(out, idempotent.ReasonInvalidMessage) {
			t.Errorf("list of the subscription shows the queue's dead letter:\n%s", out)
		}
		s.env["SERVICEBUS_SUBSCRIPTION"] = "shipping"
		out, err = s.orderctl("dlq", "list")
		s.env["SERVICEBUS_SUBSCRIPTION"] = "loyalty"
		if err != nil || !strings.Contains(out, "order-events/Subscriptions/shipping/$DeadLetterQueue: 0 messages") {
			t.Errorf("list of shipping = %v:\n%s", err, out)
		}
	})

	t.Run("show the event and the stored order's status", func(t *testing.T) {
		out, err := s.orderctl("dlq", "show", w0.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`DeadLetterReason:\s+` + reason + `\n`).MatchString(out) {
			t.Errorf("show lacks the reason:\n%s", out)
		}
		mustContain(t, "show", out, "message "+w0.Event.ID+" in order-events/Subscriptions/loyalty/$DeadLetterQueue",
			desc, "Subject:", order.EventOrderAccepted, `"eventType": "OrderAccepted"`, `"orderId": "`+gen.ID(0)+`"`,
			"stored order "+gen.ID(0)+": status accepted version 1, created by message "+gen.ID(0))
		out, err = s.orderctl("dlq", "show", w1.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "show without the order", out, "no stored order "+gen.ID(1))
		out, err = s.orderctl("dlq", "show", w2.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "show with another order", out, "stored order "+gen.ID(2)+": status accepted",
			"the stored order's request hash "+o2b.RequestHash()+" is not the event's "+o2.RequestHash())
		endpoint := s.env["COSMOS_ENDPOINT"]
		delete(s.env, "COSMOS_ENDPOINT")
		out, err = s.orderctl("dlq", "show", w0.Event.ID)
		s.env["COSMOS_ENDPOINT"] = endpoint
		if err != nil || !strings.Contains(out, "set COSMOS_ENDPOINT (-cosmos-endpoint) to show the stored order's status") || strings.Contains(out, "stored order ") {
			t.Errorf("show without Cosmos DB = %v:\n%s", err, out)
		}
		if _, err := s.orderctl("dlq", "show", "orders-dead"); err == nil {
			t.Error("show on the subscription found the queue's dead letter")
		}
	})

	t.Run("resubmit is refused and sends nothing", func(t *testing.T) {
		for _, args := range [][]string{{"dlq", "resubmit", w0.Event.ID, "-yes"}, {"dlq", "resubmit", "-all"}} {
			out, err := s.orderctl(args...)
			var ue *cli.UsageError
			if err == nil || errors.As(err, &ue) {
				t.Fatalf("%v = %v, want a refusal:\n%s", args, err, out)
			}
			for _, want := range []string{"dlq resubmit does not work on a subscription's dead-letter queue", `topic "order-events" would reach every subscription`,
				`subscription "loyalty"'s consumer act on the event by hand`, "then dlq purge it"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: refusal %q lacks %q", args, err, want)
				}
			}
		}
		if c := s.topic.Counters(); c.Sent != 3 || c.DuplicatesDropped != 0 {
			t.Errorf("topic counters %+v: something was sent", c)
		}
		if got := state(s.loyalty); got != [4]int64{0, 0, 3, 0} {
			t.Errorf("loyalty = %v, want its 3 dead letters only", got)
		}
		if got := state(s.shipping); got != shipping {
			t.Errorf("shipping = %v, want %v", got, shipping)
		}
	})

	t.Run("purge", func(t *testing.T) {
		out, err := s.orderctl("dlq", "purge", w0.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "purge dry run", out, "purge order-events/Subscriptions/loyalty/$DeadLetterQueue: 1 of 3 messages selected", "would purge "+w0.Event.ID)
		if got := state(s.loyalty); got[2] != 3 {
			t.Errorf("a dry-run purge removed messages: loyalty %v", got)
		}
		out, err = s.orderctl("dlq", "purge", w0.Event.ID, "-yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		mustContain(t, "purge", out, "purged "+w0.Event.ID, "purged 1 of 1")
		dead := s.loyalty.DeadLetterQueue().Peek(10)
		if len(dead) != 2 || dead[0].MessageID != w1.Event.ID || dead[1].MessageID != w2.Event.ID {
			t.Errorf("loyalty's dead-letter queue after the purge: %v", dead)
		}
		out, err = s.orderctl("dlq", "purge", "-all", "-yes")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		mustContain(t, "purge -all", out, "purged "+w1.Event.ID, "purged "+w2.Event.ID, "purged 2 of 2")
		if got := state(s.loyalty); got != [4]int64{0, 0, 0, 0} {
			t.Errorf("loyalty after purge -all = %v, want empty", got)
		}
		if got := state(s.shipping); got != shipping {
			t.Errorf("shipping = %v, want %v", got, shipping)
		}
		if _, d := s.counts(); d != 1 {
			t.Errorf("the orders queue's dead-letter queue has %d messages, want its 1", d)
		}
		if c := s.topic.Counters(); c.Sent != 3 {
			t.Errorf("topic counters %+v: something was sent", c)
		}
	})
}

// The resubmit path itself refuses a subscription, should a caller bypass
// Validate: nothing may be sent to the topic.
func TestApplyRefusesResubmitOnASubscription(t *testing.T) {
	d := &dlq{topic: "order-events", subscription: "loyalty", now: time.Now}
	_, err := d.apply(context.Background(), config{Verb: "resubmit"}, map[int64]bool{1: true}, 1, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refused on a subscription's dead-letter queue") {
		t.Errorf("apply = %v, want a refusal", err)
	}
}
