package simulation_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// breakerOpenings counts the workers' "circuit breaker open" records.
type breakerOpenings struct{ n atomic.Int64 }

func (h *breakerOpenings) Enabled(context.Context, slog.Level) bool { return true }
func (h *breakerOpenings) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "circuit breaker open") {
		h.n.Add(1)
	}
	return nil
}
func (h *breakerOpenings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *breakerOpenings) WithGroup(string) slog.Handler      { return h }

// TestPoisonMessagesDoNotStopTheWorkers: with a few percent of the orders
// poison (their document reads back undecodable, or fails every call with
// 500, so that each of their status changes fails with a StoreError on
// every delivery until MaxDeliveryCount) and nothing else failing, every
// invariant holds: every healthy order is created, every poison status
// change ends dead-lettered, nothing is lost; and since the store answers
// the breaker's probe throughout, no worker's breaker ever opens. Before
// the breaker's rule the same poison messages, back at the head of the
// queue after each abandon, reopened it after every probe (9 openings in
// this run).
func TestPoisonMessagesDoNotStopTheWorkers(t *testing.T) {
	openings := &breakerOpenings{}
	rep, err := runSim(t, simulation.Config{
		Orders: 200, Workers: 3, Concurrency: 8, Seed: 5,
		Faults: simulation.FaultRates{Poison: 0.04},
		Logger: slog.New(openings),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		var b strings.Builder
		rep.WriteTo(&b)
		t.Fatalf("%v\n%s", err, b.String())
	}
	t.Logf("%d poison orders, %d poison reads, %d status changes dead-lettered (%v), %d order documents of %d valid orders, %v on the run's clock, %d breaker openings",
		rep.PoisonOrders, rep.Faults.PoisonReads, rep.Status.DeadLettered, rep.DeadLetters, rep.OrderDocuments, rep.Valid, rep.Elapsed, openings.n.Load())
	if rep.PoisonOrders == 0 || rep.Faults.PoisonReads == 0 || rep.Status.DeadLettered == 0 || rep.DeadLetters[sbqueue.ReasonMaxDeliveryCountExceeded] == 0 {
		t.Errorf("poison orders %d, reads %d, status changes dead-lettered %d, dead letters %v: want the fault to strike and its messages dead-lettered",
			rep.PoisonOrders, rep.Faults.PoisonReads, rep.Status.DeadLettered, rep.DeadLetters)
	}
	if rep.OrderDocuments != rep.Valid {
		t.Errorf("%d order documents for %d valid orders, want every order created", rep.OrderDocuments, rep.Valid)
	}
	if n := openings.n.Load(); n != 0 {
		t.Errorf("the workers' breakers opened %d times, want never: the store answered every probe", n)
	}
}
