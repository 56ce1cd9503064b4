package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TypePayment is the document type of payment records.
const TypePayment = "payment"

// Payment record states.
const (
	PaymentInProgress = "in-progress"
	PaymentCompleted  = "completed"
)

// PaymentRecordID returns the id of an order's payment record.
func PaymentRecordID(orderID string) string { return "Payment:" + orderID }

// PaymentKey returns the Idempotency-Key of an order's payment capture. It
// depends on the order id alone, so every delivery and every worker passes
// the same key, and the payments service charges at most once.
func PaymentKey(orderID string) string { return "capture:" + orderID }

// PaymentRecord is the two-phase record of a payment capture, stored in the
// order's partition. A delivery claims it (in progress, with owner and time)
// before it calls the payments service and completes it afterwards; both
// writes are ETag-guarded, so two deliveries never both believe they own it.
type PaymentRecord struct {
	ID             string     `json:"id"`      // PaymentRecordID(OrderID)
	OrderID        string     `json:"orderId"` // the partition key
	Type           string     `json:"type"`    // TypePayment
	State          string     `json:"state"`   // PaymentInProgress or PaymentCompleted
	IdempotencyKey string     `json:"idempotencyKey"`
	AmountMinor    int64      `json:"amountMinor"`
	Currency       string     `json:"currency"`
	Owner          string     `json:"owner"`     // the delivery that holds the claim
	ClaimedAt      time.Time  `json:"claimedAt"` // zero: released, claimable at once
	Attempts       int        `json:"attempts"`  // claims so far
	PaymentID      string     `json:"paymentId,omitempty"`
	CompletedAt    *time.Time `json:"completedAt,omitempty"`
}

// Capture is a payment capture request.
type Capture struct {
	OrderID     string
	AmountMinor int64
	Currency    string
}

// PaymentGateway captures payments through a downstream service that
// deduplicates on the idempotency key: a repeated key returns the original
// result and charges nothing. Errors matching ErrTransient (or a passed
// deadline) are retried; errors matching ErrPaymentRejected never succeed.
type PaymentGateway interface {
	Capture(ctx context.Context, idempotencyKey string, c Capture) (paymentID string, err error)
}

// ErrPaymentRejected means the payments service refused the capture for
// good, for example because the key was used before for another amount.
var ErrPaymentRejected = errors.New("payment rejected")

// payments is the configuration of the payment step.
type payments struct {
	gateway PaymentGateway
	lease   time.Duration
	owner   string
}

// WithPayments makes the Processor capture each accepted order's payment
// through g, recording it in the order's partition with a two-phase record.
// lease is how long a claim protects a capture in progress: tie it to the
// lock duration (the worker's message timeout is a good value), since after
// it the claimant's delivery is dead or its lock lost. owner names this
// worker in the records. The Processor needs a DocumentStore (WithDocuments).
func WithPayments(g PaymentGateway, lease time.Duration, owner string) Option {
	return func(p *Processor) { p.payments = &payments{gateway: g, lease: lease, owner: owner} }
}

