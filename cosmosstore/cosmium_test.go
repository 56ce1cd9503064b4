package cosmosstore_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// These tests run the store against cosmium, a Cosmos DB emulator, through
// the real SDK. They test what cosmium reproduces faithfully (see package
// cosmiumtest); their names say where cosmium falls short.

const (
	testDatabase  = "sbcosmos"
	testContainer = "orders"
)

// cosmiumStore starts cosmium, creates the database and container and returns
// a store on them, and the client.
func cosmiumStore(t *testing.T) (*cosmosstore.Store, *azcosmos.Client) {
	t.Helper()
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, testDatabase, testContainer, order.PartitionKeyPath); err != nil {
		t.Fatal(err)
	}
	s, err := cosmosstore.New(c, testDatabase, testContainer, order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestCosmium_CreateThenRead(t *testing.T) {
	s, _ := cosmiumStore(t)
	w := newWrite("ord-1", "cust-1")
	if err := writeOrder(t.Context(), s, w); err != nil {
		t.Fatalf("CreateBatch = %v", err)
	}
	got, err := order.ReadOrder(t.Context(), s, "ord-1")
	if err != nil {
		t.Fatalf("ReadOrder = %v", err)
	}
	want := w.Order
	if got.RequestHash != want.RequestHash || got.MessageID != want.MessageID || !got.ProcessedAt.Equal(want.ProcessedAt) ||
		got.ID != want.ID || got.OrderID != want.OrderID || got.Type != order.TypeOrder ||
		got.TotalMinor != want.TotalMinor || !got.PlacedAt.Equal(want.PlacedAt) || len(got.Lines) != len(want.Lines) || got.Lines[0] != want.Lines[0] {
		t.Errorf("ReadOrder = %+v\nwant        %+v", got, want)
	}
}

func TestCosmium_CreateWritesTheOutboxEvent(t *testing.T) {
	s, c := cosmiumStore(t)
	w := newWrite("ord-1", "cust-1")
	if err := writeOrder(t.Context(), s, w); err != nil {
		t.Fatalf("CreateBatch = %v", err)
	}
	cc, err := c.NewContainer(testDatabase, testContainer)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cc.ReadItem(t.Context(), azcosmos.NewPartitionKeyString("ord-1"), order.EventID("ord-1"), nil)
	if err != nil {
		t.Fatalf("read the OrderAccepted event: %v", err)
	}
	var ev order.AcceptedEvent
	if err := json.Unmarshal(resp.Value, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.EventType != order.EventOrderAccepted || ev.OrderID != "ord-1" || ev.RequestHash != w.Order.RequestHash {
		t.Errorf("event = %+v, want the OrderAccepted event of ord-1", ev)
	}
}

// Cosmium's batch reports Success with a 409 inside (not atomic, not 207);
// the store reads the per-operation status codes, so the duplicate is still
// reported as ErrAlreadyExists.
func TestCosmium_CreateTwice_AlreadyExists_CosmiumBatchSaysSuccessWith409Inside(t *testing.T) {
	s, _ := cosmiumStore(t)
	if err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1")); err != nil {
		t.Fatalf("first CreateBatch = %v", err)
	}
	err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-2"))
	if !errors.Is(err, idempotent.ErrAlreadyExists) {
		t.Fatalf("second CreateBatch = %v, want ErrAlreadyExists", err)
	}
	var e *cosmosstore.Error
	if !errors.As(err, &e) || e.Index != 0 || e.StatusCode != http.StatusConflict {
		t.Errorf("second CreateBatch = %#v, want a 409 on operation 0", err)
	}
	got, err := order.ReadOrder(t.Context(), s, "ord-1")
	if err != nil || got.CustomerID != "cust-1" {
		t.Errorf("after a duplicate create, ReadOrder = %+v, %v; want the first order unchanged", got, err)
	}
}

func TestCosmium_ReadMissing_NotFound(t *testing.T) {
	s, _ := cosmiumStore(t)
	_, err := order.ReadOrder(t.Context(), s, "ord-missing")
	if !errors.Is(err, idempotent.ErrNotFound) {
		t.Fatalf("ReadOrder of a missing order = %v, want ErrNotFound", err)
	}
	if idempotent.IsTransient(err) || errors.Is(err, idempotent.ErrAlreadyExists) {
		t.Errorf("ReadOrder of a missing order = %v matches another sentinel", err)
	}
}

// Cosmium's single-document create is atomic, so the exactly-one-winner
// property of a conflicting create and its mapping to ErrAlreadyExists are
// tested on that path.
func TestCosmium_SingleCreate_ConcurrentSameID_ExactlyOneWinner(t *testing.T) {
	_, c := cosmiumStore(t)
	cc, err := c.NewContainer(testDatabase, testContainer)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := newWrite("ord-race", "cust-1").Documents()
	if err != nil {
		t.Fatal(err)
	}
	pk := azcosmos.NewPartitionKeyString("ord-race")
	results := race(32, func() error {
		_, err := cc.CreateItem(t.Context(), pk, docs[0].Body, nil)
		if err != nil {
			return cosmosstore.Classify("create order", "ord-race", err)
		}
		return nil
	})
	checkOneWinner(t, results, true)
}

// Cosmium's batches are not atomic: each operation is an atomic create of its
// own, so two batches can each create one of the two documents and both
// report a conflict. At most one CreateBatch can succeed and every other must
// say ErrAlreadyExists; that exactly one succeeds holds only in Cosmos DB and
// in memstore.
func TestCosmium_CreateBatch_ConcurrentSameID_AtMostOneWinner_CosmiumBatchNotAtomic(t *testing.T) {
	s, _ := cosmiumStore(t)
	w := newWrite("ord-race", "cust-1")
	results := race(32, func() error { return writeOrder(t.Context(), s, w) })
	checkOneWinner(t, results, false)
	if _, err := order.ReadOrder(t.Context(), s, "ord-race"); err != nil {
		t.Errorf("ReadOrder after the race = %v", err)
	}
}

// race runs f n times at once and returns the results.
func race(n int, f func() error) []error {
	results := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			results[i] = f()
		})
	}
	close(start)
	wg.Wait()
	return results
}

