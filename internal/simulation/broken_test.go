package simulation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// overrule returns a consumer that runs the project's processor and then
// replaces the outcomes in change: a consumer with one classic bug.
func overrule(change map[order.Outcome]order.Outcome) func(order.Store) worker.Handler {
	return func(s order.Store) worker.Handler {
		p := order.NewProcessor(s, nil)
		return worker.HandlerFunc(func(ctx context.Context, m order.Message) order.Result {
			res := p.Process(ctx, m)
			if to, ok := change[res.Outcome]; ok {
				res.Outcome = to
				if to == order.Transient {
					res.Reason, res.Err = order.ReasonStoreError, errors.New("409 Conflict")
				}
			}
			return res
		})
	}
}

// keyedByDelivery is a consumer that derives its document ids from the
// delivery instead of the MessageId: every redelivery writes the order and
// its event again, under new ids.
func keyedByDelivery(s order.Store) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, m order.Message) order.Result {
		o, err := order.Decode(m.Body)
		if err != nil {
			return order.Result{Outcome: order.Invalid, Reason: order.ReasonInvalidMessage, Description: err.Error(), Err: err}
		}
		w := order.NewWrite(o, m.ID, o.RequestHash(), time.Now())
		suffix := fmt.Sprintf(":%d", m.DeliveryCount)
		w.Order.ID += suffix
		w.Event.ID += suffix
		switch err := s.CreateOrder(ctx, w); {
		case err == nil:
			return order.Result{Outcome: order.Created, OrderID: o.OrderID}
		case errors.Is(err, order.ErrAlreadyExists):
			return order.Result{Outcome: order.Duplicate, OrderID: o.OrderID}
		default:
			return order.Result{Outcome: order.Transient, OrderID: o.OrderID, Reason: order.ReasonStoreUnavailable, Err: err}
		}
	})
}

// TestBrokenConsumersFailTheChecker proves that the checker can fail: each
// consumer below has a bug idempotent consumers are known for, and the
// invariant that bug breaks must be reported, with the seed and the orders.
func TestBrokenConsumersFailTheChecker(t *testing.T) {
	redeliveries := simulation.FaultRates{LockExpiry: 0.3, LostSettlement: 0.3, Crash: 0.3, RetryOutsideWindow: 0.3}
	tests := []struct {
		name     string
		consumer func(order.Store) worker.Handler
		faults   simulation.FaultRates
		want     string
	}{
		{"treats a duplicate (409) as an error", overrule(map[order.Outcome]order.Outcome{order.Duplicate: order.Transient}),
			redeliveries, simulation.NoMessageLost},
		{"acknowledges a failed write", overrule(map[order.Outcome]order.Outcome{order.Transient: order.Created}),
			simulation.FaultRates{Transient: 0.3, Outage: 0.1}, simulation.NoMessageLost},
		{"deduplicates by id only, ignoring the content", overrule(map[order.Outcome]order.Outcome{order.Mismatch: order.Duplicate}),
			simulation.FaultRates{Reuse: 0.3}, simulation.RejectsDeadLettered},
		{"completes invalid messages", overrule(map[order.Outcome]order.Outcome{order.Invalid: order.Duplicate}),
			simulation.FaultRates{Malformed: 0.3}, simulation.RejectsDeadLettered},
		{"keys its writes by delivery", keyedByDelivery, redeliveries, simulation.OneOrderDocument},
		{"keys its writes by delivery: side effect twice", keyedByDelivery, redeliveries, simulation.OneEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const seed = 3
			rep, err := simulation.Run(context.Background(), simulation.Config{
				Orders: 60, Workers: 3, Concurrency: 4, Seed: seed, Faults: tt.faults, Consumer: tt.consumer,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			verdict := rep.Verdict()
			if !errors.Is(verdict, simulation.ErrViolations) {
				t.Fatalf("Verdict() = %v: the checker missed the bug", verdict)
			}
			if !slices.Contains(rep.InvariantsFailed, tt.want) {
				t.Errorf("invariants failed = %q, want %s among them", rep.InvariantsFailed, tt.want)
			}
			if want := fmt.Sprintf("seed %d", seed); !containsAll(verdict.Error(), want, rep.Violations[0].OrderID) {
				t.Errorf("Verdict() = %q: want the seed and the orders involved", verdict)
			}
		})
	}
}
