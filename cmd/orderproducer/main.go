// Command orderproducer sends orders to the orders queue with MessageId set
// to the order id, so that both the queue's duplicate detection and the
// worker's database check can recognise a resend.
//
// It generates valid orders or reads them as JSON lines from a file or stdin,
// and can deliberately send exact duplicates (a producer retry), reused ids
// with other content (the mismatch case) and malformed bodies, so that every
// path of the worker can be shown on a real queue. Run `orderproducer -h`.
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
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderproducer:", err)
		os.Exit(1)
	}
}
