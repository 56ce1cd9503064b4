package cosmosstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// In Azure, the worker authenticates with its managed identity and uses the
// database and container that Bicep created.
func Example() {
	ctx := context.Background()
	cred, err := azidentity.NewDefaultAzureCredential(nil) // AZURE_CLIENT_ID selects the identity
	if err != nil {
		log.Fatal(err)
	}
	client, err := cosmosstore.NewClient("https://ACCOUNT.documents.azure.com:443/", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := cosmosstore.New(client, "sales", "orders", order.PartitionKeyPath)
	if err != nil {
		log.Fatal(err)
	}

	// The body and MessageId of a received Service Bus message.
	body := []byte(`{"orderId":"ord-000123","customerId":"cust-42","currency":"EUR",
		"lines":[{"sku":"SKU-1","quantity":2,"unitPriceMinor":1999}],"totalMinor":3998,
		"placedAt":"2026-11-30T10:00:00Z"}`)
	processor := order.NewProcessor(store, nil)
	result := processor.Process(ctx, idempotent.Message{ID: "ord-000123", Body: body, DeliveryCount: 1})
	fmt.Println(result.Outcome, result.Description)
	fmt.Printf("%.2f RU\n", store.RequestCharge())
}

// A store serves a container partitioned on one top-level field, here
// /tenantId: provisioning, the store and its check take the same path, and
// every document written carries its partition key value in that field.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := cosmosstore.NewClientWithKey("http://localhost:8081/", "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	const path = "/tenantId"
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, "saas", "requests", path); err != nil {
		log.Fatal(err) // also when "requests" exists on another path
	}
	store, err := cosmosstore.New(client, "saas", "requests", path)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Check(ctx); err != nil {
		log.Fatal(err) // names both paths when the container has another
	}
	marker := idempotent.Document{ID: "req-1", Body: []byte(`{"id":"req-1","tenantId":"t-1"}`)}
	if _, err := store.CreateBatch(ctx, "t-1", []idempotent.Document{marker}); err != nil && !errors.Is(err, idempotent.ErrAlreadyExists) {
		log.Fatal(err)
	}
	docs, err := store.ReadPartition(ctx, "t-1") // SELECT * FROM c WHERE c.tenantId = "t-1"
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(docs), "documents of tenant t-1")
}

// Against an emulator, connect with its connection string and create the
// database and container first.
func ExampleCreateDatabaseAndContainer() {
	ctx := context.Background()
	client, err := cosmosstore.NewClientFromConnectionString(
		"AccountEndpoint=https://localhost:8081/;AccountKey=C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==;",
		&cosmosstore.ClientOptions{InsecureSkipVerify: true}, // the emulator's self-signed certificate
	)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if err := cosmosstore.CreateDatabaseAndContainer(ctx, client, "sales", "orders", order.PartitionKeyPath); err != nil {
		log.Fatal(err)
	}
}

// A conflicting create reports which operation failed and why; errors.Is
// decides, never the text.
func ExampleStore_CreateBatch() {
	ctx := context.Background()
	client, err := cosmosstore.NewClientWithKey("http://localhost:8081/", "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := cosmosstore.New(client, "sales", "orders", order.PartitionKeyPath)
	if err != nil {
		log.Fatal(err)
	}
	marker := idempotent.Document{ID: "ord-1", Body: []byte(`{"id":"ord-1","orderId":"ord-1","requestHash":"9f2c…"}`)}
	_, err = store.CreateBatch(ctx, "ord-1", []idempotent.Document{marker})
	var e *cosmosstore.Error
	switch {
	case err == nil:
		fmt.Println("created")
	case errors.Is(err, idempotent.ErrAlreadyExists):
		fmt.Println("exists: read it and compare the request hash")
	case idempotent.IsTransient(err):
		fmt.Println("retry later:", err)
	case errors.As(err, &e):
		fmt.Printf("failed: status %d, operation %d, activity id %s\n", e.StatusCode, e.Index, e.ActivityID)
	}
}

// A read-modify-write of one document, guarded by its ETag: if another
// worker replaced it since the read, the replace writes nothing and the
// caller reads again and decides again.
func ExampleStore_ReplaceDocument() {
	ctx := context.Background()
	client, err := cosmosstore.NewClientWithKey("http://localhost:8081/", "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := cosmosstore.New(client, "sales", "orders", order.PartitionKeyPath)
	if err != nil {
		log.Fatal(err)
	}
	orderID := "ord-000123"
	for range 3 {
		body, etag, err := store.ReadDocument(ctx, orderID, order.PaymentRecordID(orderID))
		if err != nil {
			log.Fatal(err) // errors.Is(err, idempotent.ErrNotFound) when there is no record yet
		}
		var rec order.PaymentRecord
		if err := json.Unmarshal(body, &rec); err != nil {
			log.Fatal(err)
		}
		rec.State = order.PaymentCompleted
		updated, err := json.Marshal(rec)
		if err != nil {
			log.Fatal(err)
		}
		_, err = store.ReplaceDocument(ctx, orderID, idempotent.Document{ID: rec.ID, Body: updated}, etag)
		switch {
		case err == nil:
			fmt.Println("completed")
			return
		case errors.Is(err, idempotent.ErrPreconditionFailed):
			continue // changed since the read: read again
		default:
			log.Fatal(err)
		}
	}
}

// Before it receives the first message, the worker checks that the database
// and container exist and that its identity may read and write them, and
// refuses to run against a server that ignores If-Match.
func ExampleStore_Check() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	client, err := cosmosstore.NewClient("https://ACCOUNT.documents.azure.com:443/", cred, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store, err := cosmosstore.New(client, "orders", "orders", order.PartitionKeyPath)
	if err != nil {
		log.Fatal(err)
	}
	res, err := store.Check(ctx)
	if err != nil {
		log.Fatal(err) // names the setting to fix, such as COSMOS_DATABASE
	}
	if !res.ETagsHonoured {
		log.Fatalf("%s ignores If-Match: status changes and payment claims would not be guarded", res.Endpoint)
	}
}

// A reader's health check, such as a relay's whose role may only read the
// container, asks the store with Ping whether it answers reads.
func ExampleStore_Ping() {
	var store *cosmosstore.Store // from cosmosstore.New
	healthy := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return store.Ping(ctx) == nil
	}
	_ = healthy
}

// A circuit breaker in front of a worker that writes probes the store with
// Probe: a container that answers reads and refuses writes (a write-region
// outage, a role cut to Data Reader) fails it, where it passes Ping.
func ExampleStore_Probe() {
	var store *cosmosstore.Store // from cosmosstore.New
	probe := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return store.Probe(ctx) // transient (idempotent.ErrTransient) while the store is down
	}
	_ = probe
}
