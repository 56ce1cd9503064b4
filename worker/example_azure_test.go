package worker_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

// Example_azure is the real wiring, for any message type: a PeekLock
// receiver of the Azure SDK, the pattern (package idempotent) over Cosmos DB
// (package cosmosstore), and the worker's receive loop. The message type
// here is the invoice example's; cmd/orderworker wires the order example
// the same way. It needs an Azure Service Bus namespace and a Cosmos DB
// account, so it is compiled but not run (it has no Output comment).
func Example_azure() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	sb, err := azservicebus.NewClient("my-namespace.servicebus.windows.net", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(context.Background())
	receiver, err := sb.NewReceiverForQueue("invoices", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModePeekLock})
	if err != nil {
		log.Fatal(err)
	}
	defer receiver.Close(context.Background())

	cosmos, err := cosmosstore.NewClient("https://my-account.documents.azure.com:443/", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	// The invoices container is partitioned on /invoiceId: the store is
	// built for that path, and Check refuses a container partitioned on
	// another before the first message.
	store, err := cosmosstore.New(cosmos, "billing", "invoices", invoice.PartitionKeyPath)
	if err != nil {
		log.Fatal(err)
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	res, err := store.Check(checkCtx)
	cancel()
	if err != nil {
		log.Fatal(err) // names the setting to fix, such as COSMOS_CONTAINER
	}
	if !res.ETagsHonoured {
		log.Fatalf("%s ignores If-Match: not a Cosmos DB account", res.Endpoint)
	}

	// The decision: decode, look up, create, compare. The fact cache and
	// the adaptive read-first are options; neither changes an outcome.
	consumer := idempotent.NewConsumer(invoice.Kind{}, store,
		idempotent.WithLookup(idempotent.NewFactCache(10_000).Wrap),
		idempotent.WithReadFirst(&idempotent.CopyShare{}))

	w, err := worker.New(receiver, consumer, logger, worker.Options{Concurrency: 16})
	if err != nil {
		log.Fatal(err)
	}
	// Run returns after the signal, once in-flight messages have settled.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
