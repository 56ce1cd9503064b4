package simulation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/order/audit"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// AuditReport is what orderctl audit's checks (package order/audit) found
// in the run's final store (Config.Audit).
type AuditReport struct {
	// Report is the audit's report.
	Report *audit.Report
	// Unexplained are the violations the run's ground truth does not
	// explain: every one is a defect. A violation is explained when its
	// order is one the run made unusable on purpose (a poison or outage
	// order), or when a message in a dead-letter queue, which an operator
	// must resolve, leaves it unfinished: an order message on the orders
	// queue its payment, an event on a subscription that consumer's
	// marker. The audit, which sees the store and not the broker, reports
	// those as unfinished, as it should.
	Unexplained []audit.Violation
	// Explained counts the other violations.
	Explained int
}

// auditStore runs the audit on the final store mem: the orders, the relay's
// leases and the inbox consumers' markers all live in it, as on the
// emulators. Every event must have reached every consumer (the run
// drained its subscriptions: no settle time), every order with a total
// must be paid (no claim horizon), the ledger is the payments service's
// own, and the consumers share the store's clock (no clock skew).
func auditStore(ctx context.Context, cfg Config, mem *memstore.Store, svc *paymentservice.Service, relayRan bool, queues []sbqueue.Snapshot, excused map[string]bool) (*AuditReport, error) {
	ac := audit.Config{Orders: mem, Feed: mem.ChangeFeed(memstore.ChangeFeedOptions{Ranges: feedRanges, Seed: cfg.Seed}),
		Settle: time.Nanosecond, ClaimHorizon: time.Nanosecond, Payments: svc != nil, MaxIDs: 1 << 20, ClockSkew: -1}
	if relayRan {
		ac.Relays = []string{relayName}
		for _, c := range inboxConsumers {
			ac.Consumers = append(ac.Consumers, audit.Consumer{Name: c, Store: mem, MarkerTTL: cfg.MarkerTTL})
		}
	}
	if svc != nil {
		c, err := payments.NewClient("http://payments.invalid/", &payments.ClientOptions{HTTPClient: handlerDoer{svc}})
		if err != nil {
			return nil, err
		}
		ac.Ledger = payments.Gateway{Client: c}
	}
	rep, err := audit.Run(ctx, ac, "")
	if err != nil {
		return nil, err
	}
	// What a dead-lettered message explains: on the orders queue, an
	// unfinished payment of its order; on a subscription, a consumer's
	// missing marker. An unusable order explains everything of its own.
	explains := map[string]map[string]bool{}
	explain := func(invariants []string, orderID string) {
		for _, n := range invariants {
			if explains[n] == nil {
				explains[n] = make(map[string]bool)
			}
			explains[n][orderID] = true
		}
	}
	for id := range excused {
		explain(audit.Names(), id)
	}
	for i, q := range queues {
		for _, m := range q.DeadLetters {
			if i == 0 {
				explain([]string{audit.Payment, audit.PaymentClaim, audit.PaymentLedger}, violationOrder(m.MessageID))
			} else {
				explain([]string{audit.Inbox}, violationOrder(m.MessageID))
			}
		}
	}
	out := &AuditReport{Report: rep}
	for _, r := range rep.Invariants {
		for _, v := range r.First {
			if explains[r.Name][violationOrder(v.ID)] {
				out.Explained++
			} else {
				out.Unexplained = append(out.Unexplained, v)
			}
		}
	}
	return out, nil
}

// handlerDoer sends a request to a handler in process, without a network:
// the run may be in a synctest bubble.
type handlerDoer struct{ h http.Handler }

func (d handlerDoer) Do(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// violationOrder returns the order an id names: an order id, an event id,
// a payment record's or an inbox marker's id, a status change's MessageId,
// or a document id a broken consumer derived from one ("<orderId>:<n>"):
// an order id has no ':'.
func violationOrder(id string) string {
	if rest, ok := strings.CutPrefix(id, "inbox:"); ok {
		if _, msg, ok := strings.Cut(rest, ":"); ok {
			id = msg
		}
	}
	id = strings.TrimPrefix(orderOfMessage(id), order.PaymentRecordID(""))
	o, _, _ := strings.Cut(id, ":")
	return o
}