func checkOneWinner(t *testing.T, results []error, exactlyOne bool) {
	t.Helper()
	winners := 0
	for _, err := range results {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, idempotent.ErrAlreadyExists):
			t.Errorf("a losing create returned %v, want ErrAlreadyExists", err)
		}
	}
	if winners > 1 || exactlyOne && winners != 1 {
		t.Errorf("%d of %d concurrent creates succeeded", winners, len(results))
	}
	if winners == 0 {
		t.Logf("no create succeeded: cosmium's non-atomic batch let two batches each write one document")
	}
}

func TestCosmium_RequestCharge_CosmiumReportsNone(t *testing.T) {
	s, _ := cosmiumStore(t)
	if err := writeOrder(t.Context(), s, newWrite("ord-1", "cust-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := order.ReadOrder(t.Context(), s, "ord-1"); err != nil {
		t.Fatal(err)
	}
	// Cosmium sends no x-ms-request-charge header and charges 0 per batch
	// operation. TestRequestCharge_FakeGateway_* tests the accounting.
	if got := s.RequestCharge(); got != 0 {
		t.Errorf("RequestCharge = %v; cosmium v0.1.20 reports no charges, so the store counted something else", got)
	}
}

func TestCosmium_CreateDatabaseAndContainer_Idempotent(t *testing.T) {
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for i := range 2 { // idempotent
		if err := cosmosstore.CreateDatabaseAndContainer(t.Context(), c, testDatabase, testContainer, order.PartitionKeyPath); err != nil {
			t.Fatalf("call %d: CreateDatabaseAndContainer = %v", i+1, err)
		}
	}
	cc, err := c.NewContainer(testDatabase, testContainer)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cc.Read(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.ContainerProperties
	if got := p.PartitionKeyDefinition.Paths; len(got) != 1 || got[0] != order.PartitionKeyPath {
		t.Errorf("partition key paths = %q, want [%q]", got, order.PartitionKeyPath)
	}
	// Cosmium v0.1.20 ignores TTL and does not echo DefaultTimeToLive:
	// TestCreateDatabaseAndContainer_FakeGateway_* checks what is sent.
}

func TestCosmium_CreateDatabaseAndContainer_RejectsOtherPartitionKey(t *testing.T) {
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.CreateDatabase(t.Context(), azcosmos.DatabaseProperties{ID: testDatabase}, nil); err != nil {
		t.Fatal(err)
	}
	db, err := c.NewDatabase(testDatabase)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.CreateContainer(t.Context(), azcosmos.ContainerProperties{
		ID: testContainer, PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{"/customerId"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = cosmosstore.CreateDatabaseAndContainer(t.Context(), c, testDatabase, testContainer, order.PartitionKeyPath)
	if err == nil {
		t.Fatal("CreateDatabaseAndContainer accepted a container partitioned by /customerId")
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		t.Errorf("CreateDatabaseAndContainer = %v, want the partition key mismatch, not an HTTP error", err)
	}
}

func TestCosmium_MissingContainer_IsPermanent(t *testing.T) {
	srv := cosmiumtest.Start(t)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := cosmosstore.New(c, "no-such-db", "no-such-container", order.PartitionKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	err = writeOrder(t.Context(), s, newWrite("ord-1", "cust-1"))
	if err == nil || errors.Is(err, idempotent.ErrAlreadyExists) || idempotent.IsTransient(err) {
		t.Errorf("CreateBatch into a missing container = %v, want a permanent error", err)
	}
	t.Logf("CreateBatch into a missing container: %v", err)
}

// The store under the domain's processor: the duplicate and mismatch
// decisions read back what CreateBatch wrote.
func TestCosmium_Processor_CreatedDuplicateMismatch(t *testing.T) {
	s, _ := cosmiumStore(t)
	p := order.NewProcessor(s, nil)
	body := func(customer string) []byte {
		return []byte(`{"orderId":"ord-9","customerId":"` + customer + `","currency":"EUR",` +
			`"lines":[{"sku":"SKU-1","quantity":1,"unitPriceMinor":500}],"totalMinor":500,"placedAt":"2026-11-30T10:00:00Z"}`)
	}
	steps := []struct {
		body []byte
		want idempotent.Outcome
	}{
		{body("cust-1"), idempotent.Created},
		{body("cust-1"), idempotent.Duplicate},
		{body("cust-2"), idempotent.Mismatch},
	}
	for i, step := range steps {
		r := p.Process(t.Context(), idempotent.Message{ID: "ord-9", Body: step.body, DeliveryCount: uint32(i + 1)})
		if r.Outcome != step.want {
			t.Fatalf("delivery %d: outcome %v (%s), want %v", i+1, r.Outcome, r.Description, step.want)
		}
	}
}

// BenchmarkCosmium_CreateBatch measures one new order through the store: a
// two-document batch against cosmium on loopback. It shows the store's and
// the SDK's overhead, not Cosmos DB's latency.
func BenchmarkCosmium_CreateBatch(b *testing.B) {
	s := benchStore(b)
	writes := make([]order.Write, b.N)
	for i := range writes {
		writes[i] = newWrite("ord-"+strconv.Itoa(i), "cust-1")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := writeOrder(b.Context(), s, writes[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCosmium_DuplicateCheck measures the duplicate path: the
// conflicting create and the read that compares the request hash.
func BenchmarkCosmium_DuplicateCheck(b *testing.B) {
	s := benchStore(b)
	w := newWrite("ord-dup", "cust-1")
	if err := writeOrder(b.Context(), s, w); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := writeOrder(b.Context(), s, w); !errors.Is(err, idempotent.ErrAlreadyExists) {
			b.Fatalf("CreateBatch = %v, want ErrAlreadyExists", err)
		}
		if _, err := order.ReadOrder(b.Context(), s, "ord-dup"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCosmium_CopyRoundTrips measures, one by one, the two requests
// that set the create-first and the read-first paths apart when half of
// the first deliveries are copies (both cost 1.5 round trips a message
// then): the create of a copy, which conflicts (409), and the read of a
// new order, which finds nothing (404). Compare their allocations and
// (with a CPU profile) their client CPU.
func BenchmarkCosmium_CopyRoundTrips(b *testing.B) {
	s := benchStore(b)
	w := newWrite("ord-copy", "cust-1")
	if err := writeOrder(b.Context(), s, w); err != nil {
		b.Fatal(err)
	}
	b.Run("create=409", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := writeOrder(b.Context(), s, w); !errors.Is(err, idempotent.ErrAlreadyExists) {
				b.Fatalf("CreateBatch = %v, want ErrAlreadyExists", err)
			}
		}
	})
	b.Run("read=404", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := order.ReadOrder(b.Context(), s, "ord-missing"); !errors.Is(err, idempotent.ErrNotFound) {
				b.Fatalf("ReadOrder = %v, want ErrNotFound", err)
			}
		}
	})
	b.Run("read=200", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := order.ReadOrder(b.Context(), s, "ord-copy"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchStore(b *testing.B) *cosmosstore.Store {
	b.Helper()
	srv := cosmiumtest.Start(b)
	c, err := cosmosstore.NewClientWithKey(srv.Endpoint, srv.Key, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	if err := cosmosstore.CreateDatabaseAndContainer(b.Context(), c, testDatabase, testContainer, order.PartitionKeyPath); err != nil {
		b.Fatal(err)
	}
	s, err := cosmosstore.New(c, testDatabase, testContainer, order.PartitionKeyPath)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
