package simulation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
	"github.com/idempotent-consumer/sbcosmos/test/internal/simulation"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// overrule returns a consumer that runs the project's processor and then
// replaces the outcomes in change: a consumer with one classic bug.
func overrule(change map[idempotent.Outcome]idempotent.Outcome) func(simulation.Env) worker.Handler {
	return func(e simulation.Env) worker.Handler {
		p := simulation.DefaultConsumer(e)
		return worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
			res := p.Process(ctx, m)
			if to, ok := change[res.Outcome]; ok {
				res.Outcome = to
				if to == idempotent.Transient {
					res.Reason, res.Err = idempotent.ReasonStoreError, errors.New("409 Conflict")
				}
			}
			return res
		})
	}
}

// keyedByDelivery is a consumer that derives its document ids from the
// delivery instead of the MessageId: every redelivery writes the order and
// its event again, under new ids.
func keyedByDelivery(e simulation.Env) worker.Handler {
	return worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		o, err := order.Decode(m.Body)
		if err != nil {
			return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage, Description: err.Error(), Err: err}
		}
		w := order.NewWrite(o, m.ID, o.RequestHash(), time.Now())
		suffix := fmt.Sprintf(":%d", m.DeliveryCount)
		w.Order.ID += suffix
		w.Event.ID += suffix
		docs, err := w.Documents()
		if err == nil {
			_, err = e.Store.CreateBatch(ctx, w.PartitionKey(), docs)
		}
		switch {
		case err == nil:
			return idempotent.Result{Outcome: idempotent.Created, Key: o.OrderID}
		case errors.Is(err, idempotent.ErrAlreadyExists):
			return idempotent.Result{Outcome: idempotent.Duplicate, Key: o.OrderID}
		default:
			return idempotent.Result{Outcome: idempotent.Transient, Key: o.OrderID, Reason: idempotent.ReasonStoreUnavailable, Err: err}
		}
	})
}

// brokenTimeLimit bounds the runs of broken consumers, on the run's
// virtual clock. A consumer that reports its duplicates as store errors
// makes them dependency failures of many entities: the circuit breakers'
// spread rule opens, and their trials, 10 to 40 lock durations apart, get
// the failing messages dead-lettered a few at a time once no healthy
// message is left (about 20 hours at 2 handlers per worker), far beyond
// a correct consumer's default limit.
const brokenTimeLimit = 72 * time.Hour

