package simulation_test

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/test/telemetrytest"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// TestMetricsAgreeWithReport runs seeded simulations with every fault, the
// workers' metrics read by an in-memory reader, and checks that the
// workers' counters equal the report's counts, which the simulation takes
// from its own ground truth: every outcome and retry reason per queue, the
// duplicates and mismatches, and one handled delivery per message received.
//
// Not compared: the duplicates' causes (the worker can tell only a
// redelivery, DeliveryCount > 1, from a first delivery of a resend; the
// report attributes each duplicate to the fault behind it), and the
// dead-letters and lost locks, which the report counts from the queue's
// final state (after the operator's resubmissions) and the queue's own
// rejections, while the worker counts its settlement calls, including those
// the simulation's fault receiver fails without the queue.
func TestMetricsAgreeWithReport(t *testing.T) {
	for _, seed := range []uint64{3, 7, 11} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			cfg := scenario(seed)
			cfg.Telemetry = &otelworker.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
			n := telemetry.WorkerNames() // the simulation's default, cmd/orderworker's
			rep, err := runSim(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			m := telemetrytest.Collect(t, reader)
			queues := map[string]simulation.Outcomes{"orders": rep.Outcomes}
			for _, in := range rep.Inbox {
				queues[in.Consumer] = in.Outcomes
			}
			if len(queues) < 3 {
				t.Fatalf("queues %v: want the order writers' and two inbox consumers'", queues)
			}
			for queue, want := range queues {
				q := semconv.MessagingDestinationName(queue)
				delivered := func(outcome string, extra ...attribute.KeyValue) int {
					return int(m.Int(n.Deliveries, append([]attribute.KeyValue{q, n.Outcome.String(outcome)}, extra...)...))
				}
				reason := n.Reason.String
				got := simulation.Outcomes{
					Created: delivered("created"), Duplicate: delivered("duplicate"), Mismatch: delivered("mismatch"),
					Invalid: delivered("invalid"), Transient: delivered("transient"), Applied: delivered("applied"), Stale: delivered("stale"),
					BeforeOrder:        delivered("transient", reason(order.ReasonOrderNotYetCreated)),
					PaymentBusy:        delivered("transient", reason(order.ReasonPaymentInProgress)),
					PaymentUnavailable: delivered("transient", reason(order.ReasonPaymentUnavailable)),
				}
				if got != want {
					t.Errorf("%s: metrics count outcomes %+v, the report %+v", queue, got, want)
				}
				handled := int64(want.Created + want.Duplicate + want.Mismatch + want.Invalid + want.Transient + want.Applied + want.Stale +
					delivered("ignored"))
				for _, c := range []struct {
					name string
					got  int64
				}{
					{n.Deliveries, m.Int(n.Deliveries, q)},
					{otelworker.MetricConsumed, m.Int(otelworker.MetricConsumed, q)},
					{otelworker.MetricProcessDuration, m.Int(otelworker.MetricProcessDuration, q)},
				} {
					if c.got != handled {
						t.Errorf("%s: %s = %d, want the %d deliveries handled", queue, c.name, c.got, handled)
					}
				}
				if got := m.Int(n.Duplicates, q); got != int64(want.Duplicate) {
					t.Errorf("%s: %s = %d, want %d", queue, n.Duplicates, got, want.Duplicate)
				}
				if got := m.Int(n.Mismatches, q); got != int64(want.Mismatch) {
					t.Errorf("%s: %s = %d, want %d", queue, n.Mismatches, got, want.Mismatch)
				}
				if got := m.Int(n.InFlight, q); got != 0 {
					t.Errorf("%s: %s = %d after the run, want 0", queue, n.InFlight, got)
				}
			}
			if rep.Outcomes.Created == 0 || rep.Outcomes.Duplicate == 0 || rep.Outcomes.Transient == 0 {
				t.Errorf("outcomes %+v: the seed should produce created, duplicate and transient deliveries", rep.Outcomes)
			}
		})
	}
}
