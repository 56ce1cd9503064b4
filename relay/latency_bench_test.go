package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// topicSender is the relay's Sender on a topic of the queue model.
type topicSender struct{ t *sbqueue.Topic }

type modelBatch struct{ msgs []sbqueue.Message }

func (b *modelBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	b.msgs = append(b.msgs, sbqueue.Message{MessageID: *m.MessageID, Subject: *m.Subject, ContentType: *m.ContentType,
		Body: m.Body, ApplicationProperties: m.ApplicationProperties})
	return nil
}

func (b *modelBatch) NumMessages() int32 { return int32(len(b.msgs)) }

func (s topicSender) NewBatch(context.Context) (relay.Batch, error) { return &modelBatch{}, nil }

func (s topicSender) SendBatch(ctx context.Context, b relay.Batch) error {
	_, err := s.t.SendBatch(ctx, b.(*modelBatch).msgs)
	return err
}

// BenchmarkOutboxLatency measures the outbox end to end, in real time: an
// order is created (order and OrderAccepted event in one batch, in
// memstore, one feed range) at about 33 orders/s (exponential gaps of 30ms
// on average, a fixed seed), the relay reads memstore's change feed and
// publishes to a topic of the queue model (sbqueue), and a subscriber
// receives its subscription and writes its inbox marker with
// order.InboxConsumer. Each b.N is one order; run it with -benchtime 600x.
//
// It reports the latency from the create to the marker (p50-ms, p99-ms,
// max-ms) over the b.N orders that follow a second of warm-up, the feed
// reads per second under that load and the checkpoints per order, and the
// feed reads per idle minute, from the gaps between reads in the 4s that
// follow 2.5s without orders. The
// sub-benchmarks run the relay's poll rule (adaptive) and the fixed
// interval of earlier versions (fixed) side by side, with the default
// PollInterval (1s). memstore and the queue model answer in microseconds:
// the figures are the poll loop's share of the latency; Cosmos DB and
// Service Bus add their round trips (a feed read, a send, a receive, the
// marker's batch) to it.
func BenchmarkOutboxLatency(b *testing.B) {
	for _, rule := range rules {
		b.Run("poll="+rule.name, func(b *testing.B) { benchOutbox(b, rule.fixed) })
	}
}

func benchOutbox(b *testing.B, fixed bool) {
	const (
		meanGap = 30 * time.Millisecond
		warmUp  = 33
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New("/orderId")
	feed := &timedFeed{ChangeFeed: store.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 1, Seed: 1})}
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	tp, err := ns.CreateTopic("order-events", sbqueue.TopicOptions{RequiresDuplicateDetection: true})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := tp.CreateSubscription("loyalty", sbqueue.SubscriptionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := relay.New(feed, store, topicSender{tp}, ordersOptions(relay.Options{Name: "orderrelay", Owner: "bench", Logger: discard()}))
	if err != nil {
		b.Fatal(err)
	}
	if fixed {
		relay.SetFixedPoll(r)
	}
	consumer, err := order.NewInboxConsumer("loyalty", store, time.Hour, nil)
	if err != nil {
		b.Fatal(err)
	}

	total := warmUp + b.N
	var mu sync.Mutex
	created := make(map[string]time.Time, total)
	latencies := make(map[string]time.Duration, total)
	allMarked := make(chan struct{})

	var wg sync.WaitGroup
	wg.Go(func() {
		if err := r.Run(ctx); err != nil {
			b.Error(err)
		}
	})
	wg.Go(func() { // the subscriber
		for {
			msgs, err := sub.Receive(ctx, 32)
			if err != nil {
				return // ctx ended
			}
			for _, rm := range msgs {
				res := consumer.Process(ctx, idempotent.Message{ID: rm.MessageID, Subject: rm.Subject, Body: rm.Body,
					DeliveryCount: rm.DeliveryCount, SequenceNumber: rm.SequenceNumber})
				at := time.Now()
				if res.Outcome != idempotent.Created {
					b.Errorf("inbox consumer: %v %s", res.Outcome, res.Description)
				}
				mu.Lock()
				latencies[res.Key] = at.Sub(created[res.Key])
				if len(latencies) == total {
					close(allMarked)
				}
				mu.Unlock()
				if err := sub.Complete(rm.LockToken); err != nil {
					b.Error(err)
				}
			}
		}
	})

	rnd := rand.New(rand.NewPCG(42, 33))
	next := time.Now()
	var loadStart time.Time
	readsAtLoad := 0
	for i := range total {
		if i == warmUp {
			loadStart, readsAtLoad = time.Now(), len(feed.readTimes())
		}
		next = next.Add(time.Duration(rnd.ExpFloat64() * float64(meanGap)))
		time.Sleep(time.Until(next))
		id := fmt.Sprintf("ord-%06d", i)
		o := order.Order{OrderID: id, CustomerID: "cust-1", Currency: "EUR",
			Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: 500}}, TotalMinor: 500, PlacedAt: time.Now().UTC()}
		mu.Lock()
		created[id] = time.Now()
		mu.Unlock()
		if err := writeOrder(ctx, store, o, time.Now().UTC()); err != nil {
			b.Fatal(err)
		}
	}
	loaded := time.Since(loadStart)
	readsLoaded := len(feed.readTimes()) - readsAtLoad
	checkpoints := r.Stats().Checkpoints
	select {
	case <-allMarked:
	case <-time.After(time.Minute):
		b.Fatal("not every order reached the subscriber's inbox within a minute")
	}

	// Idle: let the poll rule settle, then time the gaps between reads.
	time.Sleep(2500 * time.Millisecond)
	idleFrom := len(feed.readTimes())
	time.Sleep(4 * time.Second)
	idle := feed.readTimes()[idleFrom:]
	cancel()
	wg.Wait()

	var ds []time.Duration
	for i := warmUp; i < total; i++ {
		ds = append(ds, latencies[fmt.Sprintf("ord-%06d", i)])
	}
	slices.Sort(ds)
	pct := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(0, "ns/op") // the pace of the orders, not the code's cost
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/float64(time.Millisecond), "max-ms")
	b.ReportMetric(float64(readsLoaded)/loaded.Seconds(), "feed-reads/s")
	b.ReportMetric(float64(checkpoints)/float64(total), "checkpoints/order")
	if len(idle) >= 2 {
		b.ReportMetric(float64(len(idle)-1)/idle[len(idle)-1].Sub(idle[0]).Minutes(), "feed-reads/idle-min")
	}
}
