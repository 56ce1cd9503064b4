package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/worker"
	"github.com/idempotent-consumer/sbcosmos/worker/breaker"
	"github.com/idempotent-consumer/sbcosmos/worker/otelworker"
)

// run is the whole program; main only supplies the process's context,
// arguments, environment and output streams. ctx ends at the first signal,
// which starts the drain; the second stage of ctx (cli.Force, set by
// cli.Stages in main) ends at the second, which makes run return at once
// with an error wrapping cli.ErrForced. -h returns nil, a flag mistake a
// *cli.UsageError.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if asked, err := startup.Version("orderworker", args, stdout); asked {
		return err
	}
	fs := flag.NewFlagSet("orderworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	tel, err := telemetry.New(ctx, cfg.Telemetry)
	if err != nil {
		return err
	}
	proc, err := startup.Start(ctx, cfg.Logging, stderr, startOptions(&cfg, tel))
	if err != nil {
		return err
	}
	defer proc.Close()
	logger := proc.Logger
	logger.Info("orderworker starting", "config", cfg)
	for _, n := range cfg.notices() {
		logger.Info(n.short)
		logger.Debug(n.detail)
	}
	hs, err := startHealth(cfg, tel.MetricsHandler(), logger)
	if err != nil {
		return err
	}
	defer hs.stop(ctx)

	store, err := openStore(ctx, cfg, tel, logger)
	if err != nil {
		return err
	}
	checked, err := checkStore(ctx, cfg, store, logger)
	if err != nil {
		return err
	}
	sb, err := cfg.ServiceBus.NewClient()
	if err != nil {
		return err
	}
	defer closeWithTimeout(ctx, logger, "service bus client", sb.Close)
	receiver, err := newReceiver(sb, cfg)
	if err != nil {
		return err
	}
	defer closeWithTimeout(ctx, logger, "receiver", receiver.Close)
	peek := func(ctx context.Context) error { return peekQueue(ctx, receiver) }
	if err := peek(ctx); err != nil {
		return fmt.Errorf("start-up check of Service Bus: %w", cfg.explainServiceBus(err))
	}

	handler, probe, err := newHandler(cfg, store, checked.PatchConditionsHonoured, tel)
	if err != nil {
		return err
	}
	scheduler, err := newScheduler(sb, cfg)
	if err != nil {
		return err
	}
	if scheduler != nil {
		defer closeWithTimeout(ctx, logger, "sender", scheduler.Close)
	}
	var cacheStats func() idempotent.CacheStats
	if p, ok := handler.(*order.Processor); ok && cfg.FactCache > 0 {
		cacheStats = p.CacheStats
	}
	wo := worker.Options{
		Concurrency:     cfg.Concurrency,
		LockDuration:    cfg.LockDuration,
		MessageTimeout:  cfg.MessageTimeout,
		ShutdownGrace:   cfg.ShutdownGrace,
		SummaryInterval: cfg.SummaryInterval,
		RequestCharge:   store.RequestCharge,
		CacheStats:      cacheStats, // the summaries
		// A status change before its order waits in a scheduled copy,
		// not in its deliveries (worker.Options.Retry: the defaults).
		Scheduler: optionalScheduler(scheduler),
		// The log keys the README's queries read.
		KeyAttr:     telemetry.WorkerKeyAttr,
		ResumedAttr: telemetry.WorkerResumedAttr,
	}
	r, b, err := workerOptions(cfg, tel, logger, receiver, probe, cacheStats, store.RequestCharge, &wo)
	if err != nil {
		return err
	}
	w, err := worker.New(r, hs.track(handler), logger, wo)
	if err != nil {
		return err
	}
	hs.watch(w, b, peek)
	hs.started()
	wctx, stopWorker := hs.drainFirst(ctx)
	defer stopWorker()
	err = cli.RunUntilForced(wctx, w.Run)
	if errors.Is(err, cli.ErrForced) {
		logger.Error("orderworker stopped at once: in-flight messages were not settled; their locks lapse and they are redelivered", "error", err)
		return err
	}
	logger.Info("orderworker stopped")
	return err
}

