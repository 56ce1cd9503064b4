package sbbroker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

const topicName = "order-events"

// topicFixture is a broker with the topic order-events and its
// subscriptions loyalty and shipping, and an SDK client connected to it.
type topicFixture struct {
	broker            *sbbroker.Broker
	topic             *sbqueue.Topic
	loyalty, shipping *sbqueue.Queue
	client            *azservicebus.Client
}

func newTopicFixture(t testing.TB, clock sbqueue.Clock, to sbqueue.TopicOptions, so sbqueue.SubscriptionOptions) *topicFixture {
	t.Helper()
	ns := sbqueue.NewNamespace(clock)
	topic, err := ns.CreateTopic(topicName, to)
	if err != nil {
		t.Fatal(err)
	}
	f := &topicFixture{topic: topic}
	if f.loyalty, err = topic.CreateSubscription("loyalty", so); err != nil {
		t.Fatal(err)
	}
	if f.shipping, err = topic.CreateSubscription("shipping", so); err != nil {
		t.Fatal(err)
	}
	f.broker = sbbroker.New(ns, sbbroker.Options{Logger: testLogger(t)})
	if err := f.broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if f.client, err = azservicebus.NewClientFromConnectionString(f.broker.ConnectionString(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.client.Close(ctx)
		f.broker.Close()
	})
	return f
}

// publish sends msgs to the topic through the SDK.
func (f *topicFixture) publish(t *testing.T, ctx context.Context, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := f.client.NewSender(topicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatalf("SendMessage to the topic: %v", err)
		}
	}
}

// subscriber returns a PeekLock receiver on a subscription, or on its
// dead-letter queue.
func (f *topicFixture) subscriber(t *testing.T, sub string, deadLetters bool) *azservicebus.Receiver {
	t.Helper()
	var o *azservicebus.ReceiverOptions
	if deadLetters {
		o = &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter}
	}
	r, err := f.client.NewReceiverForSubscription(topicName, sub, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func TestTopicEachSubscriptionReceivesItsOwnCopy(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{
		MessageID:             to("order-1/created"),
		Body:                  []byte(`{"orderId":"order-1"}`),
		Subject:               to("OrderCreated"),
		ApplicationProperties: map[string]any{"orderId": "order-1"},
	})
	loyalty, shipping := f.subscriber(t, "loyalty", false), f.subscriber(t, "shipping", false)
	l, s := receiveOne(t, ctx, loyalty), receiveOne(t, ctx, shipping)
	for _, m := range []*azservicebus.ReceivedMessage{l, s} {
		if m.MessageID != "order-1/created" || string(m.Body) != `{"orderId":"order-1"}` || *m.Subject != "OrderCreated" ||
			m.ApplicationProperties["orderId"] != "order-1" || m.DeliveryCount != 1 {
			t.Errorf("copy %q %q subject %v props %v count %d", m.MessageID, m.Body, m.Subject, m.ApplicationProperties, m.DeliveryCount)
		}
	}
	if *l.SequenceNumber != *s.SequenceNumber || l.LockToken == s.LockToken {
		t.Errorf("sequence numbers %d/%d (want the topic's, equal), lock tokens %x/%x (want distinct)", *l.SequenceNumber, *s.SequenceNumber, l.LockToken, s.LockToken)
	}

	// Completing loyalty's copy leaves shipping's locked and settleable.
	if err := loyalty.CompleteMessage(ctx, l, nil); err != nil {
		t.Fatalf("CompleteMessage on loyalty: %v", err)
	}
	if snap := f.shipping.Snapshot(); len(snap.Locked) != 1 || snap.Counters.Completed != 0 {
		t.Fatalf("shipping after loyalty's complete: %d locked, %d completed; want its copy still locked", len(snap.Locked), snap.Counters.Completed)
	}
	if err := shipping.CompleteMessage(ctx, s, nil); err != nil {
		t.Fatalf("CompleteMessage on shipping: %v", err)
	}
	for _, q := range []*sbqueue.Queue{f.loyalty, f.shipping} {
		if snap := q.Snapshot(); len(snap.Active)+len(snap.Locked) != 0 || snap.Counters.Completed != 1 {
			t.Errorf("%s: %d active, %d locked, %d completed; want 0, 0, 1", q.Name(), len(snap.Active), len(snap.Locked), snap.Counters.Completed)
		}
	}
}

