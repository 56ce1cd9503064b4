package sbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// newTestTopic returns the topic "order-events" with the subscriptions
// loyalty and shipping, on a virtual clock at t0.
func newTestTopic(t testing.TB, to sbqueue.TopicOptions, so sbqueue.SubscriptionOptions) (ns *sbqueue.Namespace, topic *sbqueue.Topic, loyalty, shipping *sbqueue.Queue, clock *sbqueue.VirtualClock) {
	t.Helper()
	clock = sbqueue.NewVirtualClock(t0)
	ns = sbqueue.NewNamespace(clock)
	topic, err := ns.CreateTopic("order-events", to)
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if loyalty, err = topic.CreateSubscription("loyalty", so); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	if shipping, err = topic.CreateSubscription("shipping", so); err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	return ns, topic, loyalty, shipping, clock
}

func sendTopic(t testing.TB, topic *sbqueue.Topic, m sbqueue.Message) bool {
	t.Helper()
	enqueued, err := topic.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send(%q): %v", m.MessageID, err)
	}
	return enqueued
}

func TestTopicFansOutIndependentCopies(t *testing.T) {
	_, topic, loyalty, shipping, _ := newTestTopic(t, sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	sendTopic(t, topic, sbqueue.Message{MessageID: "e-1", Body: []byte("created"), ApplicationProperties: map[string]any{"k": "v"}})
	sendTopic(t, topic, sbqueue.Message{MessageID: "e-2", Body: []byte("paid")})

	l := receiveOne(t, loyalty)
	s := receiveOne(t, shipping)
	if l.MessageID != "e-1" || s.MessageID != "e-1" || string(l.Body) != "created" || string(s.Body) != "created" {
		t.Fatalf("first deliveries %q %q, %q %q; want e-1 created on both", l.MessageID, l.Body, s.MessageID, s.Body)
	}
	if l.SequenceNumber != 1 || s.SequenceNumber != 1 || l.LockToken == s.LockToken {
		t.Errorf("sequence numbers %d, %d (want the topic's 1 on both), lock tokens %x %x (want distinct)", l.SequenceNumber, s.SequenceNumber, l.LockToken, s.LockToken)
	}

	// Settling one copy leaves the other alone.
	if err := loyalty.DeadLetter(l.LockToken, "Rejected", "by loyalty", map[string]any{"k": "changed"}); err != nil {
		t.Fatal(err)
	}
	if err := shipping.Abandon(s.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	again := receiveOne(t, shipping)
	if again.MessageID != "e-1" || again.DeliveryCount != 2 || again.ApplicationProperties["k"] != "v" {
		t.Errorf("shipping redelivery %q count %d k=%v, want e-1 count 2 k=v (loyalty's dead-letter must not change it)",
			again.MessageID, again.DeliveryCount, again.ApplicationProperties["k"])
	}
	if _, ok := again.ApplicationProperties[sbqueue.PropertyDeadLetterReason]; ok {
		t.Errorf("shipping's copy carries loyalty's dead-letter reason")
	}
	if n := len(shipping.Snapshot().DeadLetters); n != 0 {
		t.Errorf("shipping has %d dead letters, want 0", n)
	}
	if dl := loyalty.Snapshot().DeadLetters; len(dl) != 1 || dl[0].DeadLetterReason != "Rejected" {
		t.Errorf("loyalty dead letters %+v, want e-1 with reason Rejected", dl)
	}
	if err := shipping.Complete(again.LockToken); err != nil {
		t.Fatal(err)
	}
	if m := receiveOne(t, loyalty); m.MessageID != "e-2" || m.SequenceNumber != 2 {
		t.Errorf("loyalty next %q seq %d, want e-2 seq 2", m.MessageID, m.SequenceNumber)
	}
	if c := topic.Counters(); c.Sent != 2 || c.DuplicatesDropped != 0 || c.Discarded != 0 {
		t.Errorf("topic counters %+v, want 2 sent", c)
	}
	if c := loyalty.Snapshot().Counters; c.Sent != 2 || c.DeadLettered != 1 {
		t.Errorf("loyalty counters %+v, want 2 sent, 1 dead-lettered", c)
	}
}

func TestTopicMaxDeliveryCountPerSubscription(t *testing.T) {
	_, topic, loyalty, shipping, _ := newTestTopic(t, sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{MaxDeliveryCount: 2})
	sendTopic(t, topic, sbqueue.Message{MessageID: "poison"})
	for i := 1; i <= 2; i++ {
		m := receiveOne(t, loyalty)
		if m.DeliveryCount != uint32(i) {
			t.Fatalf("delivery %d has count %d", i, m.DeliveryCount)
		}
		if err := loyalty.Abandon(m.LockToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	expectEmpty(t, loyalty)
	d := receiveOne(t, loyalty.DeadLetterQueue())
	if d.MessageID != "poison" || d.DeadLetterReason != sbqueue.ReasonMaxDeliveryCountExceeded {
		t.Errorf("loyalty dead letter %q reason %q", d.MessageID, d.DeadLetterReason)
	}
	if m := receiveOne(t, shipping); m.DeliveryCount != 1 {
		t.Errorf("shipping's copy has delivery count %d, want 1: loyalty's deliveries are its own", m.DeliveryCount)
	}
}

func TestTopicDuplicateDetectionBeforeFanOut(t *testing.T) {
	const window = 10 * time.Minute
	_, topic, loyalty, shipping, clock := newTestTopic(t,
		sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: window}, sbqueue.SubscriptionOptions{})
	if !sendTopic(t, topic, sbqueue.Message{MessageID: "e-1", Body: []byte("v1")}) {
		t.Fatal("first send dropped")
	}
	// Completing the first copy everywhere does not reset the window: it
	// is the topic's record, not the subscriptions' contents.
	for _, q := range []*sbqueue.Queue{loyalty, shipping} {
		if err := q.Complete(receiveOne(t, q).LockToken); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(window - time.Nanosecond)
	if sendTopic(t, topic, sbqueue.Message{MessageID: "e-1", Body: []byte("v2")}) {
		t.Error("resend inside the window was enqueued")
	}
	expectEmpty(t, loyalty)
	expectEmpty(t, shipping)
	clock.Advance(time.Nanosecond)
	if !sendTopic(t, topic, sbqueue.Message{MessageID: "e-1", Body: []byte("v3")}) {
		t.Error("resend exactly one window later was dropped")
	}
	for _, q := range []*sbqueue.Queue{loyalty, shipping} {
		if m := receiveOne(t, q); string(m.Body) != "v3" || m.SequenceNumber != 2 {
			t.Errorf("%s got %q seq %d, want v3 seq 2", q.Name(), m.Body, m.SequenceNumber)
		}
	}
	c := topic.Counters()
	if c.Sent != 2 || c.DuplicatesDropped != 1 {
		t.Errorf("topic counters %+v, want 2 sent, 1 duplicate", c)
	}
	for _, q := range []*sbqueue.Queue{loyalty, shipping} {
		if c := q.Snapshot().Counters; c.Sent != 2 || c.DuplicatesDropped != 0 {
			t.Errorf("%s counters %+v: the drop belongs to the topic", q.Name(), c)
		}
	}

	// A batch is checked against itself too, and its report names the drops.
	dropped, gotWindow, err := topic.SendBatchReport(context.Background(), []sbqueue.Message{
		{MessageID: "b-1"}, {MessageID: "b-2"}, {MessageID: "b-1"}, {MessageID: "e-1"},
	})
	if err != nil || fmt.Sprint(dropped) != "[2 3]" || gotWindow != window {
		t.Errorf("SendBatchReport = %v, %v, %v; want [2 3], %v, nil", dropped, gotWindow, err, window)
	}
}

func TestTopicWithoutDuplicateDetectionKeepsResends(t *testing.T) {
	_, topic, loyalty, _, _ := newTestTopic(t, sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	for range 2 {
		if !sendTopic(t, topic, sbqueue.Message{MessageID: "same"}) {
			t.Fatal("resend dropped without duplicate detection")
		}
	}
	if n := len(loyalty.Peek(10)); n != 2 {
		t.Errorf("loyalty holds %d messages, want 2", n)
	}
}

func TestTopicTimeToLive(t *testing.T) {
	clock := sbqueue.NewVirtualClock(t0)
	ns := sbqueue.NewNamespace(clock)
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{DefaultMessageTimeToLive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	short, err := topic.CreateSubscription("short", sbqueue.SubscriptionOptions{DefaultMessageTimeToLive: time.Minute, DeadLetteringOnMessageExpiration: true})
	if err != nil {
		t.Fatal(err)
	}
	long, err := topic.CreateSubscription("long", sbqueue.SubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sendTopic(t, topic, sbqueue.Message{MessageID: "default"})
	sendTopic(t, topic, sbqueue.Message{MessageID: "ten-seconds", TimeToLive: 10 * time.Second})
	sendTopic(t, topic, sbqueue.Message{MessageID: "two-hours", TimeToLive: 2 * time.Hour})
	want := map[string]map[string]time.Duration{
		short.Name(): {"default": time.Minute, "ten-seconds": 10 * time.Second, "two-hours": time.Minute},
		long.Name():  {"default": time.Hour, "ten-seconds": 10 * time.Second, "two-hours": time.Hour},
	}
	for _, q := range []*sbqueue.Queue{short, long} {
		for _, m := range q.Peek(10) {
			if got := m.TimeToLive; got != want[q.Name()][m.MessageID] {
				t.Errorf("%s: %s has TimeToLive %v, want %v", q.Name(), m.MessageID, got, want[q.Name()][m.MessageID])
			}
		}
	}
	clock.Advance(time.Minute)
	if s := short.Snapshot(); len(s.Active) != 0 || len(s.DeadLetters) != 3 || s.DeadLetters[0].DeadLetterReason != sbqueue.ReasonTTLExpired {
		t.Errorf("short after a minute: %d active, %d dead letters, want 0 and 3 expired", len(s.Active), len(s.DeadLetters))
	}
	if s := long.Snapshot(); len(s.Active) != 2 || s.Counters.Expired != 1 || len(s.DeadLetters) != 0 {
		t.Errorf("long after a minute: %d active, %d expired, %d dead letters; want 2, 1 (dropped), 0", len(s.Active), s.Counters.Expired, len(s.DeadLetters))
	}
}

func TestTopicWithoutSubscriptionsDiscards(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sendTopic(t, topic, sbqueue.Message{MessageID: "lost"}) {
		t.Fatal("send to a topic without subscriptions reported a drop; Service Bus accepts it")
	}
	late, err := topic.CreateSubscription("late", sbqueue.SubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sendTopic(t, topic, sbqueue.Message{MessageID: "kept"})
	if ms := late.Peek(10); len(ms) != 1 || ms[0].MessageID != "kept" || ms[0].SequenceNumber != 2 {
		t.Errorf("late subscription holds %+v, want only kept (seq 2)", ms)
	}
	if c := topic.Counters(); c.Sent != 2 || c.Discarded != 1 {
		t.Errorf("counters %+v, want 2 sent, 1 discarded", c)
	}
}

func TestNamespaceResolvesSubscriptionPaths(t *testing.T) {
	ns, topic, loyalty, _, _ := newTestTopic(t, sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	if loyalty.Name() != "order-events/Subscriptions/loyalty" || loyalty.DeadLetterQueue().Name() != "order-events/Subscriptions/loyalty/$DeadLetterQueue" {
		t.Errorf("names %q, %q", loyalty.Name(), loyalty.DeadLetterQueue().Name())
	}
	tests := []struct {
		path string
		want *sbqueue.Queue
	}{
		{"order-events/Subscriptions/loyalty", loyalty},
		{"ORDER-EVENTS/subscriptions/Loyalty", loyalty},
		{"order-events/Subscriptions/loyalty/$DeadLetterQueue", loyalty.DeadLetterQueue()},
		{"Order-Events/SUBSCRIPTIONS/LOYALTY/$deadletterqueue", loyalty.DeadLetterQueue()},
		{"order-events", nil}, // a topic is not a queue
		{"order-events/$DeadLetterQueue", nil},
		{"order-events/Subscriptions/missing", nil},
		{"missing/Subscriptions/loyalty", nil},
		{"order-events/Subscriptions/loyalty/extra", nil},
		{"order-events/Subscription/loyalty", nil},
	}
	for _, tt := range tests {
		got, ok := ns.Queue(tt.path)
		if got != tt.want || ok != (tt.want != nil) {
			t.Errorf("Queue(%q) = %v, %v; want %v", tt.path, got, ok, tt.want)
		}
	}
	if got, ok := ns.Topic("ORDER-EVENTS"); !ok || got != topic {
		t.Errorf("Topic(ORDER-EVENTS) = %v, %v", got, ok)
	}
	if loyalty.Topic() != topic || loyalty.DeadLetterQueue().Topic() != topic {
		t.Error("a subscription and its dead-letter queue must report their topic")
	}
	if subs := topic.Subscriptions(); len(subs) != 2 || subs[0] != loyalty {
		t.Errorf("Subscriptions() = %v", subs)
	}
	q, err := ns.CreateQueue("orders", sbqueue.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q.Topic() != nil {
		t.Error("a queue reports a topic")
	}
}

func TestTopicAndSubscriptionNamesAndOptions(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := topic.Options(); o.DuplicateDetectionWindow != sbqueue.DefaultDuplicateDetectionWindow || o.RequiresDuplicateDetection {
		t.Errorf("topic defaults %+v", o)
	}
	sub, err := topic.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := sub.Options(); o.LockDuration != sbqueue.DefaultLockDuration || o.MaxDeliveryCount != sbqueue.DefaultMaxDeliveryCount ||
		o.RequiresDuplicateDetection || o.DuplicateDetectionWindow != 0 {
		t.Errorf("subscription options %+v: want the defaults and no duplicate detection", o)
	}
	tests := []struct {
		name    string
		create  func() error
		wantErr error // nil: any error
	}{
		{"topic named like a queue", func() error { _, err := ns.CreateTopic("ORDERS", sbqueue.TopicOptions{}); return err }, sbqueue.ErrQueueExists},
		{"queue named like a topic", func() error { _, err := ns.CreateQueue("Order-Events", sbqueue.QueueOptions{}); return err }, sbqueue.ErrTopicExists},
		{"topic twice", func() error { _, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{}); return err }, sbqueue.ErrTopicExists},
		{"subscription twice", func() error {
			_, err := topic.CreateSubscription("LOYALTY", sbqueue.SubscriptionOptions{})
			return err
		}, sbqueue.ErrSubscriptionExists},
		{"subscription name with /", func() error { _, err := topic.CreateSubscription("a/b", sbqueue.SubscriptionOptions{}); return err }, nil},
		{"subscription name with $", func() error { _, err := topic.CreateSubscription("$x", sbqueue.SubscriptionOptions{}); return err }, nil},
		{"empty subscription name", func() error { _, err := topic.CreateSubscription("", sbqueue.SubscriptionOptions{}); return err }, nil},
		{"51-character subscription name", func() error {
			_, err := topic.CreateSubscription(fmt.Sprintf("%051d", 0), sbqueue.SubscriptionOptions{})
			return err
		}, nil},
		{"topic path with a Subscriptions segment", func() error {
			_, err := ns.CreateTopic("a/subscriptions/b", sbqueue.TopicOptions{})
			return err
		}, nil},
		{"queue path with a Subscriptions segment", func() error {
			_, err := ns.CreateQueue("a/Subscriptions/b", sbqueue.QueueOptions{})
			return err
		}, nil},
		{"negative topic window", func() error {
			_, err := ns.CreateTopic("t2", sbqueue.TopicOptions{DuplicateDetectionWindow: -1})
			return err
		}, nil},
		{"negative subscription lock", func() error {
			_, err := topic.CreateSubscription("s2", sbqueue.SubscriptionOptions{LockDuration: -1})
			return err
		}, nil},
	}
	for _, tt := range tests {
		err := tt.create()
		if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
		}
	}
	if _, err := topic.CreateSubscription(fmt.Sprintf("%050d", 0), sbqueue.SubscriptionOptions{}); err != nil {
		t.Errorf("50-character subscription name: %v", err)
	}
}

func TestTopicSendErrorsSendNothing(t *testing.T) {
	_, topic, loyalty, _, _ := newTestTopic(t, sbqueue.TopicOptions{RequiresDuplicateDetection: true}, sbqueue.SubscriptionOptions{})
	_, err := topic.SendBatch(context.Background(), []sbqueue.Message{{MessageID: "ok"}, {MessageID: "bad", TimeToLive: -time.Second}})
	if err == nil {
		t.Fatal("negative TimeToLive accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := topic.Send(ctx, sbqueue.Message{MessageID: "ok"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with a cancelled context: %v", err)
	}
	if n := len(loyalty.Peek(10)); n != 0 || topic.Counters().Sent != 0 {
		t.Fatalf("%d messages enqueued by failed sends", n)
	}
	// Nor did the failed sends record "ok" for duplicate detection.
	if !sendTopic(t, topic, sbqueue.Message{MessageID: "ok"}) {
		t.Error("ok was recorded by a failed send")
	}
	if _, err := loyalty.DeadLetterQueue().Send(context.Background(), sbqueue.Message{}); !errors.Is(err, sbqueue.ErrDeadLetterQueue) {
		t.Errorf("send to a subscription's dead-letter queue: %v", err)
	}
}

// TestTopicSenderIsSDKShaped: Topic.NewSender's SendMessage maps the SDK's
// message as Queue.NewSender's does, and a message without MessageID gets
// one ID shared by every subscription's copy.
func TestTopicSenderIsSDKShaped(t *testing.T) {
	_, topic, loyalty, shipping, _ := newTestTopic(t, sbqueue.TopicOptions{}, sbqueue.SubscriptionOptions{})
	ctx := context.Background()
	subject := "OrderCreated"
	if err := topic.NewSender().SendMessage(ctx, &azservicebus.Message{Body: []byte("x"), Subject: &subject}, nil); err != nil {
		t.Fatal(err)
	}
	r := loyalty.NewReceiver()
	ms, err := r.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("ReceiveMessages = %d, %v", len(ms), err)
	}
	other := receiveOne(t, shipping)
	if ms[0].MessageID == "" || ms[0].MessageID != other.MessageID || *ms[0].Subject != subject {
		t.Errorf("ids %q / %q, subject %v; want one assigned id on both", ms[0].MessageID, other.MessageID, ms[0].Subject)
	}
	if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
		t.Fatal(err)
	}
	if n := len(shipping.Snapshot().Locked); n != 1 {
		t.Errorf("shipping locked = %d after loyalty completed, want its own copy still locked", n)
	}
}

// TestTopicConcurrentSendsKeepOneOrder: concurrent senders, and receivers
// draining each subscription meanwhile; every subscription gets every
// message, in the same order. Run with -race.
func TestTopicConcurrentSendsKeepOneOrder(t *testing.T) {
	_, topic, loyalty, shipping, _ := newTestTopic(t, sbqueue.TopicOptions{RequiresDuplicateDetection: true}, sbqueue.SubscriptionOptions{})
	const senders, each = 4, 50
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make(map[*sbqueue.Queue][]string)
	var mu sync.Mutex
	for _, q := range []*sbqueue.Queue{loyalty, shipping} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < senders*each; {
				ms, err := q.Receive(ctx, 10)
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range ms {
					if err := q.Complete(m.LockToken); err != nil {
						t.Error(err)
					}
					mu.Lock()
					got[q] = append(got[q], m.MessageID)
					mu.Unlock()
				}
				n += len(ms)
			}
		}()
	}
	var sendWG sync.WaitGroup
	for s := range senders {
		sendWG.Add(1)
		go func() {
			defer sendWG.Done()
			for i := range each {
				id := fmt.Sprintf("s%d-%d", s, i)
				if _, err := topic.Send(ctx, sbqueue.Message{MessageID: id}); err != nil {
					t.Error(err)
				}
				topic.Send(ctx, sbqueue.Message{MessageID: id}) // a duplicate, dropped
			}
		}()
	}
	sendWG.Wait()
	wg.Wait()
	if fmt.Sprint(got[loyalty]) != fmt.Sprint(got[shipping]) || len(got[loyalty]) != senders*each {
		t.Errorf("loyalty got %d, shipping %d, orders equal: %v", len(got[loyalty]), len(got[shipping]), fmt.Sprint(got[loyalty]) == fmt.Sprint(got[shipping]))
	}
	if c := topic.Counters(); c.Sent != senders*each || c.DuplicatesDropped != senders*each {
		t.Errorf("counters %+v", c)
	}
}

// FuzzNamespaceQueuePath: resolving any entity path never panics, and what
// it finds is the entity the path names, case-insensitively.
func FuzzNamespaceQueuePath(f *testing.F) {
	for _, s := range []string{
		"orders", "orders/$DeadLetterQueue", "order-events", "order-events/Subscriptions/loyalty",
		"ORDER-EVENTS/subscriptions/LOYALTY/$deadletterqueue", "order-events/Subscriptions/", "/Subscriptions/loyalty",
		"order-events/Subscriptions/loyalty/Subscriptions/loyalty", "$DeadLetterQueue", "",
	} {
		f.Add(s)
	}
	ns := sbqueue.NewNamespace(sbqueue.NewVirtualClock(t0))
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		f.Fatal(err)
	}
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := topic.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if q, ok := ns.Queue(path); ok && !strings.EqualFold(q.Name(), path) {
			t.Errorf("Queue(%q) found %q", path, q.Name())
		}
		if tp, ok := ns.Topic(path); ok && !strings.EqualFold(tp.Name(), path) {
			t.Errorf("Topic(%q) found %q", path, tp.Name())
		}
	})
}

// BenchmarkTopicFanOut measures one message's round trip through a topic:
// send (duplicate detection at the topic, a copy per subscription), then
// receive and complete on every subscription.
func BenchmarkTopicFanOut(b *testing.B) {
	for _, subs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("subscriptions=%d", subs), func(b *testing.B) {
			clock := sbqueue.NewVirtualClock(t0)
			topic, err := sbqueue.NewNamespace(clock).CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true})
			if err != nil {
				b.Fatal(err)
			}
			qs := make([]*sbqueue.Queue, subs)
			for i := range qs {
				if qs[i], err = topic.CreateSubscription(fmt.Sprintf("s%d", i), sbqueue.SubscriptionOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			body := []byte(`{"orderId":"order-1","amount":100}`)
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Millisecond)
				if _, err := topic.Send(ctx, sbqueue.Message{Body: body}); err != nil {
					b.Fatal(err)
				}
				for _, q := range qs {
					if err := q.Complete(q.TryReceive(1)[0].LockToken); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
