package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

var (
	_ relay.ChangeFeed = (*memstore.ChangeFeed)(nil)
	_ relay.Sender     = (*topic)(nil)
)

// topic is a hand-written fake of a Service Bus topic's sender: it records
// every batch sent. A batch refuses a message that would take it over
// maxBytes of bodies with azservicebus.ErrMessageTooLarge, as a
// MessageBatch does at the topic's limit. failSends makes the next sends
// fail. It has no duplicate detection: it shows every republish, which the
// real topic would drop inside its window.
type topic struct {
	mu        sync.Mutex
	maxBytes  int
	batches   [][]*azservicebus.Message
	failSends int
}

type fakeBatch struct {
	max   int
	size  int
	msgs  []*azservicebus.Message
	owner *topic
}

func (b *fakeBatch) AddMessage(m *azservicebus.Message, _ *azservicebus.AddMessageOptions) error {
	if b.size+len(m.Body) > b.max {
		return azservicebus.ErrMessageTooLarge
	}
	b.size += len(m.Body)
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *fakeBatch) NumMessages() int32 { return int32(len(b.msgs)) }

func (t *topic) NewBatch(ctx context.Context) (relay.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	max := t.maxBytes
	if max == 0 {
		max = 256 << 10
	}
	return &fakeBatch{max: max, owner: t}, nil
}

func (t *topic) SendBatch(ctx context.Context, b relay.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fb := b.(*fakeBatch)
	if fb.owner != t {
		return errors.New("batch of another sender")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failSends > 0 {
		t.failSends--
		return errors.New("fake: connection lost")
	}
	t.batches = append(t.batches, fb.msgs)
	return nil
}

// sent returns how often each MessageId was sent, and the total.
func (t *topic) sent() (map[string]int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	n := 0
	for _, b := range t.batches {
		for _, m := range b {
			out[*m.MessageID]++
			n++
		}
	}
	return out, n
}

func (t *topic) batchSizes() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for _, b := range t.batches {
		out = append(out, len(b))
	}
	return out
}

// leaseStore wraps a memstore and fails the replaces that failReplace
// (when set) says to, to stand for a crash or an outage at a checkpoint.
type leaseStore struct {
	*memstore.Store
	mu          sync.Mutex
	failReplace func(id string) error
	audit       func(prev, next relay.Lease) // called for every accepted replace of a lease
}

func (s *leaseStore) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	s.mu.Lock()
	f := s.failReplace
	s.mu.Unlock()
	if f != nil {
		if err := f(d.ID); err != nil {
			return "", err
		}
	}
	var prev relay.Lease
	if s.audit != nil {
		if body, _, err := s.Store.ReadDocument(ctx, pk, d.ID); err == nil {
			_ = json.Unmarshal(body, &prev)
		}
	}
	etag, err := s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
	if err == nil && s.audit != nil && prev.Type == relay.TypeLease {
		var next relay.Lease
		_ = json.Unmarshal(d.Body, &next)
		s.audit(prev, next)
	}
	return etag, err
}

func (s *leaseStore) setFailReplace(f func(id string) error) {
	s.mu.Lock()
	s.failReplace = f
	s.mu.Unlock()
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is a store with a change feed, a topic, and orders written as the
// worker writes them.
type fixture struct {
	t      *testing.T
	store  *leaseStore
	feed   *memstore.ChangeFeed
	topic  *topic
	clock  *clock
	orders []string
}

func newFixture(t *testing.T, ranges int) *fixture {
	s := memstore.New("/orderId")
	return &fixture{t: t, store: &leaseStore{Store: s}, feed: s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: ranges, Seed: 3}),
		topic: &topic{}, clock: newClock()}
}

