package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/relay"
)

// run is the whole program; main only supplies the process's context,
// arguments, environment and output streams. ctx ends at the first signal,
// which stops the relay gracefully; the second stage of ctx (cli.Force)
// ends at the second, which makes run return at once with an error wrapping
// cli.ErrForced. -h returns nil, a flag mistake a *cli.UsageError.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if asked, err := startup.Version("orderrelay", args, stdout); asked {
		return err
	}
	fs := flag.NewFlagSet("orderrelay", flag.ContinueOnError)
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
	proc, err := startup.Start(ctx, cfg.Logging, stderr, startup.Options{Flush: tel, LogHandler: tel.LogHandler()})
	if err != nil {
		return err
	}
	defer proc.Close()
	logger := proc.Logger
	logger.Info("orderrelay starting", "config", cfg)
	hs, err := startHealth(cfg, tel.MetricsHandler(), logger)
	if err != nil {
		return err
	}
	defer hs.stop(ctx)

	store, leases, err := openStores(cfg)
	if err != nil {
		return err
	}
	if leases != store {
		// The orders container is only read: its check writes nothing.
		if err := checkOrders(ctx, cfg, store); err != nil {
			return err
		}
	}
	if err := checkStore(ctx, cfg, leases, logger); err != nil {
		return err
	}
	if err := checkFeed(ctx, cfg, relayFeed(store)); err != nil {
		return err
	}
	sb, err := cli.NewServiceBusClient(cfg.ServiceBusNamespace, cfg.ServiceBusConnectionString)
	if err != nil {
		return err
	}
	defer closeWithTimeout(ctx, logger, "service bus client", sb.Close)
	sender, err := sb.NewSender(cfg.Topic, nil)
	if err != nil {
		return fmt.Errorf("sender for topic %q: %w", cfg.Topic, err)
	}
	defer closeWithTimeout(ctx, logger, "sender", sender.Close)
	// Opening the link (a batch asks for the topic's message size limit)
	// shows a missing topic, a refused key or an unreachable broker at
	// start, naming the setting to fix, not at the first event.
	if err := checkTopic(ctx, sender); err != nil {
		return fmt.Errorf("start-up check of Service Bus: %w",
			cli.ExplainServiceBus(err, cfg.ServiceBusNamespace, cfg.ServiceBusConnectionString, fmt.Sprintf("topic %q", cfg.Topic), cli.TopicSetting))
	}

	state := newRelayState(time.Now)
	rt, err := newRelayTelemetry(tel.MeterProvider, cfg.Topic, state)
	if err != nil {
		return err
	}
	hs.watch(state, cfg.stallLimit, store.Ping, func(ctx context.Context) error { return checkTopic(ctx, sender) })
	hs.started()
	defer hs.draining(ctx)()
	return serve(ctx, cfg, logger, pieces{feed: relayFeed(store), leases: leases, sender: relay.NewServiceBusSender(sender), hooks: state.hooks(rt)})
}

// checkTopic opens the sender's link within storeCheckTimeout.
func checkTopic(ctx context.Context, sender *azservicebus.Sender) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	_, err := sender.NewMessageBatch(ctx, nil)
	return err
}

// pieces are what the relay runs on: run builds them on Cosmos DB and
// Service Bus, tests on memstore and a fake topic.
type pieces struct {
	feed   relay.ChangeFeed
	leases idempotent.DocumentStore
	sender relay.Sender
	hooks  relay.Hooks // the health state's and the metrics'; none in most tests
}

// serve runs the relay until ctx ends, then lets it finish the page in
// flight and release its leases; after a second signal it returns at once.
func serve(ctx context.Context, cfg config, logger *slog.Logger, p pieces) error {
	r, err := relay.New(p.feed, p.leases, p.sender, cfg.options(logger, p.hooks))
	if err != nil {
		return err
	}
	// The shutdown line is written on a goroutine of its own; serve waits
	// for it before it logs the stop, so that the two come in order and
	// nothing is written after serve returns.
	logged := make(chan struct{})
	stopDrain := context.AfterFunc(ctx, func() {
		defer close(logged)
		logger.Warn("shutting down: finishing the page in flight, then releasing the leases; a second signal stops at once",
			"cause", context.Cause(ctx).Error())
	})
	err = cli.RunUntilForced(ctx, r.Run)
	if !stopDrain() {
		<-logged
	}
	st := r.Stats()
	attrs := []any{"published", st.Published, "batches", st.Batches, "checkpoints", st.Checkpoints,
		"skipped", st.Skipped, "unpublishable", st.Unpublishable, "leases_lost", st.Lost}
	if errors.Is(err, cli.ErrForced) {
		logger.Error("orderrelay stopped at once: the leases were not released and expire by themselves; the page in flight is republished", append(attrs, "error", err)...)
		return err
	}
	if err != nil {
		logger.Warn("orderrelay stopped; some leases were not released and expire by themselves", append(attrs, "error", err)...)
		return err
	}
	logger.Info("orderrelay stopped", attrs...)
	return nil
}

// storeCheckTimeout bounds the start-up check of the store.
const storeCheckTimeout = 30 * time.Second