// TestBrokenConsumersFailTheChecker proves that the checker can fail: each
// consumer below has a bug idempotent consumers are known for, and the
// invariant that bug breaks must be reported, with the seed and the orders.
func TestBrokenConsumersFailTheChecker(t *testing.T) {
	redeliveries := simulation.FaultRates{LockExpiry: 0.3, LostSettlement: 0.3, Crash: 0.3, RetryOutsideWindow: 0.3}
	tests := []struct {
		name     string
		consumer func(simulation.Env) worker.Handler
		faults   simulation.FaultRates
		want     string
	}{
		{"treats a duplicate (409) as an error", overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Duplicate: idempotent.Transient}),
			redeliveries, simulation.NoMessageLost},
		{"acknowledges a failed write", overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Transient: idempotent.Created}),
			simulation.FaultRates{Transient: 0.3, Outage: 0.1}, simulation.NoMessageLost},
		{"deduplicates by id only, ignoring the content", overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Mismatch: idempotent.Duplicate}),
			simulation.FaultRates{Reuse: 0.3}, simulation.RejectsDeadLettered},
		{"completes invalid messages", overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Invalid: idempotent.Duplicate}),
			simulation.FaultRates{Malformed: 0.3}, simulation.RejectsDeadLettered},
		{"keys its writes by delivery", keyedByDelivery, redeliveries, simulation.OneOrderDocument},
		{"keys its writes by delivery: side effect twice", keyedByDelivery, redeliveries, simulation.OneEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const seed = 3
			rep, err := runSim(t, simulation.Config{
				Orders: 60, Workers: 3, Concurrency: 4, Seed: seed, Faults: tt.faults, Consumer: tt.consumer,
				TimeLimit: brokenTimeLimit,
			})
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

// freshKeys is a payment gateway with the classic bug: a new idempotency
// key on every call, so the payments service cannot recognise a retry.
type freshKeys struct {
	inner order.PaymentGateway
	n     atomic.Int64
}

func (g *freshKeys) Capture(ctx context.Context, key string, c order.Capture) (string, error) {
	return g.inner.Capture(ctx, fmt.Sprintf("%s:%d", key, g.n.Add(1)), c)
}

// withFreshKeys is the project's consumer over a freshKeys gateway.
func withFreshKeys(e simulation.Env) worker.Handler {
	e.Payments = &freshKeys{inner: e.Payments}
	return simulation.DefaultConsumer(e)
}

// blindStatus is the project's consumer, except that it applies status
// changes with a blind replace, ignoring their versions: the last one to
// arrive wins.
func blindStatus(e simulation.Env) worker.Handler {
	p := simulation.DefaultConsumer(e)
	return worker.HandlerFunc(func(ctx context.Context, m idempotent.Message) idempotent.Result {
		if m.Subject != order.SubjectOrderStatusChanged {
			return p.Process(ctx, m)
		}
		c, err := order.DecodeStatusChange(m.Body)
		if err != nil {
			return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonInvalidMessage, Description: err.Error(), Err: err}
		}
		body, _, err := e.Store.ReadDocument(ctx, c.OrderID, c.OrderID)
		if err != nil {
			return idempotent.Result{Outcome: idempotent.Transient, Key: c.OrderID, Reason: order.ReasonOrderNotYetCreated, Err: err}
		}
		var d order.OrderDocument
		if err := json.Unmarshal(body, &d); err != nil {
			return idempotent.Result{Outcome: idempotent.Transient, Key: c.OrderID, Reason: idempotent.ReasonStoreError, Err: err}
		}
		d.Status, d.Version = c.Status, c.Version
		if body, err = json.Marshal(d); err == nil {
			_, err = e.Store.ReplaceDocument(ctx, c.OrderID, idempotent.Document{ID: d.ID, Body: body}, "")
		}
		if err != nil {
			return idempotent.Result{Outcome: idempotent.Transient, Key: c.OrderID, Reason: idempotent.ReasonStoreError, Err: err}
		}
		return idempotent.Result{Outcome: idempotent.Applied, Key: c.OrderID}
	})
}

// sharedName runs every inbox subscription's consumer under one name, so
// the first to process a message suppresses the others.
func sharedName(_ string, e simulation.Env) worker.Handler {
	return simulation.DefaultInboxConsumer("loyalty", e)
}

// droppingSender is a relay whose sender drops every third batch and
// reports success, as a relay that checkpoints past a send that failed: the
// events of that batch never reach the topic.
func droppingSender(s relay.Sender) relay.Sender { return &dropEveryThird{inner: s} }

type dropEveryThird struct {
	inner relay.Sender
	n     atomic.Int64
}

func (d *dropEveryThird) NewBatch(ctx context.Context) (relay.Batch, error) {
	return d.inner.NewBatch(ctx)
}

func (d *dropEveryThird) SendBatch(ctx context.Context, b relay.Batch) error {
	if d.n.Add(1)%3 == 1 {
		return nil
	}
	return d.inner.SendBatch(ctx, b)
}

// admitAll is a circuit breaker that never opens: it admits every receive
// and learns nothing from the deliveries' decisions.
func admitAll(worker.Gate) worker.Gate { return openGate{} }

type openGate struct{}

func (openGate) Admit(ctx, rx context.Context) (context.Context, worker.Admission, bool) {
	return rx, worker.Admission{}, ctx.Err() == nil
}

func (openGate) Record(worker.Decision) {}

// schedulerThatLosesCopies is a worker whose delayed retry completes the
// original although its copy was not scheduled: its scheduler reports
// success when the broker scheduled nothing, the end state of a worker
// that completes the original first and then fails to schedule.
func schedulerThatLosesCopies(s worker.Scheduler) worker.Scheduler { return losingScheduler{s} }

type losingScheduler struct{ inner worker.Scheduler }

func (l losingScheduler) ScheduleMessages(ctx context.Context, ms []*azservicebus.Message, at time.Time, o *azservicebus.ScheduleMessagesOptions) ([]int64, error) {
	seqs, err := l.inner.ScheduleMessages(ctx, ms, at, o)
	if err != nil {
		return nil, nil
	}
	return seqs, nil
}

