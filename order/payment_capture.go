package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// The payment step is the core's effect-once piece (idempotent.Effect): a
// record "Payment:<orderId>" of type "payment" in the order's partition,
// claimed in the order's batch, fenced by ETags, taken over after the lease
// or at once by a later delivery of the same copy, with the key
// PaymentKey(orderId) passed to the payments service and a stale claim
// reconciled through its ledger (PaymentLookup). This file only adapts
// the payments gateway onto the core's Downstream and names the step's
// reasons for the order domain.

// paymentEffectOptions returns the core effect's options for o.
func paymentEffectOptions(o PaymentOptions, now func() time.Time) idempotent.EffectOptions {
	var d idempotent.Downstream
	if o.Gateway != nil {
		d = newPaymentDownstream(o.Gateway)
	}
	return idempotent.EffectOptions{
		Name: "Payment", Type: TypePayment, PartitionKeyField: "orderId", RefField: "paymentId", Key: PaymentKey,
		Downstream: d, Lease: o.Lease, Owner: o.Owner, KeyRetention: o.KeyRetention, WriteTimeout: o.WriteTimeout, Now: now,
		Reasons: idempotent.EffectReasons{InProgress: ReasonPaymentInProgress, Unavailable: ReasonPaymentUnavailable,
			Rejected: ReasonPaymentRejected, NeedsReconciliation: ReasonPaymentNeedsReconciliation},
	}
}

// paymentRequest is the request of a capture as the payment record stores
// it, beside the record's own fields.
type paymentRequest struct {
	AmountMinor int64  `json:"amountMinor"`
	Currency    string `json:"currency"`
}

// captureRequest returns the effect request of capturing amount in
// currency.
func captureRequest(amountMinor int64, currency string) []byte {
	b, _ := json.Marshal(paymentRequest{AmountMinor: amountMinor, Currency: currency}) // cannot fail
	return b
}

// paymentDownstream is a PaymentGateway as the core's Downstream (and,
// when the gateway is a PaymentLookup, its Finder).
type paymentDownstream struct{ g PaymentGateway }

type paymentFinder struct {
	paymentDownstream
	l PaymentLookup
}

var (
	_ idempotent.Downstream = paymentDownstream{}
	_ idempotent.Finder     = paymentFinder{}
)

func newPaymentDownstream(g PaymentGateway) idempotent.Downstream {
	if l, ok := g.(PaymentLookup); ok {
		return paymentFinder{paymentDownstream{g}, l}
	}
	return paymentDownstream{g}
}

// Do captures the payment the request asks for under key.
func (d paymentDownstream) Do(ctx context.Context, key, orderID string, request []byte) (string, error) {
	var r paymentRequest
	if err := json.Unmarshal(request, &r); err != nil {
		return "", fmt.Errorf("%w: payment request %s: %w", idempotent.ErrEffectRejected, request, err)
	}
	id, err := d.g.Capture(ctx, key, Capture{OrderID: orderID, AmountMinor: r.AmountMinor, Currency: r.Currency})
	return id, rejected(err)
}

// Find lists the payments the service's ledger holds for the order.
func (f paymentFinder) Find(ctx context.Context, orderID string, request []byte) ([]idempotent.Found, error) {
	var r paymentRequest
	if err := json.Unmarshal(request, &r); err != nil {
		return nil, fmt.Errorf("%w: payment request %s: %w", idempotent.ErrEffectRejected, request, err)
	}
	ps, err := f.l.LookupPayments(ctx, orderID)
	if err != nil {
		return nil, rejected(err)
	}
	found := make([]idempotent.Found, len(ps))
	for i, p := range ps {
		found[i] = idempotent.Found{Ref: p.PaymentID, Matches: p.AmountMinor == r.AmountMinor && p.Currency == r.Currency,
			Detail: fmt.Sprintf("%d %s", p.AmountMinor, p.Currency)}
	}
	return found, nil
}

// rejected makes an error matching ErrPaymentRejected match the core's
// idempotent.ErrEffectRejected too.
func rejected(err error) error {
	if err != nil && errors.Is(err, ErrPaymentRejected) && !errors.Is(err, idempotent.ErrEffectRejected) {
		return fmt.Errorf("%w: %w", idempotent.ErrEffectRejected, err)
	}
	return err
}
