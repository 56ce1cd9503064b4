// Command bareloop is the bare azservicebus + azcosmos consumer that
// BenchmarkBinaryCPU (test/bench) runs side by side with the real
// orderworker binary: receive → one transactional batch (on a conflict a
// point read and a hash compare) → complete, with the worker's concurrency
// semantics (package test/bench/internal/bareloop). It reads the worker's
// variables: SERVICEBUS_CONNECTION_STRING, SERVICEBUS_QUEUE (orders),
// COSMOS_ENDPOINT, COSMOS_KEY, COSMOS_DATABASE (orders), COSMOS_CONTAINER
// (orders) and WORKER_CONCURRENCY (8), each overridable by a flag of the
// worker's name. SIGINT or SIGTERM stops receiving; the messages in flight
// finish, one line of counts is written to stderr and it exits 0. Nothing
// here is production code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/bench/internal/bareloop"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bareloop:", err)
		os.Exit(1)
	}
}

// config is what bareloop needs, under the worker's names.
type config struct {
	connectionString, queue                string
	endpoint, key, database, containerName string
	concurrency                            int
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	var problems []string
	conc, err := strconv.Atoi(or("WORKER_CONCURRENCY", "8"))
	if err != nil {
		problems = append(problems, fmt.Sprintf("WORKER_CONCURRENCY: %v", err))
	}
	fs := flag.NewFlagSet("bareloop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.connectionString, "servicebus-connection-string", getenv("SERVICEBUS_CONNECTION_STRING"), "Service Bus connection string")
	fs.StringVar(&c.queue, "queue", or("SERVICEBUS_QUEUE", "orders"), "queue to receive from")
	fs.StringVar(&c.endpoint, "cosmos-endpoint", getenv("COSMOS_ENDPOINT"), "Cosmos DB endpoint")
	fs.StringVar(&c.key, "cosmos-key", getenv("COSMOS_KEY"), "Cosmos DB account key")
	fs.StringVar(&c.database, "cosmos-database", or("COSMOS_DATABASE", "orders"), "Cosmos DB database")
	fs.StringVar(&c.containerName, "cosmos-container", or("COSMOS_CONTAINER", "orders"), "Cosmos DB container")
	fs.IntVar(&c.concurrency, "concurrency", conc, "messages handled at once")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, s := range []struct{ v, name string }{
		{c.connectionString, "SERVICEBUS_CONNECTION_STRING"}, {c.endpoint, "COSMOS_ENDPOINT"}, {c.key, "COSMOS_KEY"},
	} {
		if s.v == "" {
			problems = append(problems, s.name+" is not set")
		}
	}
	if c.concurrency < 1 {
		problems = append(problems, "WORKER_CONCURRENCY (-concurrency) must be at least 1")
	}
	if len(problems) > 0 {
		return c, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	cred, err := azcosmos.NewKeyCredential(c.key)
	if err != nil {
		return fmt.Errorf("COSMOS_KEY: %w", err)
	}
	cosmos, err := azcosmos.NewClientWithKey(c.endpoint, cred, nil)
	if err != nil {
		return fmt.Errorf("COSMOS_ENDPOINT: %w", err)
	}
	container, err := cosmos.NewContainer(c.database, c.containerName)
	if err != nil {
		return err
	}
	sb, err := azservicebus.NewClientFromConnectionString(c.connectionString, nil)
	if err != nil {
		return fmt.Errorf("SERVICEBUS_CONNECTION_STRING: %w", err)
	}
	defer sb.Close(context.WithoutCancel(ctx))
	r, err := sb.NewReceiverForQueue(c.queue, nil)
	if err != nil {
		return fmt.Errorf("SERVICEBUS_QUEUE: %w", err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	fmt.Fprintln(stderr, "bareloop: receiving from", c.queue)
	counts, err := bareloop.Run(ctx, r, c.concurrency, func(ctx context.Context, m *azservicebus.ReceivedMessage) (bool, error) {
		return bareloop.Handle(ctx, container, m.MessageID, m.Body)
	})
	fmt.Fprintf(stderr, "bareloop: created %d duplicate %d failed %d\n", counts.Created, counts.Duplicate, counts.Failed)
	return err
}
