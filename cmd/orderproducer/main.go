// Command orderproducer sends orders to the orders queue with MessageId set
// to the order id, so that both the queue's duplicate detection and the
// worker's database check can recognise a resend.
//
// It generates valid orders or reads them as JSON lines from a file or stdin,
// and can deliberately send exact duplicates (a producer retry), reused ids
// with other content (the mismatch case) and malformed bodies, so that every
// path of the worker can be shown on a real queue. Run `orderproducer -h`.
//
// SIGINT or SIGTERM stops sending (logged) and prints what was sent; a
// second signal exits at once. A mistake on the command line prints one line
// and exits 2; -h prints the usage and exits 0.
package main

import (
	"context"
	"os"

	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func main() {
	startup.Main("orderproducer", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	})
}
