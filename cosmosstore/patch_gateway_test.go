package cosmosstore_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// These tests run the conditional patch through the real SDK against the
// fake gateway: cosmium v0.1.20 ignores a patch's condition and applies
// patches as RFC 6902 JSON Patch, which has no "set" or "incr"
// (api/handlers/documents.go, PatchDocument), so it cannot show what the
// store sends or how it maps a 412. They check the store's half of the
// contract, not Cosmos DB's evaluation of the predicate.

// TestStatusPatch_FakeGateway: PatchDocument sends one PATCH of the
// document with the conditions as a filter predicate and the operations as
// Cosmos DB names them, returns the ETag of a 200, and maps 412 and 404.
func TestStatusPatch_FakeGateway(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	p := idempotent.Patch{
		If: []idempotent.Below{{Path: "/version", Value: 5}, {Path: "/statusHashCount", Value: 32}},
		Ops: []idempotent.PatchOp{
			{Op: idempotent.PatchSet, Path: "/status", Value: "paid"},
			{Op: idempotent.PatchSet, Path: "/statusHashes/5", Value: "h5"},
			{Op: idempotent.PatchIncrement, Path: "/statusHashCount", Value: int64(1)},
		},
	}
	const etag = `"00000b00-0000-0000-0000-65f1c2a40000"`
	g.queuePatches(reply{status: 200, header: map[string]string{"ETag": etag}, body: `{}`},
		reply{status: 412, body: `{"code":"PreconditionFailed"}`}, reply{status: 404, body: `{}`})
	got, err := s.PatchDocument(t.Context(), "ord-1", "ord-1", p)
	if err != nil || got != etag {
		t.Fatalf("PatchDocument = %q, %v; want the ETag %s", got, err, etag)
	}
	sent := g.sentPatches()
	if len(sent) != 1 || sent[0].path != "/dbs/orders/colls/orders/docs/ord-1" || sent[0].partitionKey != `["ord-1"]` {
		t.Fatalf("sent %+v, want one PATCH of ord-1 in partition ord-1", sent)
	}
	var req struct {
		Condition  string `json:"condition"`
		Operations []struct {
			Op    string          `json:"op"`
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		} `json:"operations"`
	}
	if err := json.Unmarshal(sent[0].body, &req); err != nil {
		t.Fatalf("patch body %s: %v", sent[0].body, err)
	}
	if want := "FROM c WHERE c.version < 5 AND c.statusHashCount < 32"; req.Condition != want {
		t.Errorf("condition = %q, want %q", req.Condition, want)
	}
	if len(req.Operations) != 3 || req.Operations[0].Op != "set" || req.Operations[1].Path != "/statusHashes/5" ||
		req.Operations[2].Op != "incr" || string(req.Operations[2].Value) != "1" {
		t.Errorf("operations = %s", sent[0].body)
	}
	_, err = s.PatchDocument(t.Context(), "ord-1", "ord-1", p)
	checkSentinels(t, err, idempotent.ErrPreconditionFailed)
	_, err = s.PatchDocument(t.Context(), "ord-1", "ord-1", p)
	checkSentinels(t, err, idempotent.ErrNotFound)
}