// capturePayment makes sure the order's payment is captured exactly once.
// It returns nil when the capture is completed (now or before), else the
// Result to settle with.
//
// The record moves: absent → in progress (claimed) → completed. On a
// redelivery: completed → nothing to do; in progress and fresh → someone
// else may hold it, retry later; in progress and stale → reclaim and call
// again with the same key, which the payments service answers with the
// original result if the earlier call did charge.
func (p *Processor) capturePayment(ctx context.Context, m Message, doc OrderDocument) *Result {
	if p.docs == nil {
		err := errors.New("payments configured without a document store")
		return &Result{Outcome: Transient, OrderID: doc.OrderID, Reason: ReasonStoreError, Description: err.Error(), Err: err}
	}
	orderID, now := doc.OrderID, p.now().UTC()
	owner := fmt.Sprintf("%s/%s/%d", p.payments.owner, m.ID, m.DeliveryCount)

	// 1. Claim the record.
	var rec PaymentRecord
	etag, err := readJSON(ctx, p.docs, orderID, PaymentRecordID(orderID), &rec)
	switch {
	case errors.Is(err, ErrNotFound):
		rec = PaymentRecord{ID: PaymentRecordID(orderID), OrderID: orderID, Type: TypePayment, State: PaymentInProgress,
			IdempotencyKey: PaymentKey(orderID), AmountMinor: doc.TotalMinor, Currency: doc.Currency,
			Owner: owner, ClaimedAt: now, Attempts: 1}
		body, _ := json.Marshal(rec)
		err = p.docs.CreateDocuments(ctx, orderID, []Document{{ID: rec.ID, Body: body}})
		if errors.Is(err, ErrAlreadyExists) {
			return paymentBusy(orderID, "claimed by another delivery just now")
		}
		if err != nil {
			return ptr(storeFailure(orderID, "create payment record", err))
		}
		if _, etag, err = p.docs.ReadDocument(ctx, orderID, rec.ID); err != nil {
			return ptr(storeFailure(orderID, "read payment record", err))
		}
	case err != nil:
		return ptr(storeFailure(orderID, "read payment record", err))
	case rec.State == PaymentCompleted:
		return nil
	case !rec.ClaimedAt.IsZero() && now.Sub(rec.ClaimedAt) < p.payments.lease:
		return paymentBusy(orderID, fmt.Sprintf("in progress by %s since %s", rec.Owner, rec.ClaimedAt.Format(time.RFC3339Nano)))
	default: // stale or released: reclaim
		rec.Owner, rec.ClaimedAt, rec.Attempts = owner, now, rec.Attempts+1
		if etag, err = p.replaceJSON(ctx, orderID, rec.ID, rec, etag); err != nil {
			if errors.Is(err, ErrPreconditionFailed) {
				return paymentBusy(orderID, "reclaimed by another delivery just now")
			}
			return ptr(storeFailure(orderID, "reclaim payment record", err))
		}
	}

	// 2. Call the payments service with the order's key.
	paymentID, err := p.payments.gateway.Capture(ctx, rec.IdempotencyKey, Capture{OrderID: orderID, AmountMinor: rec.AmountMinor, Currency: rec.Currency})
	if err != nil {
		if errors.Is(err, ErrPaymentRejected) {
			return &Result{Outcome: Invalid, OrderID: orderID, Reason: ReasonPaymentRejected, Description: err.Error(), Err: err}
		}
		// Release the claim so that the redelivery retries at once; if the
		// release fails, the claim goes stale after the lease instead.
		rec.ClaimedAt = time.Time{}
		_, _ = p.replaceJSON(context.WithoutCancel(ctx), orderID, rec.ID, rec, etag)
		return &Result{Outcome: Transient, OrderID: orderID, Reason: ReasonPaymentUnavailable, Description: "capture: " + err.Error(), Err: err}
	}

	// 3. Mark it completed. If the claim was taken over meanwhile, the new
	// owner's call with the same key gets this payment back and completes it.
	done := now
	if d := p.now().UTC(); d.After(done) {
		done = d
	}
	rec.State, rec.PaymentID, rec.CompletedAt = PaymentCompleted, paymentID, &done
	if _, err := p.replaceJSON(ctx, orderID, rec.ID, rec, etag); err != nil {
		if errors.Is(err, ErrPreconditionFailed) {
			return paymentBusy(orderID, "claim taken over while capturing; the new owner completes it")
		}
		return ptr(storeFailure(orderID, "complete payment record", err))
	}
	return nil
}

func (p *Processor) replaceJSON(ctx context.Context, pk, id string, v any, etag string) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return p.docs.ReplaceDocument(ctx, pk, Document{ID: id, Body: body}, etag)
}

func paymentBusy(orderID, why string) *Result {
	return &Result{Outcome: Transient, OrderID: orderID, Reason: ReasonPaymentInProgress, Description: "payment capture " + why}
}

func ptr(r Result) *Result { return &r }