func TestTopicBatchFansOut(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	s, err := f.client.NewSender(topicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := batch.AddMessage(&azservicebus.Message{MessageID: to(id)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendMessageBatch to the topic: %v", err)
	}
	for _, q := range []*sbqueue.Queue{f.loyalty, f.shipping} {
		var got []string
		for _, m := range q.Snapshot().Active {
			got = append(got, m.MessageID)
		}
		if fmt.Sprint(got) != "[a b c]" {
			t.Errorf("%s holds %v, want [a b c]", q.Name(), got)
		}
	}
}

func TestTopicAbandonRedeliversPerSubscription(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("e-1")})
	loyalty, shipping := f.subscriber(t, "loyalty", false), f.subscriber(t, "shipping", false)
	for want := uint32(1); want <= 3; want++ {
		m := receiveOne(t, ctx, loyalty)
		if m.DeliveryCount != want {
			t.Fatalf("loyalty delivery %d has DeliveryCount %d", want, m.DeliveryCount)
		}
		if err := loyalty.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{
			PropertiesToModify: map[string]any{"attempt": int64(want)},
		}); err != nil {
			t.Fatalf("AbandonMessage: %v", err)
		}
	}
	s := receiveOne(t, ctx, shipping)
	if s.DeliveryCount != 1 || s.ApplicationProperties["attempt"] != nil {
		t.Errorf("shipping's copy: DeliveryCount %d, attempt %v; want 1 and unset: loyalty's abandons are loyalty's", s.DeliveryCount, s.ApplicationProperties["attempt"])
	}
	if m := receiveOne(t, ctx, loyalty); m.DeliveryCount != 4 || m.ApplicationProperties["attempt"] != int64(3) {
		t.Errorf("loyalty's fourth delivery: DeliveryCount %d, attempt %v; want 4, 3", m.DeliveryCount, m.ApplicationProperties["attempt"])
	}
}

func TestTopicMaxDeliveryCountDeadLettersInThatSubscription(t *testing.T) {
	const maxDeliveries = 2
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{MaxDeliveryCount: maxDeliveries})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("poison")})
	loyalty := f.subscriber(t, "loyalty", false)
	for i := 1; i <= maxDeliveries; i++ {
		if err := loyalty.AbandonMessage(ctx, receiveOne(t, ctx, loyalty), nil); err != nil {
			t.Fatalf("AbandonMessage: %v", err)
		}
	}
	d := receiveOne(t, ctx, f.subscriber(t, "loyalty", true))
	if d.MessageID != "poison" || d.DeadLetterReason == nil || *d.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded {
		t.Errorf("loyalty dead letter %q reason %v, want poison %s", d.MessageID, d.DeadLetterReason, sbqueue.ReasonMaxDeliveryCountExceeded)
	}
	if d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription == "" {
		t.Errorf("DeadLetterErrorDescription = %v, want one", d.DeadLetterErrorDescription)
	}
	snap := f.shipping.Snapshot()
	if len(snap.Active) != 1 || len(snap.DeadLetters) != 0 {
		t.Errorf("shipping: %d active, %d dead letters; want its copy untouched", len(snap.Active), len(snap.DeadLetters))
	}
}

func TestTopicDeadLetterWithReason(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("bad-event"), Body: []byte("not json")})
	shipping := f.subscriber(t, "shipping", false)
	if err := shipping.DeadLetterMessage(ctx, receiveOne(t, ctx, shipping), &azservicebus.DeadLetterOptions{
		Reason:             to("InvalidEvent"),
		ErrorDescription:   to("body is not JSON"),
		PropertiesToModify: map[string]any{"stage": "decode"},
	}); err != nil {
		t.Fatalf("DeadLetterMessage: %v", err)
	}
	dlq := f.subscriber(t, "shipping", true)
	d := receiveOne(t, ctx, dlq)
	if d.MessageID != "bad-event" || *d.DeadLetterReason != "InvalidEvent" || *d.DeadLetterErrorDescription != "body is not JSON" || d.ApplicationProperties["stage"] != "decode" {
		t.Errorf("dead letter %q reason %v description %v stage %v", d.MessageID, d.DeadLetterReason, d.DeadLetterErrorDescription, d.ApplicationProperties["stage"])
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("completing the dead letter: %v", err)
	}
	if n := len(f.loyalty.Snapshot().DeadLetters); n != 0 {
		t.Errorf("loyalty has %d dead letters, want 0", n)
	}
	if n := len(f.loyalty.Snapshot().Active); n != 1 {
		t.Errorf("loyalty has %d active, want its copy", n)
	}
}

