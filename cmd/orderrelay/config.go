package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// config is the relay's configuration. Every field comes from an environment
// variable named like the azd outputs and can be overridden by a flag.
type config struct {
	ServiceBusNamespace        string
	ServiceBusConnectionString string // secret; emulators and the test broker only
	Topic                      string

	CosmosEndpoint           string
	CosmosKey                string // secret; emulators only
	CosmosDatabase           string
	CosmosContainer          string
	CosmosLeasesContainer    string // empty: the orders container
	CosmosInsecureSkipVerify bool   // emulators' self-signed certificate only

	Name               string
	Owner              string
	PollInterval       time.Duration
	CheckpointInterval time.Duration
	LeaseDuration      time.Duration
	CallTimeout        time.Duration
	PageSize           int
	MaxBatchMessages   int

	HealthAddr string // listen address of /livez, /readyz, /startupz (and /metrics); empty: no listener
	// Telemetry: OTEL_EXPORTER_OTLP_ENDPOINT exports metrics (and logs)
	// over OTLP; RELAY_METRICS_PROMETHEUS serves the metrics on the health
	// listener. Neither by default.
	Telemetry telemetry.Config

	cli.Logging
}

// defaultTopic is the topic infra/bicep creates for the order events.
const defaultTopic = "order-events"

// parseConfig reads the environment through getenv, then the flags in args.
// A flag mistake is returned alone (a *cli.UsageError, or flag.ErrHelp for
// -h); otherwise every unparsable variable and every missing or inconsistent
// setting is reported at once, each naming its variable.
func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var c config
	env := cli.NewEnv(fs, getenv)
	env.String(&c.ServiceBusNamespace, "namespace", "SERVICEBUS_NAMESPACE", "", "fully qualified Service Bus namespace, such as sb-x.servicebus.windows.net (Entra ID auth)")
	env.Secret(&c.ServiceBusConnectionString, "servicebus-connection-string", "SERVICEBUS_CONNECTION_STRING", "", "Service Bus connection string, for the emulator or the test broker only (instead of -namespace)")
	env.String(&c.Topic, "topic", "SERVICEBUS_TOPIC", defaultTopic, "topic to publish the events to; it must have duplicate detection on")
	env.String(&c.CosmosEndpoint, "cosmos-endpoint", "COSMOS_ENDPOINT", "", "Cosmos DB account endpoint, such as https://x.documents.azure.com:443/")
	env.Secret(&c.CosmosKey, "cosmos-key", "COSMOS_KEY", "", "Cosmos DB account key, for emulators only (Azure uses Entra ID)")
	env.String(&c.CosmosDatabase, "cosmos-database", "COSMOS_DATABASE", "orders", "Cosmos DB database")
	env.String(&c.CosmosContainer, "cosmos-container", "COSMOS_CONTAINER", "orders", "Cosmos DB container of the orders, partitioned on /orderId, whose change feed is read (the relay only reads it)")
	env.String(&c.CosmosLeasesContainer, "cosmos-leases-container", "COSMOS_LEASES_CONTAINER", "", "Cosmos DB container of the relay's lease documents, partitioned on /orderId, such as leases (what the Bicep template creates, and the relay's identity may write); empty: the orders container (emulators, one identity)")
	env.Bool(&c.CosmosInsecureSkipVerify, "cosmos-insecure-skip-verify", "COSMOS_INSECURE_SKIP_VERIFY", false, "accept the emulator's self-signed certificate; never for Azure")
	env.String(&c.Name, "name", "RELAY_NAME", "orderrelay", "relay name, shared by its instances: the leases are lease:<name>:<feed range>")
	env.String(&c.Owner, "owner", "RELAY_OWNER", "", "this instance's name in the leases; empty: host name and a random suffix")
	env.Duration(&c.PollInterval, "poll-interval", "RELAY_POLL_INTERVAL", relay.DefaultPollInterval, "pause between polls while the change feed is idle (the longest: after events it polls again after 1/32 of it, and backs off from there)")
	env.Duration(&c.CheckpointInterval, "checkpoint-interval", "RELAY_CHECKPOINT_INTERVAL", relay.DefaultCheckpointInterval, "least time between two checkpoints (lease writes) of a feed range, always after the events they cover were published; a crash republishes up to about this much more")
	env.Duration(&c.LeaseDuration, "lease-duration", "RELAY_LEASE_DURATION", relay.DefaultLeaseDuration, "how long a lease survives without renewal (renewed every third of it); a crashed instance's ranges are taken over after it")
	env.Duration(&c.CallTimeout, "call-timeout", "RELAY_CALL_TIMEOUT", relay.DefaultCallTimeout, "deadline of every Cosmos DB and Service Bus call")
	env.Int(&c.PageSize, "page-size", "RELAY_PAGE_SIZE", relay.DefaultPageSize, "most changes read per change feed request")
	env.Int(&c.MaxBatchMessages, "batch-messages", "RELAY_BATCH_MESSAGES", relay.DefaultMaxBatchMessages, "most messages per batch sent")
	env.String(&c.HealthAddr, "health-addr", "RELAY_HEALTH_ADDR", "", "listen address of the health probes /livez, /readyz and /startupz, such as :8080 (what the Container App's probes use); empty: no listener")
	c.Telemetry.Define(env, "orderrelay", "RELAY_METRICS_PROMETHEUS")
	c.Logging.Define(env)
	fs.Usage = func() { usage(fs) }
	err := env.Parse(args)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	return c, errors.Join(err, c.Validate())
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: orderrelay [flags]

