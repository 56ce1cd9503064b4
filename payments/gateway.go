package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// Gateway adapts a Client to the order package's PaymentGateway, translating
// the client's errors into the domain's: transient failures (5xx, 429,
// timeouts, a request still in progress) match order.ErrTransient, and a key
// reused for another amount, or a request the service rejects, matches
// order.ErrPaymentRejected.
type Gateway struct {
	Client *Client
}

var _ order.PaymentGateway = Gateway{}

// Capture captures c under idempotencyKey and returns the payment id.
func (g Gateway) Capture(ctx context.Context, idempotencyKey string, c order.Capture) (string, error) {
	p, err := g.Client.Capture(ctx, idempotencyKey, CaptureRequest{OrderID: c.OrderID, AmountMinor: c.AmountMinor, Currency: c.Currency})
	switch {
	case err == nil:
		return p.PaymentID, nil
	case IsTransient(err):
		return "", fmt.Errorf("%w: %w", order.ErrTransient, err)
	case errors.Is(err, ErrKeyReused), errors.Is(err, ErrRejected):
		return "", fmt.Errorf("%w: %w", order.ErrPaymentRejected, err)
	default:
		return "", err
	}
}