// checkStore verifies at start that the container of the leases exists and
// can be read and written; its errors name the setting to fix. An endpoint that ignores
// If-Match (cosmium) cannot fence the leases, which the relay says too.
func checkStore(ctx context.Context, cfg config, store *cosmosstore.Store, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	res, err := store.Check(ctx)
	if err != nil && cfg.leasesContainer() != cfg.CosmosContainer {
		return fmt.Errorf("start-up check of Cosmos DB, leases container %q (COSMOS_LEASES_CONTAINER, not COSMOS_CONTAINER; in Azure the relay's identity needs the data-plane role %q on it): %w",
			cfg.leasesContainer(), leasesRole, err)
	}
	if err != nil {
		return fmt.Errorf("start-up check of Cosmos DB: %w", err)
	}
	if !res.ETagsHonoured {
		logger.Warn("this Cosmos DB endpoint ignores If-Match (an emulator such as cosmium): the relay's leases are not fenced; run a single instance",
			"cosmos_endpoint", cfg.CosmosEndpoint)
	}
	return nil
}

// checkFeed verifies at start that the endpoint serves the container's
// change feed: it reads the feed ranges and the first change of one. The
// store check has passed by then, so a refusal here is not the key's or the
// container's: cosmium, for one, answers every change feed call with 401,
// which the relay would otherwise retry for ever.
func checkFeed(ctx context.Context, cfg config, feed relay.ChangeFeed) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	ranges, err := feed.FeedRanges(ctx)
	if err == nil && len(ranges) == 0 {
		err = errors.New("no feed ranges")
	}
	if err == nil {
		_, _, err = feed.ReadChanges(ctx, ranges[0], "", 1)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, idempotent.ErrTransient) || ctx.Err() != nil:
		return fmt.Errorf("start-up check of the change feed at COSMOS_ENDPOINT (-cosmos-endpoint) %s: %w", cfg.CosmosEndpoint, err)
	}
	return fmt.Errorf("COSMOS_ENDPOINT (-cosmos-endpoint) %s serves no change feed for container %q (%w): cosmium has none: on the local stack use the feed proxy, which `scripts/local.sh env` points COSMOS_ENDPOINT at; in Azure, the relay's identity needs the data-plane role %q on the container",
		cfg.CosmosEndpoint, cfg.CosmosContainer, err, feedReaderRole)
}

// relayFeed is the change feed the relay reads: at low priority, so that
// on an account with priority-based execution a catch-up through a backlog
// is throttled before the worker's requests, which stay High (see
// docs/operating.md). The relay's lease reads and writes stay High: a lease
// that cannot be renewed would be taken over.
func relayFeed(orders *cosmosstore.Store) *cosmosstore.ChangeFeed {
	return orders.ChangeFeed().LowPriority()
}

// openStores connects to Cosmos DB (with an account key on an emulator,
// with Entra ID in Azure) and returns the store of the orders container and
// that of the leases, which is the same store when COSMOS_LEASES_CONTAINER
// is empty or names the orders container.
func openStores(cfg config) (orders, leases *cosmosstore.Store, err error) {
	opts := &cosmosstore.ClientOptions{InsecureSkipVerify: cfg.CosmosInsecureSkipVerify}
	client, err := cli.CosmosClient(cfg.CosmosEndpoint, cfg.CosmosKey, opts)
	if err != nil {
		return nil, nil, err
	}
	if orders, err = cosmosstore.New(client, cfg.CosmosDatabase, cfg.CosmosContainer, order.PartitionKeyPath); err != nil {
		return nil, nil, err
	}
	if cfg.leasesContainer() == cfg.CosmosContainer {
		return orders, orders, nil
	}
	if leases, err = cosmosstore.New(client, cfg.CosmosDatabase, cfg.leasesContainer(), order.PartitionKeyPath); err != nil {
		return nil, nil, fmt.Errorf("COSMOS_LEASES_CONTAINER (-cosmos-leases-container): %w", err)
	}
	return orders, leases, nil
}

// The roles the relay's identity needs in Azure, as infra/bicep grants
// them; the start-up checks name the one missing.
const (
	feedReaderRole = "Orders change feed reader (readMetadata, items/read, readChangeFeed)"
	leasesRole     = cosmosstore.DataContributorRole
)

// pinger is the read the orders check makes: *cosmosstore.Store.Ping.
type pinger interface {
	Ping(ctx context.Context) error
}

// checkOrders verifies at start that the orders container exists and can be
// read, without writing to it: one point read of a missing item. A refusal
// names the role the relay needs there.
func checkOrders(ctx context.Context, cfg config, orders pinger) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	err := orders.Ping(ctx)
	if err == nil {
		return nil
	}
	var ce *cosmosstore.Error
	if errors.As(err, &ce) && ce.StatusCode == http.StatusForbidden {
		return fmt.Errorf("start-up check of Cosmos DB: the relay's identity may not read container %q (COSMOS_CONTAINER) of database %q: assign it the data-plane role %q on that container, and the database's metadata (AZURE_CLIENT_ID names the managed identity; a new role assignment takes a few minutes to apply): %w",
			cfg.CosmosContainer, cfg.CosmosDatabase, feedReaderRole, err)
	}
	return fmt.Errorf("start-up check of Cosmos DB: read container %q (COSMOS_CONTAINER) of database %q (COSMOS_DATABASE) at %s (COSMOS_ENDPOINT): %w",
		cfg.CosmosContainer, cfg.CosmosDatabase, cfg.CosmosEndpoint, err)
}

// closeWithTimeout closes a Service Bus object with a deadline of its own,
// since the run's context is already cancelled at shutdown; after a second
// signal it closes nothing, to exit at once.
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