// TestTopicDuplicateDetectionAtTheTopic: a resend inside the topic's window
// reaches neither subscription, even after both completed the first copy;
// one outside the window reaches both. The broker reports the drop under
// the topic's name.
func TestTopicDuplicateDetectionAtTheTopic(t *testing.T) {
	const window = 10 * time.Minute
	clock := sbqueue.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newTopicFixture(t, clock, sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: window}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	loyalty, shipping := f.subscriber(t, "loyalty", false), f.subscriber(t, "shipping", false)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("order-1/created"), Body: []byte("v1")})
	for _, r := range []*azservicebus.Receiver{loyalty, shipping} {
		if err := r.CompleteMessage(ctx, receiveOne(t, ctx, r), nil); err != nil {
			t.Fatal(err)
		}
	}

	clock.Advance(window - time.Second)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("order-1/created"), Body: []byte("v2, inside the window")})
	for _, q := range []*sbqueue.Queue{f.loyalty, f.shipping} {
		if snap := q.Snapshot(); len(snap.Active)+len(snap.Locked) != 0 || snap.Counters.Sent != 1 {
			t.Errorf("%s got the resend inside the window: %d active, %d locked, %d sent", q.Name(), len(snap.Active), len(snap.Locked), snap.Counters.Sent)
		}
	}
	if d := f.broker.Dropped()[topicName]; d.Duplicates != 1 {
		t.Errorf("Dropped()[%q] = %+v, want 1 duplicate", topicName, d)
	}

	clock.Advance(time.Second)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("order-1/created"), Body: []byte("v3, one window later")})
	for _, r := range []*azservicebus.Receiver{loyalty, shipping} {
		if m := receiveOne(t, ctx, r); string(m.Body) != "v3, one window later" {
			t.Errorf("after the window: %q", m.Body)
		}
	}
	if c := f.topic.Counters(); c.Sent != 2 || c.DuplicatesDropped != 1 {
		t.Errorf("topic counters %+v, want 2 sent, 1 duplicate", c)
	}
}

func TestTopicPeekSubscription(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("1")}, &azservicebus.Message{MessageID: to("2")}, &azservicebus.Message{MessageID: to("3")})
	loyalty := f.subscriber(t, "loyalty", false)
	// Loyalty completes the first; shipping still holds all three.
	if err := loyalty.CompleteMessage(ctx, receiveOne(t, ctx, loyalty), nil); err != nil {
		t.Fatal(err)
	}
	peek := func(r *azservicebus.Receiver) []string {
		var got []string
		for {
			ms, err := r.PeekMessages(ctx, 2, nil)
			if err != nil {
				t.Fatalf("PeekMessages: %v", err)
			}
			if len(ms) == 0 {
				return got
			}
			for _, m := range ms {
				got = append(got, fmt.Sprintf("%s@%d", m.MessageID, *m.SequenceNumber))
			}
		}
	}
	if got := fmt.Sprint(peek(loyalty)); got != "[2@2 3@3]" {
		t.Errorf("peek on loyalty = %s, want [2@2 3@3]", got)
	}
	if got := fmt.Sprint(peek(f.subscriber(t, "shipping", false))); got != "[1@1 2@2 3@3]" {
		t.Errorf("peek on shipping = %s, want [1@1 2@2 3@3]", got)
	}
	if snap := f.shipping.Snapshot(); len(snap.Active) != 3 || snap.Counters.Delivered != 0 {
		t.Errorf("peek locked or delivered: %d active, %d delivered", len(snap.Active), snap.Counters.Delivered)
	}
}

func TestTopicRenewLock(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{LockDuration: 10 * time.Second})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("e-1")})
	r := f.subscriber(t, "loyalty", false)
	m := receiveOne(t, ctx, r)
	before := *m.LockedUntil
	for time.Now().Before(before.Add(-10*time.Second + 2*time.Millisecond)) {
		time.Sleep(time.Millisecond)
	}
	if err := r.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatalf("RenewMessageLock: %v", err)
	}
	if !m.LockedUntil.After(before) {
		t.Errorf("LockedUntil after renew = %v, want after %v", m.LockedUntil, before)
	}
	if c := f.loyalty.Snapshot().Counters; c.Renewed != 1 {
		t.Errorf("loyalty renewed %d, want 1", c.Renewed)
	}
	if err := f.broker.ExpireLocks(topicName + "/Subscriptions/loyalty"); err != nil {
		t.Fatal(err)
	}
	if err := r.RenewMessageLock(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Errorf("renewing an expired lock: %v, want CodeLockLost", err)
	}
}

