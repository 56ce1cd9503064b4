package main

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
)

// instance is one relay instance with the hooks run gives it, its metrics
// read by a ManualReader.
type instance struct {
	r      *relay.Relay
	reader *sdkmetric.ManualReader
	state  *relayState
}

func newInstance(t *testing.T, owner string, s *memstore.Store, feed relay.ChangeFeed, tp relay.Sender, now func() time.Time) *instance {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	state := newRelayState(now)
	tel, err := newRelayTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), "order-events", state)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Owner, cfg.PageSize = owner, 10 // 25 orders and their events fill the first page of each of 3 ranges
	o := cfg.options(slog.New(slog.DiscardHandler), state.hooks(tel))
	o.Now = now
	r, err := relay.New(feed, s, tp, o)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{r: r, reader: reader, state: state}
}

// The relay's metrics as run sets them up: the events published (semconv's
// sent-messages counter, on the topic), the leases owned, the lag behind
// the feed per range (the age of the changes read, 0 once caught up), a
// takeover by the instance that finds another's leases expired and a loss
// by the one that finds them gone. Their counts agree with Stats.
func TestTelemetry_PublishesLagAndTakeovers(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	s := memstore.NewWithClock("/orderId", clock.Now)
	feed := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 3})
	writeOrdersAt(t, s, 25, clock.Now())
	tp := &topic{}
	a := newInstance(t, "a", s, feed, tp, clock.Now)
	ctx := context.Background()
	topicAttr := semconv.MessagingDestinationName("order-events")

	clock.Advance(12 * time.Second)
	if err := a.r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	m := telemetrytest.Collect(t, a.reader)
	if got := m.Int(MetricSent, topicAttr, semconv.MessagingSystemServiceBus, semconv.MessagingOperationName("send")); got == 0 || got != a.r.Stats().Published {
		t.Errorf("%s = %d, Stats.Published %d, want the events of the first pages", MetricSent, got, a.r.Stats().Published)
	}
	if got := m.Int(MetricLeasesOwned, topicAttr); got != 3 {
		t.Errorf("%s = %d, want 3", MetricLeasesOwned, got)
	}
	ranges, _ := feed.FeedRanges(ctx)
	for _, fr := range ranges {
		if v, found := m.Value(MetricFeedLag, AttrFeedRange.String(fr)); v != 12 {
			t.Errorf("lag of %s = %vs (found %v), want 12: a full page of changes written 12s before", fr, v, found)
		}
	}
	for range 20 { // to the end of the feed
		if err := a.r.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := telemetrytest.Collect(t, a.reader).Int(MetricSent); got != 25 || got != a.r.Stats().Published {
		t.Errorf("%s = %d, Stats.Published %d, want 25", MetricSent, got, a.r.Stats().Published)
	}
	m = telemetrytest.Collect(t, a.reader)
	if v, found := m.Value(MetricFeedLag); !found || v != 0 {
		t.Errorf("lag once caught up: %v (found %v), want 0", v, found)
	}

	// a stalls past its leases; b takes them over; a finds them gone.
	b := newInstance(t, "b", s, feed, tp, clock.Now)
	clock.Advance(relay.DefaultLeaseDuration + time.Second)
	if err := b.r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := telemetrytest.Collect(t, b.reader).Int(MetricLeaseTakeovers, topicAttr); got != 3 || b.r.Stats().Reclaimed != 3 {
		t.Errorf("%s of b = %d, Stats.Reclaimed %d, want 3", MetricLeaseTakeovers, got, b.r.Stats().Reclaimed)
	}
	writeOrdersAt(t, s, 3, clock.Now())
	_ = a.r.Step(ctx) // fails: the leases are b's
	m = telemetrytest.Collect(t, a.reader)
	if got := m.Int(MetricLeaseLosses, topicAttr); got == 0 || got != a.r.Stats().Lost {
		t.Errorf("%s of a = %d, Stats.Lost %d, want its losses counted", MetricLeaseLosses, got, a.r.Stats().Lost)
	}
	if got := m.Int(MetricLeasesOwned); got != int64(len(a.r.Owned())) {
		t.Errorf("%s of a = %d, owns %v", MetricLeasesOwned, got, a.r.Owned())
	}
	if got := telemetrytest.Collect(t, a.reader).Int(MetricLeaseTakeovers); got != 0 {
		t.Errorf("a took over %d leases, want none: they were free", got)
	}
}

// writeOrdersAt writes n accepted orders, processed at the time at.
func writeOrdersAt(t *testing.T, s *memstore.Store, n int, at time.Time) {
	t.Helper()
	for range n {
		id := fmt.Sprintf("ord-at-%d", len(s.Items()))
		o := order.Order{OrderID: id, CustomerID: "c", Currency: "EUR", Lines: []order.Line{{SKU: "S", Quantity: 1, UnitPriceMinor: 100}},
			TotalMinor: 100, PlacedAt: at}
		e2etest.WriteOrder(t, s, order.NewWrite(o, id, o.RequestHash(), at))
	}
}