// explainServiceBus names the setting to fix in err, a failure of the
// receiver's first call.
func (c *config) explainServiceBus(err error) error {
	if c.Subscription != "" {
		return c.ServiceBus.Explain(err, fmt.Sprintf("subscription %q of topic %q", c.Subscription, c.Topic), cli.SubscriptionSettings)
	}
	return c.ServiceBus.Explain(err, fmt.Sprintf("queue %q", c.Queue), cli.QueueSetting)
}

// newReceiver returns the receiver of the subscription when one is
// configured, else of the queue; PeekLock is the default mode of both.
func newReceiver(sb *azservicebus.Client, cfg config) (*azservicebus.Receiver, error) {
	if cfg.Subscription != "" {
		r, err := sb.NewReceiverForSubscription(cfg.Topic, cfg.Subscription, nil)
		if err != nil {
			return nil, fmt.Errorf("receiver for subscription %q of topic %q: %w", cfg.Subscription, cfg.Topic, err)
		}
		return r, nil
	}
	r, err := sb.NewReceiverForQueue(cfg.Queue, nil)
	if err != nil {
		return nil, fmt.Errorf("receiver for queue %q: %w", cfg.Queue, err)
	}
	return r, nil
}

// newScheduler returns a sender on the queue, for the worker's delayed
// retries (it needs Send rights on the queue: the Bicep grants the worker
// Data Sender there), or nil for a subscription: a copy scheduled on the
// topic would reach every subscription. The SDK attaches its link at the
// first scheduling; a scheduling that fails (missing rights) is logged and
// the message abandoned, as without a sender.
func newScheduler(sb *azservicebus.Client, cfg config) (*azservicebus.Sender, error) {
	if cfg.Subscription != "" {
		return nil, nil
	}
	s, err := sb.NewSender(cfg.Queue, nil)
	if err != nil {
		return nil, fmt.Errorf("sender for queue %q (delayed retries): %w", cfg.Queue, err)
	}
	return s, nil
}

// optionalScheduler returns s as a worker.Scheduler, nil for none.
func optionalScheduler(s *azservicebus.Sender) worker.Scheduler {
	if s == nil {
		return nil
	}
	return s
}

// startOptions returns what startup.Start sets up for the worker: the
// flush of its telemetry at exit, and the logs of the start of the drain (at the first signal:
// the worker logs the drain's details) and of the forced stop (at the
// second), at warn and error so that LOG_LEVEL=warn shows them.
func startOptions(cfg *config, tel *telemetry.Providers) startup.Options {
	return startup.Options{
		Flush:         tel,
		LogHandler:    tel.LogHandler(), // the logs as OpenTelemetry log records, when exported
		Draining:      "shutting down: draining, no new messages; in-flight messages may finish within the shutdown grace; a second signal stops at once",
		DrainingAttrs: []any{"shutdown_grace", cli.FormatDuration(cfg.ShutdownGrace)},
		Forced:        "stopping at once: not waiting for in-flight messages",
	}
}

// breakerThreshold is how many consecutive deliveries failed by a
// dependency open the worker's circuit breaker.
const breakerThreshold = 5

