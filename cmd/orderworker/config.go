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
	"github.com/idempotent-consumer/sbcosmos/payments"
)

// config is the worker's configuration. Every field comes from an environment
// variable named like the azd outputs and can be overridden by a flag.
type config struct {
	cli.ServiceBus
	Topic        string // with Subscription: receive from a subscription of this topic, not from the queue
	Subscription string
	LockDuration time.Duration

	CosmosEndpoint           string
	CosmosKey                string // secret; emulators only
	CosmosDatabase           string
	CosmosContainer          string
	CosmosInsecureSkipVerify bool // emulators' self-signed certificate only
	CosmosCreateContainer    bool // emulators only: in Azure, Bicep creates them
	CosmosCreateDatabase     bool // with CosmosCreateContainer: create a database of another name than the default too
	CosmosCreateOther        bool // with CosmosCreateContainer: create a container of another name than the default too

	PaymentsURL          string        // enables the payment capture step
	PaymentsKeyRetention time.Duration // how long the payments service remembers an idempotency key

	InboxConsumer       string        // run the inbox-marker variant as this named consumer
	InboxTTL            time.Duration // the inbox markers' time-to-live
	MaxDeliveryCount    int           // the queue's, for the retention check
	MessageTTL          time.Duration // the queue's default message TTL, 0 = unlimited
	DuplicateWindow     time.Duration // the queue's duplicate-detection window
	ResubmissionHorizon time.Duration // how long after dead-lettering messages may be resubmitted

	Concurrency     int
	MessageTimeout  time.Duration
	ShutdownGrace   time.Duration
	SummaryInterval time.Duration
	HealthAddr      string // listen address of /livez, /readyz, /startupz (and /metrics); empty: no listener
	FactCache       int    // orders the order writer's fact cache remembers; 0: no cache

	// Telemetry: OTEL_EXPORTER_OTLP_ENDPOINT exports traces and metrics
	// over OTLP (http/protobuf, or gRPC with OTEL_EXPORTER_OTLP_PROTOCOL),
	// WORKER_METRICS_PROMETHEUS serves the metrics for scraping on the
	// health listener; neither by default.
	Telemetry telemetry.Config

	cli.Logging
}

// The defaults of the names and queue settings are what infra/bicep/main.bicep
// creates with its own defaults (TestDefaultsAgreeWithBicep checks them), so
// that the variables azd writes and the defaults never disagree.
const (
	orderWriterQueue        = "orders" // SERVICEBUS_QUEUE's default: the queue the order writer receives orders from
	defaultCosmosDatabase   = "orders"
	defaultCosmosContainer  = "orders"
	defaultLockDuration     = time.Minute
	defaultMaxDeliveryCount = 10
	defaultMessageTTL       = 14 * 24 * time.Hour
	defaultDuplicateWindow  = 10 * time.Minute
)