// TestRoundTrips_FakeGateway counts the Cosmos DB round trips of each
// status change path at the HTTP transport of the azcosmos client, running
// the real Processor and Store against the fake gateway (cosmium cannot
// execute a conditional patch), and fails when a path makes more than its
// budget. The account read is not counted (see countingTransport).
func TestRoundTrips_FakeGateway(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hashOf := func(status string) string {
		c := order.StatusChange{Status: status, ChangedAt: at}
		return c.ContentHash()
	}
	// The stored order: version 3, with versions 2 (paid) and 3 (shipped)
	// applied.
	stored := newWrite("ord-1", "cust-1").Order
	stored.Status, stored.Version, stored.StatusChangedAt = "shipped", 3, &at
	stored.StatusHashes, stored.StatusHashCount = map[int64]string{2: hashOf("paid"), 3: hashOf("shipped")}, 2
	storedBody, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	read := reply{status: 200, header: map[string]string{"ETag": `"e1"`}, body: string(storedBody)}
	ok := reply{status: 200, header: map[string]string{"ETag": `"e2"`}, body: `{}`}
	failed := reply{status: 412, body: `{"code":"PreconditionFailed"}`}
	tests := []struct {
		name          string
		version       int64
		status        string
		deliveryCount uint32
		patches       []reply
		reads         []reply
		replaces      []reply
		want          idempotent.Outcome
		budget        int
	}{
		{name: "applied, first delivery", version: 4, status: "delivered", deliveryCount: 1, patches: []reply{ok}, want: idempotent.Applied, budget: 1},
		{name: "stale, redelivery", version: 3, status: "shipped", deliveryCount: 2, reads: []reply{read}, want: idempotent.Stale, budget: 1},
		{name: "reused version, redelivery", version: 3, status: "cancelled", deliveryCount: 2, reads: []reply{read}, want: idempotent.Mismatch, budget: 1},
		{name: "stale, first delivery (out of order or a resend)", version: 2, status: "paid", deliveryCount: 1, patches: []reply{failed}, reads: []reply{read}, want: idempotent.Stale, budget: 2},
		{name: "reused version, first delivery", version: 2, status: "cancelled", deliveryCount: 1, patches: []reply{failed}, reads: []reply{read}, want: idempotent.Mismatch, budget: 2},
		{name: "applied, redelivery", version: 4, status: "delivered", deliveryCount: 2, reads: []reply{read}, replaces: []reply{ok}, want: idempotent.Applied, budget: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			ct := &countingTransport{next: http.DefaultClient}
			o := noRetries()
			o.ClientOptions = azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: ct, Retry: o.Retry}}
			s := storeFor(t, g.endpoint(), o)
			g.queuePatches(tt.patches...)
			g.queueReads(tt.reads...)
			g.queueReplaces(tt.replaces...)
			g.setPatch(reply{status: 500, body: `{}`}) // beyond the queue: a call the path should not make
			g.setRead(reply{status: 500, body: `{}`})
			g.setReplace(reply{status: 500, body: `{}`})
			p := order.NewProcessor(s, nil, order.WithDocuments(s))
			body, _ := json.Marshal(order.StatusChange{OrderID: "ord-1", Status: tt.status, Version: tt.version, ChangedAt: at})
			r := p.Process(t.Context(), idempotent.Message{ID: order.StatusMessageID("ord-1", tt.version), Subject: order.SubjectOrderStatusChanged,
				Body: body, DeliveryCount: tt.deliveryCount})
			got := ct.documents()
			t.Logf("%d round trips: %q", len(got), got)
			if r.Outcome != tt.want {
				t.Errorf("outcome = %v %s %s, want %v", r.Outcome, r.Reason, r.Description, tt.want)
			}
			if len(got) > tt.budget {
				t.Errorf("%d Cosmos DB round trips %q, budget %d", len(got), got, tt.budget)
			}
		})
	}
}

// TestCreateBatch_FakeGateway_ReturnsTheBatchETags: an order's create sends the order,
// its event and the payment claim in one batch, and returns the ETag the
// response reports for each operation (cosmium sends none, so only the
// gateway can show it); the claim's ETag is what the completed mark is
// conditioned on, without a read.
func TestCreateBatch_FakeGateway_ReturnsTheBatchETags(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	ops := []map[string]any{
		{"statusCode": 201, "requestCharge": 1, "eTag": `"e-order"`},
		{"statusCode": 201, "requestCharge": 1, "eTag": `"e-event"`},
		{"statusCode": 201, "requestCharge": 1, "eTag": `"e-claim"`},
	}
	b, _ := json.Marshal(ops)
	g.setBatch(reply{status: 200, body: string(b)})
	w := newWrite("ord-1", "cust-1")
	now := time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)
	claim, err := json.Marshal(order.PaymentRecord{ID: order.PaymentRecordID("ord-1"), OrderID: "ord-1", Type: order.TypePayment,
		State: order.PaymentInProgress, IdempotencyKey: order.PaymentKey("ord-1"), AmountMinor: 3998, Currency: "EUR",
		RequestHash: w.Order.RequestHash, Epoch: 1, ClaimedAt: now, FirstAttemptAt: &now, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := w.Documents()
	if err != nil {
		t.Fatal(err)
	}
	etags, err := s.CreateBatch(t.Context(), w.PartitionKey(), append(docs, idempotent.Document{ID: order.PaymentRecordID("ord-1"), Body: claim}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"e-order"`, `"e-event"`, `"e-claim"`}; !slices.Equal(etags, want) {
		t.Errorf("CreateBatch = %q, want %q", etags, want)
	}
	sent := g.sentBatches()
	if len(sent) != 1 || len(sent[0].ops) != 3 || sent[0].partitionKey != `["ord-1"]` {
		t.Fatalf("sent %+v, want one batch of 3 operations in partition ord-1", sent)
	}
	var sentClaim order.PaymentRecord
	if err := json.Unmarshal(sent[0].ops[2].ResourceBody, &sentClaim); err != nil || sentClaim.ID != order.PaymentRecordID("ord-1") || sentClaim.State != order.PaymentInProgress {
		t.Errorf("third operation = %s (%v), want the in-progress claim", sent[0].ops[2].ResourceBody, err)
	}
}