// TestTopicSettlementThroughManagement: once the receive link is gone the
// SDK settles by lock token on the subscription's $management link.
func TestTopicSettlementThroughManagement(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("a")}, &azservicebus.Message{MessageID: to("b")}, &azservicebus.Message{MessageID: to("c")})
	r := f.subscriber(t, "loyalty", false)
	ms, err := r.ReceiveMessages(ctx, 3, nil)
	for err == nil && len(ms) < 3 {
		var more []*azservicebus.ReceivedMessage
		more, err = r.ReceiveMessages(ctx, 3-len(ms), nil)
		ms = append(ms, more...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := f.broker.DetachReceivers("ORDER-EVENTS/subscriptions/LOYALTY"); n != 1 {
		t.Fatalf("DetachReceivers = %d, want 1", n)
	}
	if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
		t.Fatalf("CompleteMessage through $management: %v", err)
	}
	if err := r.AbandonMessage(ctx, ms[1], nil); err != nil {
		t.Fatalf("AbandonMessage through $management: %v", err)
	}
	if err := r.DeadLetterMessage(ctx, ms[2], &azservicebus.DeadLetterOptions{Reason: to("Manual")}); err != nil {
		t.Fatalf("DeadLetterMessage through $management: %v", err)
	}
	snap := f.loyalty.Snapshot()
	if snap.Counters.Completed != 1 || snap.Counters.Abandoned != 1 || len(snap.DeadLetters) != 1 || snap.DeadLetters[0].DeadLetterReason != "Manual" {
		t.Errorf("loyalty counters %+v, dead letters %+v", snap.Counters, snap.DeadLetters)
	}
	if c := f.shipping.Snapshot().Counters; c.Completed+c.Abandoned+c.DeadLettered != 0 {
		t.Errorf("shipping was settled: %+v", c)
	}
}

// TestTopicAddressesAreCaseInsensitive: Service Bus resolves entity names
// case-insensitively, the Subscriptions segment included.
func TestTopicAddressesAreCaseInsensitive(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	s, err := f.client.NewSender("Order-Events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: to("e-1")}, nil); err != nil {
		t.Fatalf("SendMessage to Order-Events: %v", err)
	}
	r, err := f.client.NewReceiverForSubscription("ORDER-EVENTS", "Loyalty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	m := receiveOne(t, ctx, r)
	if err := r.CompleteMessage(ctx, m, nil); err != nil || m.MessageID != "e-1" {
		t.Fatalf("received %q, complete: %v", m.MessageID, err)
	}
	if got := f.loyalty.Snapshot().Counters.Completed; got != 1 {
		t.Errorf("loyalty completed %d, want 1", got)
	}
}

// amqpCondition returns the AMQP error condition in err, or "".
func amqpCondition(err error) amqp.ErrCond {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Condition
	}
	return ""
}

