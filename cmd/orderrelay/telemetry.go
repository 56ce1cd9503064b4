package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idempotent-consumer/sbcosmos/relay"
)

// The names of the relay's metrics. Prometheus shows them with dots as
// underscores, the unit appended (_seconds) and counters ending in _total.
// Every one carries messaging.system=servicebus and
// messaging.destination.name (the topic).
const (
	// MetricSent counts the events published to the topic, republished
	// ones included (semconv, with messaging.operation.name=send).
	MetricSent = "messaging.client.sent.messages"
	// MetricFeedLag is how far the relay is behind the change feed, per
	// feed range this instance holds (orderrelay.feed_range), in seconds:
	// the age of the newest change of the last page read, 0 once caught
	// up. A lag that grows means the relay cannot keep up or is failing.
	MetricFeedLag = "orderrelay.feed.lag"
	// MetricLeasesOwned is the number of feed ranges whose leases this
	// instance holds; summed over the instances it is the number of
	// ranges being published.
	MetricLeasesOwned = "orderrelay.leases.owned"
	// MetricLeaseTakeovers counts leases this instance took over after
	// another instance's expired: that instance crashed or stalled.
	MetricLeaseTakeovers = "orderrelay.lease.takeovers"
	// MetricLeaseLosses counts leases this instance found taken by
	// another: it stalled past the lease's expiry (what it published since
	// its last checkpoint is republished).
	MetricLeaseLosses = "orderrelay.lease.losses"
)

// AttrFeedRange is the feed range of the relay's per-range metrics.
const AttrFeedRange = attribute.Key("orderrelay.feed_range")

const instrumentationScope = "github.com/idempotent-consumer/sbcosmos/cmd/orderrelay"

// relayTelemetry records the relay's metrics. It is safe for concurrent use.
type relayTelemetry struct {
	base                  metric.MeasurementOption
	sendOpt               metric.MeasurementOption
	sent, takeovers, lost metric.Int64Counter
}

// newRelayTelemetry creates the relay's instruments on mp, observing the
// lags and leases of state.
func newRelayTelemetry(mp metric.MeterProvider, topic string, state *relayState) (*relayTelemetry, error) {
	m := mp.Meter(instrumentationScope, metric.WithSchemaURL(semconv.SchemaURL))
	base := []attribute.KeyValue{semconv.MessagingSystemServiceBus, semconv.MessagingDestinationName(topic)}
	t := &relayTelemetry{base: metric.WithAttributes(base...),
		sendOpt: metric.WithAttributes(append(base, semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend)...)}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	t.sent = counter(MetricSent, "{message}", "Events published to the topic, republished ones included.")
	t.takeovers = counter(MetricLeaseTakeovers, "{lease}", "Leases taken over after another relay instance's expired.")
	t.lost = counter(MetricLeaseLosses, "{lease}", "Leases found taken by another relay instance.")
	lag, err := m.Float64ObservableGauge(MetricFeedLag, metric.WithUnit("s"),
		metric.WithDescription("How far the relay is behind the change feed: the age of the newest change of the last page read, 0 once caught up."))
	errs = append(errs, err)
	owned, err := m.Int64ObservableGauge(MetricLeasesOwned, metric.WithUnit("{lease}"), metric.WithDescription("Feed ranges whose leases this instance holds."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		last, _, _ := state.snapshot()
		o.ObserveInt64(owned, int64(len(last.Owned)), t.base)
		for fr, d := range state.lagsOwned() {
			o.ObserveFloat64(lag, d.Seconds(), metric.WithAttributes(append(base, AttrFeedRange.String(fr))...))
		}
		return nil
	}, lag, owned); err != nil {
		return nil, err
	}
	return t, nil
}

// hooks returns the relay hooks that count publishes, takeovers and
// losses.
func (t *relayTelemetry) hooks() relay.Hooks {
	ctx := context.Background()
	return relay.Hooks{
		Published: func(_ string, n int) { t.sent.Add(ctx, int64(n), t.sendOpt) },
		Acquired: func(_, _ string, reclaimed bool) {
			if reclaimed {
				t.takeovers.Add(ctx, 1, t.base)
			}
		},
		Lost: func(string) { t.lost.Add(ctx, 1, t.base) },
	}
}