// senderThatSwallowsFailures is a relay that checkpoints a page whose send
// failed: its sender reports a failed send as sent, the end state of a
// relay that checkpoints a page before publishing it.
func senderThatSwallowsFailures(s relay.Sender) relay.Sender { return swallowingSender{s} }

type swallowingSender struct{ inner relay.Sender }

func (s swallowingSender) NewBatch(ctx context.Context) (relay.Batch, error) {
	return s.inner.NewBatch(ctx)
}

func (s swallowingSender) SendBatch(ctx context.Context, b relay.Batch) error {
	_ = s.inner.SendBatch(ctx, b)
	return nil
}

// TestBrokenPatternsFailTheChecker proves that the invariants of the parts
// beyond writing orders can fail: each run below breaks one of them, under
// the fault that exposes it, and the checker must name it.
func TestBrokenPatternsFailTheChecker(t *testing.T) {
	tests := []struct {
		name string
		cfg  simulation.Config
		want string
	}{
		{"a fresh idempotency key per call, answers lost after the charge",
			simulation.Config{Consumer: withFreshKeys, Faults: simulation.FaultRates{PaymentTimeout: 0.6}}, simulation.OneChargePerOrder},
		{"a fresh idempotency key per call, crashes before the payment mark",
			simulation.Config{Consumer: withFreshKeys, Faults: simulation.FaultRates{PaymentCrash: 0.3}}, simulation.OneChargePerOrder},
		{"status changes applied without comparing versions",
			simulation.Config{Consumer: blindStatus, StatusChanges: 1, Faults: simulation.FaultRates{OutOfOrder: 1}}, simulation.StatusIsHighestVersion},
		{"two inbox consumers sharing one name",
			simulation.Config{InboxConsumer: sharedName}, simulation.InboxOncePerConsumer},
		// MinRetention for the default queue settings is 15m: a 5m marker
		// is gone when a relay that paused past its lease republishes its
		// page after the 10m window.
		{"inbox markers that expire before a late republish arrives",
			simulation.Config{MarkerTTL: 5 * time.Minute, Faults: simulation.FaultRates{RelayPause: 1}}, simulation.InboxOncePerConsumer},
		{"a relay that checkpoints a batch its send dropped",
			simulation.Config{RelaySender: droppingSender}, simulation.EventReachesEverySubscription},
		{"a breaker that never opens, the store down",
			simulation.Config{Gate: admitAll, DisableInbox: true, Faults: simulation.FaultRates{StoreOutage: 0.1}}, simulation.NoDeadLetterDuringOutage},
		{"a delayed retry that completes the original without its copy, schedulings failing",
			simulation.Config{Scheduler: schedulerThatLosesCopies, StatusChanges: 1, Faults: simulation.FaultRates{OutOfOrder: 1, ScheduleFailure: 0.3}}, simulation.StatusIsHighestVersion},
		{"a relay that checkpoints a page whose send failed",
			simulation.Config{RelaySender: senderThatSwallowsFailures, Faults: simulation.FaultRates{RelaySendFailure: 1}}, simulation.EventReachesEverySubscription},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const seed = 3
			cfg := tt.cfg
			cfg.Orders, cfg.Workers, cfg.Concurrency, cfg.Seed = 60, 3, 4, seed
			rep, err := runSim(t, cfg)
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
			t.Logf("%d violations of %q, first: %s", len(rep.Violations), rep.InvariantsFailed, rep.Violations[0])
		})
	}
}