Reads the Cosmos DB change feed of the orders container and publishes every
OrderAccepted outbox event to a Service Bus topic, at least once (MessageId =
the event id, so the topic's duplicate detection and the subscribers' inbox
markers absorb republishes). Every flag defaults to the environment variable
named after it.

In Azure:     SERVICEBUS_NAMESPACE, COSMOS_ENDPOINT (+ AZURE_CLIENT_ID for a managed identity)
On emulators: SERVICEBUS_CONNECTION_STRING, COSMOS_ENDPOINT, COSMOS_KEY
              (cosmium has no change feed: on the local stack, COSMOS_ENDPOINT is
              the feed proxy that scripts/local.sh starts; its env sets it)
Health:       RELAY_HEALTH_ADDR (:8080 in Azure) serves /livez, /readyz, /startupz
Telemetry:    OTEL_EXPORTER_OTLP_ENDPOINT (metrics over OTLP/HTTP, or gRPC with
              OTEL_EXPORTER_OTLP_PROTOCOL=grpc), RELAY_METRICS_PROMETHEUS=true
              (metrics on RELAY_HEALTH_ADDR's /metrics); none by default
`+cli.LocalStackUsage+cli.VersionUsage("orderrelay")+`
Flags:
`)
	fs.PrintDefaults()
}

// Validate reports every missing or inconsistent setting at once, naming the
// variable (and flag) to set.
func (c *config) Validate() error {
	errs := []error{c.Telemetry.Validate()}
	if c.Topic == "" {
		errs = append(errs, errors.New("set SERVICEBUS_TOPIC (-topic)"))
	}
	// The namespace and connection string checks are the worker's; the
	// queue they also check is not the relay's, so it is named here.
	sb := cli.ServiceBus{Namespace: c.ServiceBusNamespace, ConnectionString: c.ServiceBusConnectionString, Queue: "(topic)"}
	errs = append(errs, sb.Validate())
	if c.CosmosEndpoint == "" {
		errs = append(errs, errors.New("set COSMOS_ENDPOINT (-cosmos-endpoint)"))
	} else if err := cli.CheckEndpoint(c.CosmosEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("COSMOS_ENDPOINT (-cosmos-endpoint): %w", err))
	}
	if c.CosmosDatabase == "" || c.CosmosContainer == "" {
		errs = append(errs, errors.New("set COSMOS_DATABASE (-cosmos-database) and COSMOS_CONTAINER (-cosmos-container)"))
	}
	if c.CosmosInsecureSkipVerify && c.CosmosKey == "" {
		errs = append(errs, errors.New("COSMOS_INSECURE_SKIP_VERIFY is for emulators only, which need COSMOS_KEY"))
	}
	if err := relay.ValidateName(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("RELAY_NAME (-name): %w", err))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("RELAY_POLL_INTERVAL (-poll-interval) %v must be positive", c.PollInterval))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("RELAY_CALL_TIMEOUT (-call-timeout) %v must be positive", c.CallTimeout))
	}
	if c.CheckpointInterval <= 0 {
		errs = append(errs, fmt.Errorf("RELAY_CHECKPOINT_INTERVAL (-checkpoint-interval) %v must be positive", c.CheckpointInterval))
	}
	if c.LeaseDuration < 3*c.CallTimeout {
		errs = append(errs, fmt.Errorf("RELAY_LEASE_DURATION (-lease-duration) %v must be at least 3 times RELAY_CALL_TIMEOUT (%v): a renewal must finish before the lease expires", c.LeaseDuration, c.CallTimeout))
	}
	if c.PageSize < 1 || c.PageSize > 10000 {
		errs = append(errs, fmt.Errorf("RELAY_PAGE_SIZE (-page-size) %d is not between 1 and 10000", c.PageSize))
	}
	if c.MaxBatchMessages < 1 || c.MaxBatchMessages > 4500 {
		errs = append(errs, fmt.Errorf("RELAY_BATCH_MESSAGES (-batch-messages) %d is not between 1 and 4500", c.MaxBatchMessages))
	}
	if c.HealthAddr != "" {
		if _, _, err := net.SplitHostPort(c.HealthAddr); err != nil {
			errs = append(errs, fmt.Errorf("RELAY_HEALTH_ADDR (-health-addr) %q is not host:port (such as :8080): %w", c.HealthAddr, err))
		}
	}
	if c.Telemetry.Prometheus && c.HealthAddr == "" {
		errs = append(errs, errors.New("RELAY_METRICS_PROMETHEUS (-metrics-prometheus) serves the metrics on the health listener's /metrics, "+
			"which RELAY_HEALTH_ADDR (-health-addr) is not set to open: set it (such as :8080), or export over OTEL_EXPORTER_OTLP_ENDPOINT instead"))
	}
	return errors.Join(errs...)
}

// leasesContainer is the container of the lease documents.
func (c *config) leasesContainer() string {
	if c.CosmosLeasesContainer == "" {
		return c.CosmosContainer
	}
	return c.CosmosLeasesContainer
}

// orderEvents is the shape of the order example's outbox events, as
// package order names it.
var orderEvents = relay.EventFormat{
	TypeField:         order.OutboxTypeField,
	TypeValue:         order.OutboxTypeValue,
	IDField:           order.OutboxIDField,
	SubjectField:      order.OutboxSubjectField,
	PartitionKeyField: order.OutboxPartitionKeyField,
	TimeField:         order.OutboxTimeField,
}

// options returns the relay's options: the order example's events, and
// lease documents partitioned as the orders container is (the leases
// container the Bicep template creates is too).
func (c *config) options(logger *slog.Logger, hooks relay.Hooks) relay.Options {
	return relay.Options{Name: c.Name, Owner: c.Owner, LeaseDuration: c.LeaseDuration, PollInterval: c.PollInterval, CheckpointInterval: c.CheckpointInterval,
		PageSize: c.PageSize, MaxBatchMessages: c.MaxBatchMessages, CallTimeout: c.CallTimeout, Logger: logger, Hooks: hooks,
		Events: orderEvents, LeasePartitionKeyPath: order.OutboxLeasePartitionKeyPath}
}

// LogValue logs the configuration once at start-up, with secrets masked.
func (c config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("servicebus_namespace", c.ServiceBusNamespace),
		slog.String("servicebus_connection_string", cli.Mask(c.ServiceBusConnectionString)),
		slog.String("topic", c.Topic),
		slog.String("cosmos_endpoint", c.CosmosEndpoint),
		slog.String("cosmos_key", cli.Mask(c.CosmosKey)),
		slog.String("cosmos_database", c.CosmosDatabase),
		slog.String("cosmos_container", c.CosmosContainer),
		slog.String("cosmos_leases_container", c.leasesContainer()),
		slog.String("name", c.Name),
		slog.String("poll_interval", cli.FormatDuration(c.PollInterval)),
		slog.String("checkpoint_interval", cli.FormatDuration(c.CheckpointInterval)),
		slog.String("lease_duration", cli.FormatDuration(c.LeaseDuration)),
		slog.String("call_timeout", cli.FormatDuration(c.CallTimeout)),
		slog.Int("page_size", c.PageSize),
		slog.Int("batch_messages", c.MaxBatchMessages),
		slog.String("health_addr", c.HealthAddr),
		c.Telemetry.LogGroup(),
	)
}
