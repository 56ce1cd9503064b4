package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// Gateway adapts a Client to the order package's PaymentGateway and
// PaymentLookup, translating
// the client's errors into the domain's: transient failures (5xx, 429,
// timeouts, a request still in progress) match idempotent.ErrTransient, and a key
// reused for another amount, or a request the service rejects, matches
// order.ErrPaymentRejected.
type Gateway struct {
	Client *Client
}

var (
	_ order.PaymentGateway = Gateway{}
	_ order.PaymentLookup  = Gateway{}
)

// Capture captures c under idempotencyKey and returns the payment id.
func (g Gateway) Capture(ctx context.Context, idempotencyKey string, c order.Capture) (string, error) {
	p, err := g.Client.Capture(ctx, idempotencyKey, CaptureRequest{OrderID: c.OrderID, AmountMinor: c.AmountMinor, Currency: c.Currency})
	if err != nil {
		return "", domainError(err)
	}
	return p.PaymentID, nil
}

// LookupPayments returns the payments the service's ledger holds for
// orderID, which outlive the idempotency keys. Errors translate as Capture's.
func (g Gateway) LookupPayments(ctx context.Context, orderID string) ([]order.CapturedPayment, error) {
	ps, err := g.Client.Lookup(ctx, orderID)
	if err != nil {
		return nil, domainError(err)
	}
	out := make([]order.CapturedPayment, len(ps))
	for i, p := range ps {
		out[i] = order.CapturedPayment{PaymentID: p.PaymentID, AmountMinor: p.AmountMinor, Currency: p.Currency}
	}
	return out, nil
}

// domainError translates a client error into the order package's sentinels.
func domainError(err error) error {
	switch {
	case IsTransient(err):
		return fmt.Errorf("%w: %w", idempotent.ErrTransient, err)
	case errors.Is(err, ErrKeyReused), errors.Is(err, ErrRejected):
		return fmt.Errorf("%w: %w", order.ErrPaymentRejected, err)
	}
	return err
}
