// Command orderctl is the operator's tool for the orders queue's dead-letter
// queue (<queue>/$DeadLetterQueue), or with SERVICEBUS_TOPIC and
// SERVICEBUS_SUBSCRIPTION for one subscription's
// (<topic>/Subscriptions/<sub>/$DeadLetterQueue):
//
//	orderctl dlq list                  counts by reason and age (peeks only)
//	orderctl dlq show ID               one message, and for OrderIdReused the diff with the stored order
//	orderctl dlq resubmit ID...|-reason R|-all [-yes] [-force-window] [-force]
//	orderctl dlq purge ID...|-reason R|-all|-older-than D [-yes]
//	orderctl plan [-rate N -duplicates S -payments ...]  the capacity plan of a rate (no Azure; docs/capacity.md)
//	orderctl audit [flags]             checks the stored state's exactly-once invariants
//
// It reads the settings orderworker reads (SERVICEBUS_*, COSMOS_*,
// WORKER_RESUBMISSION_HORIZON, WORKER_INBOX_*), each overridable by a flag,
// and works against Azure (Entra ID), the official emulator and the
// project's test broker (a connection string). resubmit and purge are dry
// runs unless -yes is given; resubmit sends before it completes the
// dead-letter copy, refuses inside the queue's duplicate-detection window
// and past the resubmission horizon, and prints exactly what it sent. On a
// subscription, resubmit is refused: Service Bus can only send to the
// topic, which would give the event to every subscription again. A
// mistake on the command line exits 2, a refusal or failure 1. audit
// (audit.go, package order/audit) exits 0 when the store is clean, 1 on a
// violation and 2 on a mistake in its settings or an audit that could not
// complete.
package main

import (
	"context"
	"os"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func main() {
	startup.Main("orderctl", func(ctx context.Context) error {
		return runEnv(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, time.Now)
	})
}
