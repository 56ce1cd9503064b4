package cosmosstore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
)

// countingTransport is the azcosmos client's HTTP transport, wrapped to
// count the requests the client sends. azcosmos talks to the endpoint the
// account advertises after its first request, so only the transport sees
// every request. Requests on documents (paths with /docs: point reads,
// replaces, patches and transactional batches) are the round trips a
// processing path costs; the account and container metadata reads the SDK
// makes now and then (GET /, GET /dbs/…/colls/…, partition key ranges) are
// counted apart, in meta.
type countingTransport struct {
	next policy.Transporter

	mu   sync.Mutex
	docs []string // "METHOD path" of every document request
	meta []string // "METHOD path" of every other request
}

func (c *countingTransport) Do(req *http.Request) (*http.Response, error) {
	what := req.Method + " " + req.URL.Path
	if req.Header.Get("x-ms-cosmos-is-batch-request") != "" {
		what += " (batch)"
	}
	c.mu.Lock()
	if strings.Contains(req.URL.Path, "/docs") {
		c.docs = append(c.docs, what)
	} else {
		c.meta = append(c.meta, what)
	}
	c.mu.Unlock()
	return c.next.Do(req)
}

// reset forgets what was counted so far.
func (c *countingTransport) reset() {
	c.mu.Lock()
	c.docs, c.meta = nil, nil
	c.mu.Unlock()
}

// documents returns the document requests counted since the last reset.
func (c *countingTransport) documents() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.docs...)
}

// countedCosmium starts cosmium and returns a store whose client counts its
// requests with the returned transport.
func countedCosmium(t *testing.T) (*cosmosstore.Store, *countingTransport) {
	t.Helper()
	srv := cosmiumtest.Start(t)
	ct := &countingTransport{next: http.DefaultClient}
	o := &cosmosstore.ClientOptions{ClientOptions: azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: ct}}}
	c, err := cosmosstore.NewClientFromConnectionString(srv.ConnectionString(), o)
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
	return s, ct
}

// countingGateway is a payments gateway that captures every payment and
// counts the calls.
type countingGateway struct {
	mu    sync.Mutex
	calls int
}

func (g *countingGateway) Capture(_ context.Context, key string, c order.Capture) (string, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	return "pay-" + c.OrderID, nil
}

func (g *countingGateway) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// orderBody returns the body of a valid order message for id; customer
// varies the content (and so the request hash).
func orderBody(id, customer string) []byte {
	return fmt.Appendf(nil, `{"orderId":%q,"customerId":%q,"currency":"EUR","lines":[{"sku":"SKU-1","quantity":2,"unitPriceMinor":1999}],"totalMinor":3998,"placedAt":"2026-11-30T10:00:00Z"}`, id, customer)
}

// TestRoundTrips_Cosmium counts the Cosmos DB round trips of each order
// placement path at the HTTP transport of the azcosmos client, running the
// real Processor and Store against cosmium, and fails when a path makes more
// than its budget. The account and container metadata reads of the SDK are
// not counted (see countingTransport). The status change paths need a
// conditional patch, which cosmium does not execute: they are counted in
// TestRoundTrips_FakeGateway.
func TestRoundTrips_Cosmium(t *testing.T) {
	s, ct := countedCosmium(t)
	gw := &countingGateway{}
	newProcessor := func(payments bool) *order.Processor {
		opts := []order.Option{order.WithDocuments(s)}
		if payments {
			opts = append(opts, order.WithPayments(gw, time.Minute, "rt-test"))
		}
		return order.NewProcessor(s, nil, opts...)
	}
	// Each path: setup runs on the processor setupOn (or on the processor
	// under test when hot), uncounted; then one delivery is counted.
	tests := []struct {
		name          string
		payments      bool
		before        bool   // an earlier delivery created the order
		hot           bool   // ... on the processor under test (else on another one)
		customer      string // of the counted delivery; "cust-1" is the stored order's
		deliveryCount uint32
		want          idempotent.Outcome
		budget        int // Cosmos DB round trips
		wantCalls     int // payments service calls
	}{
		{name: "new order", customer: "cust-1", deliveryCount: 1, want: idempotent.Created, budget: 1},
		{name: "new order on a redelivery", customer: "cust-1", deliveryCount: 2, want: idempotent.Created, budget: 2},
		{name: "duplicate, first delivery, cold", before: true, customer: "cust-1", deliveryCount: 1, want: idempotent.Duplicate, budget: 2},
		{name: "duplicate, redelivery, cold", before: true, customer: "cust-1", deliveryCount: 2, want: idempotent.Duplicate, budget: 1},
		{name: "reused id, redelivery, cold", before: true, customer: "cust-2", deliveryCount: 2, want: idempotent.Mismatch, budget: 1},
		{name: "duplicate, hot", before: true, hot: true, customer: "cust-1", deliveryCount: 1, want: idempotent.Duplicate, budget: 0},
		{name: "reused id, hot", before: true, hot: true, customer: "cust-2", deliveryCount: 1, want: idempotent.Mismatch, budget: 0},
		{name: "payments: new order", payments: true, customer: "cust-1", deliveryCount: 1, want: idempotent.Created, budget: 2, wantCalls: 1},
		{name: "payments: duplicate of a completed payment, redelivery, cold", payments: true, before: true, customer: "cust-1", deliveryCount: 2, want: idempotent.Duplicate, budget: 1},
		{name: "payments: duplicate of a completed payment, first delivery, cold", payments: true, before: true, customer: "cust-1", deliveryCount: 1, want: idempotent.Duplicate, budget: 2},
		{name: "payments: reused id, redelivery, cold", payments: true, before: true, customer: "cust-2", deliveryCount: 2, want: idempotent.Mismatch, budget: 1},
		{name: "payments: duplicate of a completed payment, hot", payments: true, before: true, hot: true, customer: "cust-1", deliveryCount: 1, want: idempotent.Duplicate, budget: 0},
		{name: "payments: reused id, hot", payments: true, before: true, hot: true, customer: "cust-2", deliveryCount: 1, want: idempotent.Mismatch, budget: 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("rt-%d", i) // cosmium keys items by id alone: one id per path
			p := newProcessor(tt.payments)
			if tt.before {
				setup := newProcessor(tt.payments)
				if tt.hot {
					setup = p
				}
				if r := setup.Process(t.Context(), idempotent.Message{ID: id, Body: orderBody(id, "cust-1"), DeliveryCount: 1, SequenceNumber: 1}); r.Outcome != idempotent.Created {
					t.Fatalf("setup: %v %s %s", r.Outcome, r.Reason, r.Description)
				}
			}
			ct.reset()
			calls := gw.count()
			r := p.Process(t.Context(), idempotent.Message{ID: id, Body: orderBody(id, tt.customer), DeliveryCount: tt.deliveryCount, SequenceNumber: 2})
			got := ct.documents()
			t.Logf("%d round trips: %q", len(got), got)
			if r.Outcome != tt.want {
				t.Errorf("outcome = %v %s %s, want %v", r.Outcome, r.Reason, r.Description, tt.want)
			}
			if len(got) > tt.budget {
				t.Errorf("%d Cosmos DB round trips %q, budget %d", len(got), got, tt.budget)
			}
			if c := gw.count() - calls; c != tt.wantCalls {
				t.Errorf("%d payments calls, want %d", c, tt.wantCalls)
			}
		})
	}
}