// TestTopicAddressRules: a topic is sent to and received from only through
// its subscriptions; a subscription is received from, not sent to; a
// missing subscription or topic is not found (the SDK's CodeNotFound).
func TestTopicAddressRules(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	receive := func(ctx context.Context, r *azservicebus.Receiver, err error) error {
		if err != nil {
			return err
		}
		defer r.Close(ctx)
		_, err = r.ReceiveMessages(ctx, 1, nil)
		return err
	}
	send := func(ctx context.Context, entity string) error {
		s, err := f.client.NewSender(entity, nil)
		if err != nil {
			return err
		}
		defer s.Close(ctx)
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	tests := []struct {
		name     string
		op       func(ctx context.Context) error
		wantCode azservicebus.Code
		wantCond amqp.ErrCond
	}{
		{"receive from a missing subscription", func(ctx context.Context) error {
			r, err := f.client.NewReceiverForSubscription(topicName, "missing", nil)
			return receive(ctx, r, err)
		}, azservicebus.CodeNotFound, ""},
		{"receive from a missing subscription's dead-letter queue", func(ctx context.Context) error {
			r, err := f.client.NewReceiverForSubscription(topicName, "missing", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
			return receive(ctx, r, err)
		}, azservicebus.CodeNotFound, ""},
		{"receive from a subscription of a missing topic", func(ctx context.Context) error {
			r, err := f.client.NewReceiverForSubscription("missing", "loyalty", nil)
			return receive(ctx, r, err)
		}, azservicebus.CodeNotFound, ""},
		{"receive from the topic itself", func(ctx context.Context) error {
			r, err := f.client.NewReceiverForQueue(topicName, nil)
			return receive(ctx, r, err)
		}, "", amqp.ErrCondNotAllowed},
		{"send to a subscription", func(ctx context.Context) error {
			return send(ctx, topicName+"/Subscriptions/loyalty")
		}, "", amqp.ErrCondNotAllowed},
		{"send to a subscription's dead-letter queue", func(ctx context.Context) error {
			return send(ctx, topicName+"/Subscriptions/loyalty/$DeadLetterQueue")
		}, "", amqp.ErrCondNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			err := tt.op(ctx)
			if err == nil {
				t.Fatal("succeeded")
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("timed out (%v): the broker must refuse, not hang", err)
			}
			if tt.wantCode != "" && sbCode(err) != tt.wantCode {
				t.Errorf("error %v (code %q), want code %q", err, sbCode(err), tt.wantCode)
			}
			if tt.wantCond != "" && amqpCondition(err) != tt.wantCond {
				t.Errorf("error %v (condition %q), want %q", err, amqpCondition(err), tt.wantCond)
			}
		})
	}
	for _, q := range []*sbqueue.Queue{f.loyalty, f.shipping} {
		if snap := q.Snapshot(); len(snap.Active)+len(snap.DeadLetters) != 0 {
			t.Errorf("%s holds %d active, %d dead letters after refused operations", q.Name(), len(snap.Active), len(snap.DeadLetters))
		}
	}
	if f.topic.Counters().Sent != 0 {
		t.Errorf("the topic accepted a message")
	}
}

// TestTopicRejectedSendReachesNoSubscription: the broker's limits apply to a
// topic as to a queue, and the refusal is counted under the topic.
func TestTopicRejectedSendReachesNoSubscription(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	// The project's retry options, so that the refused send fails in seconds.
	client, err := azservicebus.NewClientFromConnectionString(f.broker.ConnectionString(), cli.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	s, err := client.NewSender(topicName, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	long := strings.Repeat("x", sbbroker.MaxMessageIDLength+1)
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &long}, nil); err == nil {
		t.Fatal("a MessageId over the limit was accepted by the topic")
	}
	if d := f.broker.Dropped()[topicName]; d.Rejected == 0 {
		t.Errorf("Dropped()[%q] = %+v, want the refusal counted", topicName, d)
	}
	if f.topic.Counters().Sent != 0 || len(f.loyalty.Snapshot().Active) != 0 {
		t.Error("the refused message reached the topic")
	}
}

// TestTopicManagementLink: the $management link of a topic, which the SDK's
// sender opens, refuses the operations that need messages (400) and does
// not implement scheduling (501); a subscription's answers them. Driven
// with go-amqp directly, since the SDK never sends these to a topic.
func TestTopicManagementLink(t *testing.T) {
	f := newTopicFixture(t, sbqueue.RealClock(), sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := testContext(t)
	f.publish(t, ctx, &azservicebus.Message{MessageID: to("e-1")})
	conn, err := amqp.Dial(ctx, "amqp://"+f.broker.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	request := func(entity, op string, body map[string]any) int32 {
		t.Helper()
		node := entity + "/$management"
		replies, err := session.NewReceiver(ctx, node, &amqp.ReceiverOptions{TargetAddress: "reply-" + op + entity, Credit: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer replies.Close(ctx)
		requests, err := session.NewSender(ctx, node, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer requests.Close(ctx)
		if err := requests.Send(ctx, &amqp.Message{
			Properties:            &amqp.MessageProperties{MessageID: "1", ReplyTo: to("reply-" + op + entity)},
			ApplicationProperties: map[string]any{"operation": op},
			Value:                 body,
		}, nil); err != nil {
			t.Fatal(err)
		}
		reply, err := replies.Receive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		status, _ := reply.ApplicationProperties["statusCode"].(int32)
		return status
	}
	peek := map[string]any{"from-sequence-number": int64(0), "message-count": int32(1)}
	tests := []struct {
		entity, op string
		body       map[string]any
		want       int32
	}{
		{topicName, "com.microsoft:peek-message", peek, 400},
		{topicName, "com.microsoft:renew-lock", map[string]any{"lock-tokens": []amqp.UUID{{1}}}, 400},
		{topicName, "com.microsoft:update-disposition", map[string]any{"lock-tokens": []amqp.UUID{{1}}, "disposition-status": "completed"}, 400},
		{topicName, "com.microsoft:schedule-message", map[string]any{}, 501},
		{topicName + "/Subscriptions/loyalty", "com.microsoft:peek-message", peek, 200},
		{topicName + "/Subscriptions/loyalty", "com.microsoft:renew-lock", map[string]any{"lock-tokens": []amqp.UUID{{1}}}, 410},
	}
	for _, tt := range tests {
		if got := request(tt.entity, tt.op, tt.body); got != tt.want {
			t.Errorf("%s on %s: status %d, want %d", tt.op, tt.entity, got, tt.want)
		}
	}
}
