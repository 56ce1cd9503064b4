package main

import (
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/payments"
)

// newPaymentGateway returns the payments service client the worker captures
// payments with: per-attempt timeouts, retries with backoff on 5xx and 429
// only, and the order's idempotency key on every attempt.
func newPaymentGateway(baseURL string) (payments.Gateway, error) {
	c, err := payments.NewClient(baseURL, nil)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("payments service %q: %w", baseURL, err)
	}
	return payments.Gateway{Client: c}, nil
}
