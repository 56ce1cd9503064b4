package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// run is the whole program; main supplies the process's context, arguments,
// environment and output streams. -h and -version return nil, a command line
// mistake a *cli.UsageError.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runAt(ctx, args, getenv, stdout, stderr, time.Now)
}

// runAt is run with the clock that ages and windows are measured on.
func runAt(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, now func() time.Time) error {
	return runEnv(ctx, args, func(k string) (string, bool) { v := getenv(k); return v, v != "" }, stdout, stderr, now)
}

// runEnv is runAt with the environment read as os.LookupEnv reads it, so
// that a variable set to "" is told from one not set: "orderctl audit"
// takes RELAY_NAME= to mean no relays. main calls it.
func runEnv(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, now func() time.Time) error {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	if asked, err := startup.Version("orderctl", args, stdout); asked {
		return err
	}
	if len(args) > 0 && args[0] == "plan" {
		return runPlan(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "audit" {
		return runAudit(ctx, args[1:], lookupEnv, stdout, stderr, now)
	}
	fs := flag.NewFlagSet("orderctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	client, err := cfg.ServiceBus.NewClient()
	if err != nil {
		return err
	}
	defer closeBounded(client.Close)
	d := &dlq{client: client, queue: cfg.Queue, topic: cfg.Topic, subscription: cfg.Subscription,
		namespace: cfg.Namespace, connStr: cfg.ConnectionString, now: now}
	switch cfg.Verb {
	case "list":
		return d.list(ctx, stdout)
	case "show":
		var store orderReader
		if cfg.CosmosEndpoint != "" {
			s, err := openStore(cfg)
			if err != nil {
				return err
			}
			store = s
		}
		return d.show(ctx, cfg.IDs[0], store, stdout)
	default:
		return d.act(ctx, cfg, stdout)
	}
}

// openStore connects to Cosmos DB, with the account key on an emulator and
// Entra ID in Azure (read access is enough). Every request of its client is
// low priority (azcosmos ClientOptions.PriorityLevel, the header
// x-ms-cosmos-priority-level: Low): an operator's reads yield to the
// worker's requests on an account with priority-based execution enabled
// (see docs/operating.md).
func openStore(cfg config) (*cosmosstore.Store, error) {
	opts := &cosmosstore.ClientOptions{InsecureSkipVerify: cfg.CosmosInsecureSkipVerify}
	low := azcosmos.PriorityLevelLow
	opts.PriorityLevel = &low
	client, err := cli.CosmosClient(cfg.CosmosEndpoint, cfg.CosmosKey, opts)
	if err != nil {
		return nil, err
	}
	return cosmosstore.New(client, cfg.CosmosDatabase, cfg.CosmosContainer, order.PartitionKeyPath)
}