// parseConfig reads the environment through getenv, then the flags in args.
// A flag mistake is returned alone (a *cli.UsageError, or flag.ErrHelp for
// -h); otherwise every unparsable variable and every missing or inconsistent
// setting is reported at once, each naming its variable.
func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var c config
	env := cli.NewEnv(fs, getenv)
	c.ServiceBus.Define(env, "queue to receive from")
	env.String(&c.Topic, "topic", "SERVICEBUS_TOPIC", "", "topic of -subscription (the relay's order-events); alone it changes nothing: the worker receives from the queue")
	env.String(&c.Subscription, "subscription", "SERVICEBUS_SUBSCRIPTION", "", "subscription of -topic to receive from; also the default inbox consumer name")
	env.Duration(&c.LockDuration, "lock-duration", "SERVICEBUS_LOCK_DURATION", defaultLockDuration, "the queue's lock duration; a lock is renewed when half of the time the broker granted it has passed, and the worker warns if the broker grants another duration")
	env.String(&c.CosmosEndpoint, "cosmos-endpoint", "COSMOS_ENDPOINT", "", "Cosmos DB account endpoint, such as https://x.documents.azure.com:443/")
	env.Secret(&c.CosmosKey, "cosmos-key", "COSMOS_KEY", "", "Cosmos DB account key, for emulators only (Azure uses Entra ID)")
	env.String(&c.CosmosDatabase, "cosmos-database", "COSMOS_DATABASE", defaultCosmosDatabase, "Cosmos DB database")
	env.String(&c.CosmosContainer, "cosmos-container", "COSMOS_CONTAINER", defaultCosmosContainer, "Cosmos DB container, partitioned on /orderId")
	env.Bool(&c.CosmosInsecureSkipVerify, "cosmos-insecure-skip-verify", "COSMOS_INSECURE_SKIP_VERIFY", false, "accept the emulator's self-signed certificate; never for Azure")
	env.Bool(&c.CosmosCreateContainer, "cosmos-create-container", "COSMOS_CREATE_CONTAINER", false,
		"create the container first if it is missing and named "+defaultCosmosContainer+" (see -cosmos-create-other-container), and the database if it is missing and named "+defaultCosmosDatabase+" (see -cosmos-create-database); for emulators only")
	env.Bool(&c.CosmosCreateDatabase, "cosmos-create-database", "COSMOS_CREATE_DATABASE", false,
		"with -cosmos-create-container: create a missing database of another name too; without it a missing database is an error (a misspelt name would start a new, empty store); for emulators only")
	env.Bool(&c.CosmosCreateOther, "cosmos-create-other-container", "COSMOS_CREATE_OTHER_CONTAINER", false,
		"with -cosmos-create-container: create a missing container of another name than "+defaultCosmosContainer+" too; without it a missing container is an error (a misspelt name would start a new, empty store beside the real one, and the worker would write into it); for emulators only")
	env.SecretURL(&c.PaymentsURL, "payments-url", "PAYMENTS_URL", "", "base URL of the payments service; when set, each accepted order's payment is captured once")
	// The default is the payment step's safe assumption, 24 hours (the
	// shortest retention payment providers commonly keep), not the
	// reference service's 30 days: assuming more than the real service
	// keeps would repeat a forgotten key, a second charge.
	env.Duration(&c.PaymentsKeyRetention, "payments-key-retention", "PAYMENTS_KEY_RETENTION", order.DefaultPaymentKeyRetention, "how long the payments service remembers an idempotency key: never more than it really does (set it to the service's retention to save lookups); a payment claim whose key may be forgotten is resolved by looking the payment up, never by a blind capture")
	env.String(&c.InboxConsumer, "inbox-consumer", "WORKER_INBOX_CONSUMER", "", "run the inbox-marker variant as this named consumer (awards loyalty points once per order) instead of the order writer")
	env.Duration(&c.InboxTTL, "inbox-ttl", "WORKER_INBOX_TTL", 36*24*time.Hour, "time-to-live of inbox markers; refused below the queue's redelivery horizon")
	env.Int(&c.MaxDeliveryCount, "max-delivery-count", "SERVICEBUS_MAX_DELIVERY_COUNT", defaultMaxDeliveryCount, "the queue's max delivery count (for the inbox retention check)")
	env.Duration(&c.MessageTTL, "message-ttl", "SERVICEBUS_MESSAGE_TTL", defaultMessageTTL, "the queue's default message time-to-live, 0 or unlimited (or P10675199DT2H48M5.4775807S, as Service Bus reports it) for none (for the inbox retention check)")
	env.Duration(&c.DuplicateWindow, "duplicate-detection-window", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW", defaultDuplicateWindow, "the queue's duplicate-detection window (for the inbox retention check)")
	env.Duration(&c.ResubmissionHorizon, "resubmission-horizon", "WORKER_RESUBMISSION_HORIZON", 7*24*time.Hour, "how long after dead-lettering an operator may resubmit a message (for the inbox retention check)")
	env.Int(&c.Concurrency, "concurrency", "WORKER_CONCURRENCY", 8, "messages handled at once")
	env.Duration(&c.MessageTimeout, "message-timeout", "WORKER_MESSAGE_TIMEOUT", 0, "deadline of one message's handling; 0 means 80% of the lock duration")
	env.Duration(&c.ShutdownGrace, "shutdown-grace", "WORKER_SHUTDOWN_GRACE", 30*time.Second, "how long in-flight messages may finish after SIGTERM")
	env.Duration(&c.SummaryInterval, "summary-interval", "WORKER_SUMMARY_INTERVAL", 30*time.Second, "how often to log a summary of outcomes")
	env.String(&c.HealthAddr, "health-addr", "WORKER_HEALTH_ADDR", "", "listen address of the health probes /livez, /readyz and /startupz, such as :8080 (what the Container App's probes use); empty: no listener")
	env.Int(&c.FactCache, "fact-cache", "WORKER_FACT_CACHE", order.DefaultFactCacheSize, "orders the order writer's cache of facts the store confirmed remembers, to answer their duplicates without a round trip; 0 turns it off")
	c.Telemetry.Define(env, "orderworker", "WORKER_METRICS_PROMETHEUS")
	c.Logging.Define(env)
	fs.Usage = func() { usage(fs) }
	err := env.Parse(args)
	var usageErr *cli.UsageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &usageErr) {
		return c, err
	}
	if c.MessageTTL == cli.Unlimited {
		c.MessageTTL = 0 // order.RedeliveryHorizon's "unlimited"
	}
	if c.Subscription != "" && c.InboxConsumer == "" {
		// A subscription is one consumer of the topic: its inbox markers
		// are named after it unless WORKER_INBOX_CONSUMER says otherwise.
		c.InboxConsumer = c.Subscription
	}
	return c, errors.Join(err, c.Validate())
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: orderworker [flags]