// newHandler returns what processes each message — the inbox-marker variant
// when a consumer name is configured, else the order writer, which uses the
// order document as its marker, applies status changes and, with a payments
// service, captures each order's payment once — and the probe of the
// dependencies it needs, for the circuit breaker. Without patch conditions
// (an emulator that ignores them) status changes are applied by read and
// ETag-conditioned replace instead of a conditional patch. The order writer
// keeps a fact cache of WORKER_FACT_CACHE orders (order.WithFactCache).
func newHandler(cfg config, store *cosmosstore.Store, patchConditions bool, tel *telemetry.Providers) (worker.Handler, func(context.Context) error, error) {
	if cfg.InboxConsumer != "" {
		c, err := order.NewInboxConsumer(cfg.InboxConsumer, store, cfg.InboxTTL, nil)
		if c != nil {
			c.Horizon = cfg.horizon() // the inbox refuses markers that expire before the last copy
		}
		return c, store.Probe, err
	}
	opts := []order.Option{order.WithDocuments(store), order.WithFactCache(cfg.FactCache)}
	if !patchConditions {
		opts[0] = order.WithDocuments(cosmosstore.WithoutPatch(store))
	}
	// Probe, not Ping: a read and a delete of a missing item, so that a
	// store that answers reads and refuses writes (a write-region outage,
	// a role cut to Data Reader) fails it.
	probe := store.Probe
	if cfg.PaymentsURL != "" {
		gw, err := newPaymentGateway(cfg.PaymentsURL, tel)
		if err != nil {
			return nil, nil, err
		}
		host, _ := os.Hostname()
		popts := cfg.paymentOptions(gw, host)
		if err := popts.Validate(); err != nil {
			return nil, nil, err
		}
		opts = append(opts, order.WithPaymentOptions(popts))
		probe = func(ctx context.Context) error { return errors.Join(store.Probe(ctx), gw.Client.Ping(ctx)) }
	}
	return order.NewProcessor(store, nil, opts...), probe, nil
}

// checkStore verifies at start that the database and container exist and
// that this identity can read and write them; its errors name the setting
// to fix. An emulator that ignores If-Match (cosmium) cannot show what the
// ETag guards protect, which the worker says at once.
func checkStore(ctx context.Context, cfg config, store *cosmosstore.Store, logger *slog.Logger) (cosmosstore.CheckResult, error) {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	res, err := store.Check(ctx)
	if err != nil {
		return res, fmt.Errorf("start-up check of Cosmos DB: %w", err)
	}
	if !res.PatchConditionsHonoured {
		logger.Warn("this Cosmos DB endpoint applies a patch whatever its condition (an emulator such as cosmium): "+
			"status changes are applied by read and replace instead of one conditional patch",
			"cosmos_endpoint", cfg.CosmosEndpoint)
	}
	if !res.ETagsHonoured {
		logger.Warn("this Cosmos DB endpoint ignores If-Match (an emulator such as cosmium): a replace with a wrong ETag succeeded. "+
			"Status versions may be overwritten by older ones, and payment claims and inbox markers lose their fencing; "+
			"real Cosmos DB and the official emulator honour ETags",
			"cosmos_endpoint", cfg.CosmosEndpoint)
	}
	return res, nil
}

// storeCheckTimeout bounds the start-up check of the store.
const storeCheckTimeout = 30 * time.Second

// openStore connects to Cosmos DB: with an account key on an emulator, with
// Entra ID in Azure.
func openStore(ctx context.Context, cfg config, tel *telemetry.Providers, logger *slog.Logger) (*cosmosstore.Store, error) {
	opts := &cosmosstore.ClientOptions{InsecureSkipVerify: cfg.CosmosInsecureSkipVerify}
	opts.ClientOptions.ClientOptions = tel.AzureClientOptions() // the SDK's spans and request charges; nothing when disabled
	opts.Untraced = tel.AzureUntraced()                         // calls under a dropped trace skip the SDK's span set-up
	client, err := cli.CosmosClient(cfg.CosmosEndpoint, cfg.CosmosKey, opts)
	if err != nil {
		return nil, err
	}
	if cfg.CosmosCreateContainer {
		// The project's own names are created without being asked: a
		// fresh emulator has neither. Another name must exist, or be asked
		// for, so that a misspelt one is not a new, empty store.
		createDatabase := cfg.CosmosCreateDatabase || cfg.CosmosDatabase == defaultCosmosDatabase
		createContainer := cfg.CosmosCreateOther || cfg.CosmosContainer == defaultCosmosContainer
		created, err := cli.CreateCosmosContainer(ctx, client, cfg.CosmosEndpoint, cfg.CosmosDatabase, cfg.CosmosContainer, order.PartitionKeyPath, createDatabase, createContainer)
		if err != nil {
			return nil, fmt.Errorf("COSMOS_CREATE_CONTAINER: %w", err)
		}
		if created.Container {
			logger.Info("created a new, empty Cosmos DB container: it did not exist",
				"database", cfg.CosmosDatabase, "container", cfg.CosmosContainer, "created_database", created.Database, "created_container", created.Container)
		} else {
			logger.Info("the database and container exist", "database", cfg.CosmosDatabase, "container", cfg.CosmosContainer)
		}
	}
	return cosmosstore.New(client, cfg.CosmosDatabase, cfg.CosmosContainer, order.PartitionKeyPath)
}

