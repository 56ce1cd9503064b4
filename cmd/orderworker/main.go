// Command orderworker is the idempotent PeekLock consumer of the orders queue:
// it creates one Cosmos DB order document (and its OrderAccepted outbox event)
// per order, completes duplicates, dead-letters invalid messages and ids reused
// for other content, and abandons transient failures for redelivery.
//
// Configuration comes from the environment variables that `azd up` outputs,
// each overridable by a flag; run `orderworker -h` for the list.
//
// SIGINT or SIGTERM starts a drain (logged): no new messages, in-flight ones
// finish within the shutdown grace, exit status 0. A second signal stops it
// at once with exit status 1. A mistake on the command line prints one line
// and exits 2; -h prints the usage and exits 0.
package main

import (
	"context"
	"os"

	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func main() {
	startup.Main("orderworker", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
