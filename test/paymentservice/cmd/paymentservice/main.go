// Command paymentservice runs the reference payment service of package
// payments as a standalone HTTP server: POST /payments captures a payment once
// per Idempotency-Key, replays the stored answer for a repeated key, rejects a
// key reused for another amount with 422, and counts the charges it performed.
// It forgets a key after its retention (-key-retention, 30 days by default;
// a request with a forgotten key charges again), but never a payment:
// GET /payments?orderId= lists an order's payments, which is how the order
// worker resolves a capture older than the retention it assumes.
// POST /payments/probe, the order worker's circuit-breaker probe, answers
// 204 No Content while a capture would go through and charges nothing.
//
// Keys and payments live in memory and are lost when it stops; it stands in
// for a payment provider on a developer's machine. It prints the URL it
// listens on to stdout, logs every request to stderr, and logs the number of
// charges when it stops on SIGINT or SIGTERM. Run `paymentservice -h` for the
// flags.
package main

import (
	"context"
	"os"

	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func main() {
	startup.Main("paymentservice", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
