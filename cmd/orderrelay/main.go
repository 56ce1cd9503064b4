// Command orderrelay is the outbox relay: it reads the Cosmos DB change feed
// of the orders container and publishes every OrderAccepted event to a
// Service Bus topic (MessageId = the event id, Subject = the event type),
// at least once, checkpointing per feed range in lease documents of the same
// container (see package relay).
//
// Configuration comes from the environment variables that `azd up` outputs,
// each overridable by a flag; run `orderrelay -h` for the list. With
// RELAY_HEALTH_ADDR it serves /livez, /readyz and /startupz (see health.go);
// with OTEL_EXPORTER_OTLP_ENDPOINT or RELAY_METRICS_PROMETHEUS it exports the
// metrics of telemetry.go.
//
// SIGINT or SIGTERM stops it: the page in flight is published and
// checkpointed, every lease is released, exit status 0. A second signal
// stops it at once with exit status 1 (the leases then expire by
// themselves). A mistake on the command line prints one line and exits 2;
// -h prints the usage and exits 0.
package main

import (
	"context"
	"os"

	"github.com/idempotent-consumer/sbcosmos/internal/startup"
)

func main() {
	startup.Main("orderrelay", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	})
}
