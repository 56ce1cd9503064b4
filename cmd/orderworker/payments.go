package main

import (
	"fmt"
	"net/http"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/payments"
)

// newPaymentGateway returns the payments service client the worker captures
// payments with: per-attempt timeouts, retries with backoff on 5xx and 429
// only, and the order's idempotency key on every attempt. With telemetry,
// every attempt is a client span (otelhttp) carrying the trace context and
// showing the Idempotency-Key.
func newPaymentGateway(baseURL string, tel *telemetry.Providers) (payments.Gateway, error) {
	var o payments.ClientOptions
	if tel.Enabled() {
		o.HTTPClient = &http.Client{Transport: tel.HTTPTransport(nil, payments.HeaderIdempotencyKey)}
	}
	c, err := payments.NewClient(baseURL, &o)
	if err != nil {
		return payments.Gateway{}, fmt.Errorf("payments service %q: %w", cli.MaskURL(baseURL), err)
	}
	return payments.Gateway{Client: c}, nil
}
