package invoice_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// backend is a store the consumer tests run on.
type backend struct {
	name string
	// open returns a store for one subtest. Cosmium's stores share one
	// container, so subtests must use invoice ids of their own.
	open func(t *testing.T) idempotent.DocumentStore
	// atomicBatch reports whether the store's transactional batch is
	// atomic. Cosmium's is not (see package cosmiumtest): each operation
	// is an atomic create of its own.
	atomicBatch bool
}

// backends returns the in-memory model of Cosmos DB and a real cosmosstore
// on cosmium, which is started for t and stopped when it ends (built first
// if need be; the test fails, never skips, if it cannot be).
func backends(t *testing.T) []backend {
	t.Helper()
	mem := backend{name: "memstore", atomicBatch: true,
		open: func(*testing.T) idempotent.DocumentStore { return memstore.New("/invoiceId") }}
	cs := cosmiumStore(t)
	cosmium := backend{name: "cosmium", open: func(*testing.T) idempotent.DocumentStore { return cs }}
	return []backend{mem, cosmium}
}

// cosmiumStore starts cosmium for t and returns a cosmosstore on an
// invoices container partitioned on /invoiceId.
func cosmiumStore(t *testing.T) *cosmosstore.Store {
	t.Helper()
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const database, container = "billing", "invoices"
	ctx := t.Context()
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: database}, nil); err != nil {
		t.Fatalf("create database: %v", err)
	}
	db, err := c.NewDatabase(database)
	if err != nil {
		t.Fatal(err)
	}
	props := azcosmos.ContainerProperties{ID: container, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{
		Kind: azcosmos.PartitionKeyKindHash, Paths: []string{invoice.PartitionKeyPath}, Version: 2}}
	if _, err := db.CreateContainer(ctx, props, nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	// A store built for another container's path (the orders'): Check says so.
	if s, err := cosmosstore.New(c, database, container, "/orderId"); err != nil {
		t.Fatal(err)
	} else if _, err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), `not ["/orderId"]`) {
		t.Errorf("Check of an invoices container on the orders' path = %v, want the partition key path named", err)
	}
	s, err := cosmosstore.New(c, database, container, invoice.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return s
}

// fakeStore is a Store that counts the calls it passes to the store it
// wraps (the round trips), and fails them with createErr or readErr if set.
type fakeStore struct {
	idempotent.Store
	createErr, readErr error
	creates, reads     atomic.Int64
}

func (s *fakeStore) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.creates.Add(1)
	if s.createErr != nil {
		return nil, s.createErr
	}
	return s.Store.CreateBatch(ctx, pk, docs)
}

func (s *fakeStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.reads.Add(1)
	if s.readErr != nil {
		return nil, "", s.readErr
	}
	return s.Store.ReadDocument(ctx, pk, id)
}

// roundTrips returns the calls counted so far and resets the counters.
func (s *fakeStore) roundTrips() (creates, reads int64) {
	return s.creates.Swap(0), s.reads.Swap(0)
}