Receives orders from a Service Bus queue in PeekLock mode and creates each
order once in Cosmos DB. Every flag defaults to the environment variable named
after it, so the variables that azd writes are enough to run in Azure.

In Azure:     SERVICEBUS_NAMESPACE, COSMOS_ENDPOINT (+ AZURE_CLIENT_ID for a managed identity)
On emulators: SERVICEBUS_CONNECTION_STRING, COSMOS_ENDPOINT, COSMOS_KEY, COSMOS_CREATE_CONTAINER=true
              (creates a missing container only when it is named `+defaultCosmosContainer+` or
              COSMOS_CREATE_OTHER_CONTAINER=true, and a missing database only when it is named
              `+defaultCosmosDatabase+` or COSMOS_CREATE_DATABASE=true: a misspelt COSMOS_CONTAINER or
              COSMOS_DATABASE is an error, and the log says what was created)
`+cli.LocalStackUsage+`Subscription: SERVICEBUS_TOPIC + SERVICEBUS_SUBSCRIPTION receive the relay's events as the inbox
              consumer named after the subscription; it captures no payments, so on the local
              env start it with -payments-url ''
Telemetry:    OTEL_EXPORTER_OTLP_ENDPOINT (traces and metrics over OTLP/HTTP, or gRPC
              with OTEL_EXPORTER_OTLP_PROTOCOL=grpc), WORKER_METRICS_PROMETHEUS=true
              (metrics on WORKER_HEALTH_ADDR's /metrics); none by default
No Azure:     go run ./test/simulate runs everything in-process under injected faults (-h)
`+cli.VersionUsage("orderworker")+`
Durations: Go (90s, 1h30m), days (35d, 1d12h) or ISO 8601 (PT1M, P14D).

Flags:
`)
	fs.PrintDefaults()
}

// Validate reports every missing or inconsistent setting at once, naming the
// variable (and flag) to set.
func (c *config) Validate() error {
	errs := []error{c.ServiceBus.Validate(), c.Telemetry.Validate()}
	if c.CosmosEndpoint == "" {
		errs = append(errs, errors.New("set COSMOS_ENDPOINT (-cosmos-endpoint)"))
	} else if err := cli.CheckEndpoint(c.CosmosEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("COSMOS_ENDPOINT (-cosmos-endpoint): %w", err))
	}
	if c.PaymentsURL != "" {
		if err := cli.CheckEndpoint(c.PaymentsURL); err != nil {
			errs = append(errs, fmt.Errorf("PAYMENTS_URL (-payments-url): %w", err))
		}
		if c.PaymentsKeyRetention <= 0 {
			errs = append(errs, fmt.Errorf("PAYMENTS_KEY_RETENTION (-payments-key-retention) %v must be positive", c.PaymentsKeyRetention))
		}
	}
	if c.CosmosDatabase == "" || c.CosmosContainer == "" {
		errs = append(errs, errors.New("set COSMOS_DATABASE (-cosmos-database) and COSMOS_CONTAINER (-cosmos-container)"))
	}
	if c.CosmosInsecureSkipVerify && c.CosmosKey == "" {
		errs = append(errs, errors.New("COSMOS_INSECURE_SKIP_VERIFY is for emulators only, which need COSMOS_KEY"))
	}
	if c.CosmosCreateContainer && c.CosmosKey == "" {
		errs = append(errs, errors.New("COSMOS_CREATE_CONTAINER is for emulators only, which need COSMOS_KEY; in Azure, Bicep creates the container"))
	}
	if c.CosmosCreateDatabase && !c.CosmosCreateContainer {
		errs = append(errs, errors.New("COSMOS_CREATE_DATABASE (-cosmos-create-database) creates the database with the container: set COSMOS_CREATE_CONTAINER=true too (emulators only)"))
	}
	if c.CosmosCreateOther && !c.CosmosCreateContainer {
		errs = append(errs, errors.New("COSMOS_CREATE_OTHER_CONTAINER (-cosmos-create-other-container) widens COSMOS_CREATE_CONTAINER: set COSMOS_CREATE_CONTAINER=true too (emulators only)"))
	}
	if c.LockDuration < time.Second || c.LockDuration > 5*time.Minute {
		errs = append(errs, fmt.Errorf("SERVICEBUS_LOCK_DURATION (-lock-duration) %v is outside Service Bus's 1s to 5m", c.LockDuration))
	}
	if c.MessageTimeout < 0 || c.MessageTimeout >= c.LockDuration {
		errs = append(errs, fmt.Errorf("WORKER_MESSAGE_TIMEOUT (-message-timeout) %v must be below the lock duration %v", c.MessageTimeout, c.LockDuration))
	}
	if c.Concurrency < 1 || c.Concurrency > 5000 {
		errs = append(errs, fmt.Errorf("WORKER_CONCURRENCY (-concurrency) %d is not between 1 and 5000", c.Concurrency))
	}
	// SERVICEBUS_SUBSCRIPTION selects the subscription mode. SERVICEBUS_TOPIC
	// alone is the relay's topic, an azd output that lands in every
	// environment: it leaves the worker on SERVICEBUS_QUEUE.
	if c.Subscription != "" && c.Topic == "" {
		errs = append(errs, errors.New("SERVICEBUS_SUBSCRIPTION (-subscription) needs SERVICEBUS_TOPIC (-topic), the topic it belongs to; unset it to receive from SERVICEBUS_QUEUE"))
	}
	if c.Subscription != "" {
		if err := cli.CheckEntityName(c.Subscription, cli.MaxSubscriptionName, false); err != nil {
			errs = append(errs, fmt.Errorf("SERVICEBUS_SUBSCRIPTION (-subscription): %w", err))
		}
	}
	if c.InboxConsumer != "" && c.Subscription == "" && c.Queue == orderWriterQueue {
		errs = append(errs, fmt.Errorf("WORKER_INBOX_CONSUMER %s would receive from SERVICEBUS_QUEUE %q, the order writer's queue: "+
			"competing consumers of one queue each get some of its messages, so the inbox consumer would take orders away from the order writer "+
			"(and see only some orders itself). Receive the order events from a subscription of the relay's topic instead "+
			"(SERVICEBUS_TOPIC=order-events SERVICEBUS_SUBSCRIPTION=<name>), or from a queue of the consumer's own", c.InboxConsumer, c.Queue))
	}
	if c.InboxConsumer != "" {
		if c.PaymentsURL != "" {
			errs = append(errs, c.paymentsInInboxMode())
		}
		if err := order.ValidateConsumerName(c.InboxConsumer); err != nil {
			errs = append(errs, fmt.Errorf("WORKER_INBOX_CONSUMER (-inbox-consumer): %w", err))
		}
		if err := c.horizon().CheckRetention(c.InboxTTL); err != nil {
			errs = append(errs, fmt.Errorf("WORKER_INBOX_TTL (-inbox-ttl): %w", err))
		}
	}
	if c.HealthAddr != "" {
		if _, _, err := net.SplitHostPort(c.HealthAddr); err != nil {
			errs = append(errs, fmt.Errorf("WORKER_HEALTH_ADDR (-health-addr) %q is not host:port (such as :8080): %w", c.HealthAddr, err))
		}
	}
	if c.Telemetry.Prometheus && c.HealthAddr == "" {
		errs = append(errs, errors.New("WORKER_METRICS_PROMETHEUS (-metrics-prometheus) serves the metrics on the health listener's /metrics, "+
			"which WORKER_HEALTH_ADDR (-health-addr) is not set to open: set it (such as :8080), or export over OTEL_EXPORTER_OTLP_ENDPOINT instead"))
	}
	if c.FactCache < 0 || c.FactCache > maxFactCache {
		errs = append(errs, fmt.Errorf("WORKER_FACT_CACHE (-fact-cache) %d is not between 0 (no cache) and %d orders (a full cache takes about 94 bytes per order)", c.FactCache, maxFactCache))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("WORKER_SHUTDOWN_GRACE (-shutdown-grace) %v must be positive", c.ShutdownGrace))
	}
	return errors.Join(errs...)
}

// paymentsInInboxMode is the refusal of PAYMENTS_URL in the inbox-marker
// variant. The local stack's env sets PAYMENTS_URL for the order writer,
// so a user who adds the subscription settings to it meets this first: it
// says how to run this one worker without it.
func (c *config) paymentsInInboxMode() error {
	mode := fmt.Sprintf("WORKER_INBOX_CONSUMER=%s", c.InboxConsumer)
	if c.Subscription != "" {
		mode = fmt.Sprintf("SERVICEBUS_SUBSCRIPTION=%s", c.Subscription)
	}
	return fmt.Errorf("%s runs the inbox consumer %q, which awards loyalty points once per order and captures no payments, but PAYMENTS_URL=%s is set "+
		"(the local stack's env sets it for the order writer): start this worker with -payments-url '' (or PAYMENTS_URL= before the command, "+
		"or unset PAYMENTS_URL in its shell only: the order writer needs it)", mode, c.InboxConsumer, cli.MaskURL(c.PaymentsURL))
}

// maxFactCache bounds WORKER_FACT_CACHE: the cache grows as it learns, and
// a full one of this size holds about 94 MB (TestFactCacheFullSize measures
// 0.94 MB for 10,000), under a tenth of the 1 GiB the Bicep gives the
// worker's container. The bound used to be ten times this: a full cache the
// size of the container's whole memory.
const maxFactCache = 1_000_000

// paymentOptions returns the payment step's options for gateway g: the
// queue's lock duration as the lease of a claim held by another copy of a
// message, and the payments service's key retention.
func (c *config) paymentOptions(g order.PaymentGateway, owner string) order.PaymentOptions {
	return order.PaymentOptions{Gateway: g, Lease: c.LockDuration, Owner: owner, KeyRetention: c.PaymentsKeyRetention}
}

// notice is something the configuration makes the worker do that an
// operator should know at start, though it is safe: a short line for the
// info level and the details, for debug.
type notice struct {
	short, detail string
}

// notices returns what the configuration makes the worker do that an
// operator should know at start, though it is safe: payment keys the
// payments service forgets before the redelivery horizon ends. The
// defaults (a 24-hour key retention, a 14-day message TTL) give it at
// every start, so its info line is short and the computation is logged at
// debug.
func (c *config) notices() []notice {
	if c.PaymentsURL == "" {
		return nil
	}
	h := c.horizon()
	err := h.CheckRetentionOf("payment idempotency keys", c.PaymentsKeyRetention)
	if err == nil {
		return nil
	}
	age := c.paymentOptions(payments.Gateway{}, "").BlindRetryAge()
	redelivered := "for ever (SERVICEBUS_MESSAGE_TTL unlimited)"
	if min, _ := h.MinRetention(); min != order.UnboundedRetention {
		redelivered = "up to " + cli.FormatDuration(min)
	}
	return []notice{{
		short: fmt.Sprintf("payment keys are remembered %s (PAYMENTS_KEY_RETENTION), messages may be redelivered %s: "+
			"claims older than %s are resolved by looking the payment up (LOG_LEVEL=debug says why)",
			cli.FormatDuration(c.PaymentsKeyRetention), redelivered, cli.FormatDuration(age)),
		detail: fmt.Sprintf("%v; so a payment claim whose key was first sent more than %s ago is resolved by looking the payment up (GET /payments?orderId=), and dead-lettered %s if the lookup cannot settle it",
			err, cli.FormatDuration(age), order.ReasonPaymentNeedsReconciliation),
	}}
}

// messageTimeout is the deadline of one message: the configured one, or 80%
// of the lock duration, as the worker package defaults it.
func (c *config) messageTimeout() time.Duration {
	if c.MessageTimeout > 0 {
		return c.MessageTimeout
	}
	return c.LockDuration * 8 / 10
}

// horizon returns the queue settings that bound redelivery.
func (c *config) horizon() order.RedeliveryHorizon {
	return order.RedeliveryHorizon{
		LockDuration: c.LockDuration, MaxDeliveryCount: c.MaxDeliveryCount, MessageTimeToLive: c.MessageTTL,
		DuplicateDetectionWindow: c.DuplicateWindow, ResubmissionHorizon: c.ResubmissionHorizon,
	}
}

// LogValue logs the configuration once at start-up, with secrets masked.
func (c config) LogValue() slog.Value {
	return slog.GroupValue(append(c.ServiceBus.LogAttrs(),
		slog.String("topic", c.Topic),
		slog.String("subscription", c.Subscription),
		slog.String("lock_duration", cli.FormatDuration(c.LockDuration)),
		slog.String("cosmos_endpoint", c.CosmosEndpoint),
		slog.String("cosmos_key", cli.Mask(c.CosmosKey)),
		slog.String("cosmos_database", c.CosmosDatabase),
		slog.String("cosmos_container", c.CosmosContainer),
		slog.Bool("cosmos_insecure_skip_verify", c.CosmosInsecureSkipVerify),
		slog.Bool("cosmos_create_container", c.CosmosCreateContainer),
		slog.Bool("cosmos_create_database", c.CosmosCreateDatabase),
		slog.Bool("cosmos_create_other_container", c.CosmosCreateOther),
		slog.String("payments_url", cli.MaskURL(c.PaymentsURL)), // may carry credentials: user info, ?code=
		slog.String("payments_key_retention", cli.FormatDuration(c.PaymentsKeyRetention)),
		slog.String("inbox_consumer", c.InboxConsumer),
		slog.String("inbox_ttl", cli.FormatDuration(c.InboxTTL)),
		slog.Int("concurrency", c.Concurrency),
		slog.String("message_timeout", cli.FormatDuration(c.MessageTimeout)),
		slog.String("shutdown_grace", cli.FormatDuration(c.ShutdownGrace)),
		slog.String("health_addr", c.HealthAddr),
		slog.Int("fact_cache", c.FactCache),
		c.Telemetry.LogGroup(),
	)...)
}