// addOrders writes n accepted orders (order document + OrderAccepted event
// in one batch), and beside each an inbox marker, which is not an event.
func (f *fixture) addOrders(n int) {
	f.t.Helper()
	ctx := context.Background()
	for range n {
		id := fmt.Sprintf("ord-%04d", len(f.orders))
		o := order.Order{OrderID: id, CustomerID: "cust-1", Currency: "EUR",
			Lines: []order.Line{{SKU: "SKU-1", Quantity: 1, UnitPriceMinor: 500}}, TotalMinor: 500, PlacedAt: f.clock.Now()}
		if err := writeOrder(ctx, f.store, o, f.clock.Now()); err != nil {
			f.t.Fatal(err)
		}
		marker, _ := json.Marshal(order.InboxMarker{ID: order.InboxMarkerID("loyalty", id), OrderID: id, Type: order.TypeInboxMarker, TTL: -1})
		if _, err := f.store.CreateBatch(ctx, id, []idempotent.Document{{ID: order.InboxMarkerID("loyalty", id), Body: marker}}); err != nil {
			f.t.Fatal(err)
		}
		f.orders = append(f.orders, id)
	}
}

// orderEvents is the order example's outbox shape, as cmd/orderrelay passes
// it.
var orderEvents = relay.EventFormat{TypeField: order.OutboxTypeField, TypeValue: order.OutboxTypeValue, IDField: order.OutboxIDField,
	SubjectField: order.OutboxSubjectField, PartitionKeyField: order.OutboxPartitionKeyField, TimeField: order.OutboxTimeField}

// ordersOptions returns o set for the order example's container, as
// cmd/orderrelay sets it: its events, and lease documents partitioned on
// /orderId beside the orders.
func ordersOptions(o relay.Options) relay.Options {
	o.Events = orderEvents
	o.LeasePartitionKeyPath = order.OutboxLeasePartitionKeyPath
	return o
}

// writeOrder writes an accepted order's documents as the order example
// does: the order and its OrderAccepted event in one transactional batch.
// The relay sees only the documents, so the test writes them itself.
func writeOrder(ctx context.Context, s idempotent.Store, o order.Order, now time.Time) error {
	w := order.NewWrite(o, o.OrderID, o.RequestHash(), now)
	docs, err := w.Documents()
	if err != nil {
		return err
	}
	_, err = s.CreateBatch(ctx, w.PartitionKey(), docs)
	return err
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (f *fixture) relay(owner string, now func() time.Time, mod func(*relay.Options)) *relay.Relay {
	f.t.Helper()
	o := relay.Options{Name: "orderrelay", Owner: owner, LeaseDuration: 30 * time.Second, CallTimeout: time.Second,
		PageSize: 50, Now: now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&o)
	}
	r, err := relay.New(f.feed, f.store, f.topic, ordersOptions(o))
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// drain calls Step until a Step publishes nothing more.
func drain(t *testing.T, r *relay.Relay) error {
	t.Helper()
	for range 100 {
		before := r.Stats().Published
		err := r.Step(context.Background())
		if err != nil {
			return err
		}
		if r.Stats().Published == before {
			return nil
		}
	}
	t.Fatal("the relay never ran out of events")
	return nil
}

// lease reads a lease document.
func (f *fixture) lease(fr string) relay.Lease {
	f.t.Helper()
	id := relay.LeaseID("orderrelay", fr)
	body, _, err := f.store.ReadDocument(context.Background(), id, id)
	if err != nil {
		f.t.Fatal(err)
	}
	var l relay.Lease
	if err := json.Unmarshal(body, &l); err != nil {
		f.t.Fatal(err)
	}
	return l
}

// wantEveryEvent fails unless every order's event was sent at least once.
func (f *fixture) wantEveryEvent(sent map[string]int) {
	f.t.Helper()
	for _, id := range f.orders {
		if sent[order.EventID(id)] == 0 {
			f.t.Errorf("event of %s was never published", id)
		}
	}
	if len(sent) != len(f.orders) {
		f.t.Errorf("%d distinct messages for %d orders", len(sent), len(f.orders))
	}
}
