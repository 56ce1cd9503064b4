package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// config is the producer's configuration, read like the worker's: environment
// variables named like the azd outputs, each overridable by a flag.
type config struct {
	cli.ServiceBus

	Count         int     // orders to generate, when Input is empty
	Input         string  // JSON lines file of orders; "-" for stdin
	Duplicates    float64 // fraction of orders sent again, byte for byte
	Reused        float64 // fraction of order ids sent again with other content
	Malformed     float64 // fraction of extra messages with bodies that can never be processed
	StatusChanges float64 // fraction of orders that get status changes
	ResendDelay   time.Duration
	Seed          uint64
	IDPrefix      string
	BatchSize     int
	Progress      string

	Telemetry telemetry.Config // traces only: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME

	cli.Logging
}

func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var c config
	env := cli.NewEnv(fs, getenv)
	c.ServiceBus.Define(env, "queue to send to")
	env.Int(&c.Count, "count", "", 100, "number of orders to generate (ignored with -input)")
	env.String(&c.Input, "input", "", "", "read orders as JSON lines from this file (- for stdin) instead of generating them")
	env.Float(&c.Duplicates, "duplicates", "", 0, "fraction of orders sent a second time, byte for byte, as a producer retry would")
	env.Float(&c.Reused, "reused", "", 0, "fraction of order ids sent a second time with other content (the worker dead-letters these)")
	env.Float(&c.Malformed, "malformed", "", 0, "number of malformed messages to add, as a fraction of the orders")
	env.Float(&c.StatusChanges, "status-changes", "", 0, "fraction of orders that get two status changes (paid v2, shipped v3), sent newest first after the resend delay")
	env.Duration(&c.ResendDelay, "resend-delay", "", 0, "wait this long before the duplicates and reused ids; inside the queue's duplicate-detection window Service Bus drops them, beyond it the worker must")
	var seed int
	env.Int(&seed, "seed", "", 0, "seed for generated orders and for choosing which to resend; 0 picks one from the clock")
	env.String(&c.IDPrefix, "id-prefix", "", "", fmt.Sprintf("prefix of generated order ids, at most %d characters; empty picks ord-<time> so that runs do not collide", maxIDPrefix()))
	env.Int(&c.BatchSize, "batch-size", "", 100, "most messages in one batch (a batch is also limited by size)")
	env.String(&c.Progress, "progress", "", "auto", "progress bar: auto (on a terminal), always or never")
	c.Telemetry.Define(env, "orderproducer", "")
	c.Logging.Define(env)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: orderproducer [flags]

Sends orders to a Service Bus queue with MessageId = order id.

In Azure:     SERVICEBUS_NAMESPACE (+ AZURE_CLIENT_ID for a managed identity)
On emulators: SERVICEBUS_CONNECTION_STRING
Tracing:      OTEL_EXPORTER_OTLP_ENDPOINT exports a span per message sent; the
              message carries its trace context (traceparent, Diagnostic-Id)
`+cli.LocalStackUsage+cli.VersionUsage("orderproducer")+`
Flags:
`)
		fs.PrintDefaults()
	}
	err := env.Parse(args)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	errs := []error{err}
	if seed < 0 {
		errs = append(errs, fmt.Errorf("-seed %d is negative", seed))
	} else {
		c.Seed = uint64(seed)
	}
	return c, errors.Join(append(errs, c.Validate())...)
}

// Validate reports every missing or inconsistent setting at once.
func (c *config) Validate() error {
	errs := []error{c.ServiceBus.Validate(), c.Telemetry.Validate()}
	if c.Input == "" && (c.Count < 1 || c.Count > 1_000_000) {
		errs = append(errs, fmt.Errorf("-count %d is not between 1 and 1000000", c.Count))
	}
	for _, f := range []struct {
		flag string
		v    float64
	}{{"-duplicates", c.Duplicates}, {"-reused", c.Reused}, {"-malformed", c.Malformed}, {"-status-changes", c.StatusChanges}} {
		if f.v < 0 || f.v > 1 {
			errs = append(errs, fmt.Errorf("%s %v is not a fraction between 0 and 1", f.flag, f.v))
		}
	}
	if c.ResendDelay < 0 {
		errs = append(errs, fmt.Errorf("-resend-delay %v is negative", c.ResendDelay))
	}
	if c.BatchSize < 1 || c.BatchSize > 5000 {
		errs = append(errs, fmt.Errorf("-batch-size %d is not between 1 and 5000", c.BatchSize))
	}
	if max := maxIDPrefix(); len(c.IDPrefix) > max {
		errs = append(errs, fmt.Errorf("-id-prefix has %d characters; at most %d: a generated order id (<prefix>-000000) may have %d (order.MaxOrderIDLength), "+
			"so that every MessageId made from it, a status change's <order id>:v<version> included, stays within the %d characters Service Bus accepts",
			len(c.IDPrefix), max, order.MaxOrderIDLength, cli.MaxMessageIDLength))
	}
	switch c.Progress {
	case "auto", "always", "never":
	default:
		errs = append(errs, fmt.Errorf("-progress %q: want auto, always or never", c.Progress))
	}
	return errors.Join(errs...)
}

// LogValue logs the configuration with secrets masked.
func (c config) LogValue() slog.Value {
	return slog.GroupValue(append(c.ServiceBus.LogAttrs(),
		slog.Int("count", c.Count),
		slog.String("input", c.Input),
		slog.Float64("duplicates", c.Duplicates),
		slog.Float64("reused", c.Reused),
		slog.Float64("malformed", c.Malformed),
		slog.Float64("status_changes", c.StatusChanges),
		slog.String("resend_delay", cli.FormatDuration(c.ResendDelay)),
		slog.Uint64("seed", c.Seed),
		slog.String("id_prefix", c.IDPrefix),
		slog.String("otlp_endpoint", cli.MaskURL(c.Telemetry.OTLPEndpoint)),
	)...)
}
