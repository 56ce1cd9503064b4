package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// ServiceBusSender through the real azservicebus client and the test
// broker: the relay's batches arrive with MessageId, Subject and the event,
// and a republish after a crash inside the duplicate-detection window is
// dropped at the topic, before its fan-out: each of the topic's two
// subscriptions holds every event exactly once.
func TestServiceBusSender_RealSDKAndTestBroker_RepublishIsDroppedInsideTheWindow(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	topic, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true, DuplicateDetectionWindow: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var subs []*sbqueue.Queue
	for _, name := range []string{"loyalty", "shipping"} {
		q, err := topic.CreateSubscription(name, sbqueue.SubscriptionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, q)
	}
	broker := sbbroker.New(ns, sbbroker.Options{})
	if err := broker.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(broker.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender("order-events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close(ctx)

	f := newFixture(t, 2)
	f.addOrders(30)
	a, err := relay.New(f.feed, f.store, relay.NewServiceBusSender(sender), ordersOptions(relay.Options{Name: "orderrelay", Owner: "a",
		Now: f.clock.Now, PageSize: 500, MaxBatchMessages: 7, CallTimeout: 5 * time.Second, Logger: discard()}))
	if err != nil {
		t.Fatal(err)
	}
	if err := drain(t, a); err != nil {
		t.Fatal(err)
	}
	f.addOrders(10)
	f.store.setFailReplace(func(string) error { return context.DeadlineExceeded }) // the checkpoint never lands
	_ = a.Step(ctx)
	_ = a.Step(ctx)
	f.store.setFailReplace(nil)
	f.clock.Advance(time.Minute) // a is gone; b takes over and republishes
	b, err := relay.New(f.feed, f.store, relay.NewServiceBusSender(sender), ordersOptions(relay.Options{Name: "orderrelay", Owner: "b",
		Now: f.clock.Now, PageSize: 500, MaxBatchMessages: 7, CallTimeout: 5 * time.Second, Logger: discard()}))
	if err != nil {
		t.Fatal(err)
	}
	if err := drain(t, b); err != nil {
		t.Fatal(err)
	}
	if b.Stats().Published < 10 {
		t.Fatalf("b republished %d, want the 10 uncheckpointed events at least", b.Stats().Published)
	}
	dropped := topic.Counters().DuplicatesDropped
	if dropped != b.Stats().Published {
		t.Errorf("the topic dropped %d duplicates; b republished %d", dropped, b.Stats().Published)
	}
	for i, q := range subs {
		snap := q.Snapshot()
		if len(snap.Active) != 40 || dropped+int64(len(snap.Active)) != a.Stats().Published+b.Stats().Published {
			t.Fatalf("subscription %d holds %d, topic dropped %d; a sent %d, b %d", i, len(snap.Active), dropped, a.Stats().Published, b.Stats().Published)
		}
		seen := map[string]bool{}
		for _, m := range snap.Active {
			if m.Subject != order.EventOrderAccepted || m.ContentType != "application/json" || seen[m.MessageID] {
				t.Errorf("message %s subject %q content type %q (seen before: %v)", m.MessageID, m.Subject, m.ContentType, seen[m.MessageID])
			}
			seen[m.MessageID] = true
		}
		counts := map[string]int{}
		for id := range seen {
			counts[id] = 1
		}
		f.wantEveryEvent(counts)
	}
}
