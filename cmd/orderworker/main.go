// Command orderworker is the idempotent PeekLock consumer of the orders queue:
// it creates one Cosmos DB order document (and its OrderAccepted outbox event)
// per order, completes duplicates, dead-letters invalid messages and ids reused
// for other content, and abandons transient failures for redelivery.
//
// Configuration comes from the environment variables that `azd up` outputs,
// each overridable by a flag; run `orderworker -h` for the list.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderworker:", err)
		os.Exit(1)
	}
}