// workerOptions adds the worker's options to o: its circuit breaker, and,
// when telemetry is exported, its traces and metrics under the deployed
// names (telemetry.WorkerNames), their Receiver wrapping r. It returns
// the receiver to give the worker, and the breaker, for the readiness
// check. Without exported telemetry nothing wraps r, which costs nothing.
//
// After five consecutive deliveries failed by the store or the payments
// service, or one failure of a redelivered message, the breaker probes
// them (the store with a read and a delete of a missing item,
// cosmosstore.Store.Probe; the payments service with POST /payments/probe,
// which calls the acquirer as a capture does): if the probe fails, it stops
// receiving and probes until they answer (an outage costs the in-flight
// deliveries, not the backlog); if it succeeds, the failures are the
// messages' own. Five orders failing again (three deliveries each in a
// row) within the last 50 deliveries open it even when the probe answers
// (breaker.SpreadFor the concurrency): an outage the probe cannot see, such
// as one partition key range of the store down; trial deliveries, 10
// minutes after and then with a doubling wait up to 40 minutes, close it
// (each trial lets up to seven failing messages through, past poison
// messages at the head of the queue, each retried by a scheduled copy that
// waits past the next trial, when the worker has a Scheduler).
func workerOptions(cfg config, tel *telemetry.Providers, logger *slog.Logger, r worker.Receiver, probe func(context.Context) error,
	cacheStats func() idempotent.CacheStats, requestCharge func() float64, o *worker.Options) (worker.Receiver, *breaker.Breaker, error) {
	bo := breaker.Options{Threshold: breakerThreshold, Probe: probe,
		Spread: breaker.SpreadFor(cfg.Concurrency), TrialLimit: breaker.TrialLimitFor(cfg.Concurrency)}
	if tel.Enabled() {
		t, err := otelworker.New(otelworker.Options{
			TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider, Propagator: tel.Propagator, Queue: cfg.Queue,
			Names:         telemetry.WorkerNames(),
			RequestCharge: requestCharge,
			CacheStats:    cacheStats, // orderworker.cache.hits/misses
		})
		if err != nil {
			return nil, nil, fmt.Errorf("worker telemetry: %w", err)
		}
		r, o.Hook = t.Receiver(r), t
		bo.OnChange = func(s breaker.State) { t.BreakerChanged(s.String(), s != breaker.Closed) }
	}
	b, err := breaker.New(bo, logger)
	if err != nil {
		return nil, nil, err
	}
	o.Gate = b
	return r, b, nil
}

// closeWithTimeout closes a Service Bus object with a deadline of its own,
// since the run's context is already cancelled at shutdown; after a second
// signal (cli.Force(runCtx) ended) it closes nothing, to exit at once.
func closeWithTimeout(runCtx context.Context, logger *slog.Logger, what string, closeFn func(context.Context) error) {
	if cli.Force(runCtx).Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := closeFn(ctx); err != nil {
		logger.Warn("close failed", "what", what, "error", err)
	}
}