// TestCorrectPatternsHoldUnderTheSameFaults is the control of
// TestBrokenPatternsFailTheChecker: the project's consumers, under the same
// faults and seed, break nothing.
func TestCorrectPatternsHoldUnderTheSameFaults(t *testing.T) {
	for _, cfg := range []simulation.Config{
		{Faults: simulation.FaultRates{PaymentTimeout: 0.6}},
		{Faults: simulation.FaultRates{PaymentCrash: 0.3}},
		{StatusChanges: 1, Faults: simulation.FaultRates{OutOfOrder: 1}},
		{Faults: simulation.FaultRates{RetryOutsideWindow: 0.3}},
		{DisableInbox: true, Faults: simulation.FaultRates{StoreOutage: 0.1}},
		{StatusChanges: 1, Faults: simulation.FaultRates{OutOfOrder: 1, ScheduleFailure: 0.3}},
		{Faults: simulation.FaultRates{RelaySendFailure: 1}},
	} {
		cfg.Orders, cfg.Workers, cfg.Concurrency, cfg.Seed = 60, 3, 4, 3
		rep, err := runSim(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Verdict(); err != nil {
			t.Errorf("faults %+v: %v", cfg.Faults, err)
		}
	}
}

// downForGood is a payment gateway whose service never answers.
type downForGood struct{}

func (downForGood) Capture(context.Context, string, order.Capture) (string, error) {
	return "", fmt.Errorf("payments service down: %w", idempotent.ErrTransient)
}

// TestPaymentNeverCompletingIsDeadLetteredNotLost: when the payments
// service fails every capture for good while its probe answers, every
// order is stored, no order is charged, and every order message is
// dead-lettered, never completed: after MaxDeliveryCount (to be
// resubmitted), or, once its delayed retries (the circuit breaker's
// trials move failing messages off the head of the queue) outlast the
// payment key retention, for reconciliation by a person. The checker
// accepts that, and only that.
func TestPaymentNeverCompletingIsDeadLetteredNotLost(t *testing.T) {
	rep, err := runSim(t, simulation.Config{
		Orders: 40, Seed: 5, DisableInbox: true,
		Consumer: func(e simulation.Env) worker.Handler {
			e.Payments = downForGood{}
			return simulation.DefaultConsumer(e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		t.Fatal(err)
	}
	if got := rep.DeadLetters[sbqueue.ReasonMaxDeliveryCountExceeded] + rep.DeadLetters[order.ReasonPaymentNeedsReconciliation]; got != rep.Valid || rep.OrderDocuments != rep.Valid {
		t.Errorf("%d valid orders, %d stored, %d dead-lettered after MaxDeliveryCount or for reconciliation: want all of them (%v)", rep.Valid, rep.OrderDocuments, got, rep.DeadLetters)
	}
	if rep.Payments.Charges != 0 || rep.Payments.Completed != 0 {
		t.Errorf("%d charges, %d payment records completed, want none", rep.Payments.Charges, rep.Payments.Completed)
	}
}

// TestFailingReportCarriesHistories: the report of a broken consumer shows,
// for the orders involved, every delivery (with its delivery count and lock
// token), the handler's outcomes, the settlements, the store calls and the
// payment calls, so that the violation can be understood without a
// replay.
func TestFailingReportCarriesHistories(t *testing.T) {
	rep, err := runSim(t, simulation.Config{
		Orders: 40, Workers: 2, Concurrency: 2, Seed: 3, DisableInbox: true, TimeLimit: brokenTimeLimit,
		Consumer: overrule(map[idempotent.Outcome]idempotent.Outcome{idempotent.Duplicate: idempotent.Transient}),
		Faults:   simulation.FaultRates{Crash: 0.3, LostSettlement: 0.3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() == nil || len(rep.Histories) == 0 {
		t.Fatalf("verdict %v, %d histories: want a failure with histories", rep.Verdict(), len(rep.Histories))
	}
	var b strings.Builder
	rep.WriteTo(&b)
	out := b.String()
	h := rep.Histories[0]
	if !strings.Contains(out, "History of order "+h.OrderID) {
		t.Errorf("the report does not print the history of %s:\n%s", h.OrderID, out)
	}
	events := strings.Join(h.Events, "\n")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`sent ` + h.OrderID + ` as #\d+ \(original\)`),
		regexp.MustCompile(`delivered ` + h.OrderID + ` #\d+, delivery count 1, lock [0-9a-f]{8}`),
		regexp.MustCompile(`delivered ` + h.OrderID + ` #\d+, delivery count [2-9]`),
		regexp.MustCompile(`store: create order and its event( and payment claim \([^)]*\))?: ok`),
		regexp.MustCompile(`handled #\d+ \(count \d+\): created`),
		regexp.MustCompile(`handled #\d+ \(count \d+\): transient StoreError`),
		regexp.MustCompile(`settle #\d+ lock [0-9a-f]{8}: (complete|abandon): `),
		regexp.MustCompile(`capture call 1, key capture:` + h.OrderID + `: payment pay_`),
		regexp.MustCompile(`payments service: POST /payments, key capture:` + h.OrderID + `: 201`),
	} {
		if !want.MatchString(events) {
			t.Errorf("history of %s lacks %s:\n%s", h.OrderID, want, events)
		}
	}
}
