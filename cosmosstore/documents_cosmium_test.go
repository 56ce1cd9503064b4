package cosmosstore_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// These tests run the DocumentStore methods against cosmium through the real
// SDK. Measured with cosmium v0.1.20: it keeps a changing "_etag" in the body
// but sends no ETag header, ignores If-Match (a stale ETag still replaces,
// never 412) and ignores "ttl". What depends on those is tested on the fake
// gateway (documents_gateway_test.go) and, for the decisions, on memstore in
// package order.

// testDoc is a document of the shape the order package writes.
type testDoc struct {
	ID      string `json:"id"`
	OrderID string `json:"orderId"`
	Type    string `json:"type"`
	State   string `json:"state"`
	TTL     int    `json:"ttl,omitempty"`
}

func (d testDoc) document(t *testing.T) idempotent.Document {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return idempotent.Document{ID: d.ID, Body: b}
}

// readTestDoc reads pk/id and decodes it; cosmium, like Cosmos DB, adds
// system properties (_etag, _rid, _ts…) that the decoding ignores.
func readTestDoc(t *testing.T, s *cosmosstore.Store, pk, id string) (testDoc, string) {
	t.Helper()
	body, etag, err := s.ReadDocument(t.Context(), pk, id)
	if err != nil {
		t.Fatalf("ReadDocument(%q, %q) = %v", pk, id, err)
	}
	var d testDoc
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("ReadDocument(%q, %q) body %s: %v", pk, id, body, err)
	}
	return d, etag
}

func TestCosmium_CreateDocumentsThenReadDocument(t *testing.T) {
	s, _ := cosmiumStore(t)
	docs := []testDoc{
		{ID: "inbox:loyalty:ord-1", OrderID: "ord-1", Type: order.TypeInboxMarker, State: "done", TTL: 600},
		{ID: "loyalty-1", OrderID: "ord-1", Type: order.TypeLoyaltyEntry, State: "awarded"},
	}
	if _, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{docs[0].document(t), docs[1].document(t)}); err != nil {
		t.Fatalf("CreateDocuments = %v", err)
	}
	for _, want := range docs {
		if got, _ := readTestDoc(t, s, "ord-1", want.ID); got != want {
			t.Errorf("ReadDocument = %+v, want %+v", got, want)
		}
	}
}

func TestCosmium_ReadDocument_Missing_NotFound(t *testing.T) {
	s, _ := cosmiumStore(t)
	body, etag, err := s.ReadDocument(t.Context(), "ord-1", order.PaymentRecordID("ord-1"))
	checkSentinels(t, err, idempotent.ErrNotFound)
	if body != nil || etag != "" {
		t.Errorf("ReadDocument of a missing document = %q, %q; want nothing", body, etag)
	}
}

// The conflict is on the first operation: cosmium's batch is not atomic, so
// a conflict after a new document would leave that document written.
func TestCosmium_CreateDocuments_Conflict_AlreadyExists(t *testing.T) {
	s, _ := cosmiumStore(t)
	first := testDoc{ID: "Payment:ord-1", OrderID: "ord-1", Type: order.TypePayment, State: order.PaymentInProgress}
	if _, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{first.document(t)}); err != nil {
		t.Fatalf("first CreateDocuments = %v", err)
	}
	second := first
	second.State = order.PaymentCompleted
	_, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{second.document(t)})
	checkSentinels(t, err, idempotent.ErrAlreadyExists)
	var e *cosmosstore.Error
	if !errors.As(err, &e) || e.Op != "create documents" || e.Index != 0 || e.StatusCode != http.StatusConflict {
		t.Errorf("second CreateDocuments = %#v, want a 409 on operation 0 of create documents", err)
	}
	if got, _ := readTestDoc(t, s, "ord-1", first.ID); got != first {
		t.Errorf("after a conflicting create the document is %+v, want it unchanged: %+v", got, first)
	}
}

func TestCosmium_ReplaceDocument_Unconditional_ChangesBody(t *testing.T) {
	s, _ := cosmiumStore(t)
	d := testDoc{ID: "Payment:ord-1", OrderID: "ord-1", Type: order.TypePayment, State: order.PaymentInProgress}
	if _, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{d.document(t)}); err != nil {
		t.Fatal(err)
	}
	d.State = order.PaymentCompleted
	if _, err := s.ReplaceDocument(t.Context(), "ord-1", d.document(t), ""); err != nil {
		t.Fatalf("ReplaceDocument = %v", err)
	}
	if got, _ := readTestDoc(t, s, "ord-1", d.ID); got != d {
		t.Errorf("after ReplaceDocument, ReadDocument = %+v, want %+v", got, d)
	}
}

func TestCosmium_ReplaceDocument_Missing_NotFound(t *testing.T) {
	s, _ := cosmiumStore(t)
	d := testDoc{ID: "Payment:ord-1", OrderID: "ord-1", Type: order.TypePayment, State: order.PaymentCompleted}
	etag, err := s.ReplaceDocument(t.Context(), "ord-1", d.document(t), "")
	checkSentinels(t, err, idempotent.ErrNotFound)
	var e *cosmosstore.Error
	if !errors.As(err, &e) || e.Op != "replace document" || e.ID != d.ID || e.StatusCode != http.StatusNotFound {
		t.Errorf("ReplaceDocument of a missing document = %#v, want a 404 naming %q", err, d.ID)
	}
	if etag != "" {
		t.Errorf("ReplaceDocument of a missing document returned ETag %q", etag)
	}
	if _, _, err := s.ReadDocument(t.Context(), "ord-1", d.ID); !errors.Is(err, idempotent.ErrNotFound) {
		t.Errorf("after a failed replace, ReadDocument = %v, want ErrNotFound (a replace must not create)", err)
	}
}

// This pins the gap rather than the contract: with cosmium v0.1.20 the store
// sees no ETag and a stale If-Match still replaces. If a cosmium upgrade
// starts sending ETags or answering 412, this test fails so that the ETag
// tests can move from the fake gateway to cosmium.
func TestCosmium_ReplaceDocument_StaleIfMatchStillReplaces_CosmiumHasNoETagHeaderAndIgnoresIfMatch(t *testing.T) {
	s, _ := cosmiumStore(t)
	d := testDoc{ID: "ord-1", OrderID: "ord-1", Type: order.TypeOrder, State: "accepted"}
	if _, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{d.document(t)}); err != nil {
		t.Fatal(err)
	}
	if _, etag := readTestDoc(t, s, "ord-1", d.ID); etag != "" {
		t.Errorf("cosmium sent ETag %q; it sent none in v0.1.20: move the ETag tests to cosmium", etag)
	}
	d.State = "paid"
	etag, err := s.ReplaceDocument(t.Context(), "ord-1", d.document(t), `"stale-etag"`)
	if err != nil {
		t.Fatalf("ReplaceDocument with a stale ETag = %v; cosmium v0.1.20 ignored If-Match: check whether it now answers 412", err)
	}
	if etag != "" {
		t.Errorf("ReplaceDocument returned ETag %q; cosmium v0.1.20 sent none", etag)
	}
	if got, _ := readTestDoc(t, s, "ord-1", d.ID); got != d {
		t.Errorf("after ReplaceDocument, ReadDocument = %+v, want %+v", got, d)
	}
}

// The processor applies status changes through the store on cosmium. The
// ETag guard is not exercised here: cosmium sends no ETag, so every replace
// is unconditional (TestGateway_Processor_StatusChange_RereadsAfter412_*
// covers the guard). The decisions, applied and stale, are the store's
// reads and replaces working together.
func TestCosmium_Processor_StatusChanges_ETagGuardNotExercised(t *testing.T) {
	s, _ := cosmiumStore(t)
	// Without the conditional patch, whose condition cosmium ignores (see
	// TestCosmium_PatchConditionIgnored_CosmiumNotFaithful).
	p := order.NewProcessor(s, nil, order.WithDocuments(cosmosstore.WithoutPatch(s)))
	placed := []byte(`{"orderId":"ord-9","customerId":"cust-1","currency":"EUR",` +
		`"lines":[{"sku":"SKU-1","quantity":1,"unitPriceMinor":500}],"totalMinor":500,"placedAt":"2026-11-30T10:00:00Z"}`)
	if r := p.Process(t.Context(), idempotent.Message{ID: "ord-9", Body: placed, DeliveryCount: 1}); r.Outcome != idempotent.Created {
		t.Fatalf("order placement: outcome %v (%s), want created", r.Outcome, r.Description)
	}
	change := func(status string, version int64) idempotent.Message {
		b, err := json.Marshal(order.StatusChange{OrderID: "ord-9", Status: status, Version: version,
			ChangedAt: time.Date(2026, 12, 1, 9, int(version), 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		return idempotent.Message{ID: order.StatusMessageID("ord-9", version), Subject: order.SubjectOrderStatusChanged, Body: b, DeliveryCount: 1}
	}
	steps := []struct {
		name        string
		msg         idempotent.Message
		want        idempotent.Outcome
		wantStatus  string
		wantVersion int64
	}{
		{"paid", change("paid", 2), idempotent.Applied, "paid", 2},
		{"paid again (redelivery)", change("paid", 2), idempotent.Stale, "paid", 2},
		{"delivered, skipping shipped", change("delivered", 4), idempotent.Applied, "delivered", 4},
		{"shipped, late", change("shipped", 3), idempotent.Stale, "delivered", 4},
	}
	for _, step := range steps {
		r := p.Process(t.Context(), step.msg)
		if r.Outcome != step.want {
			t.Fatalf("%s: outcome %v (%s), want %v", step.name, r.Outcome, r.Description, step.want)
		}
		doc, err := order.ReadOrder(t.Context(), s, "ord-9")
		if err != nil {
			t.Fatal(err)
		}
		if doc.Status != step.wantStatus || doc.Version != step.wantVersion || doc.CustomerID != "cust-1" || doc.TotalMinor != 500 {
			t.Errorf("%s: stored order %+v; want status %s, version %d, the placement's fields kept", step.name, doc, step.wantStatus, step.wantVersion)
		}
	}
}

// The inbox variant on cosmium: the marker and the business write in one
// batch, the marker's conflict telling a duplicate. The marker's "ttl" is
// stored but cosmium v0.1.20 never expires it.
func TestCosmium_InboxConsumer_CreatedThenDuplicate_TTLNotExercised(t *testing.T) {
	s, _ := cosmiumStore(t)
	c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: 10 * time.Minute,
		Now: func() time.Time { return time.Date(2026, 11, 30, 10, 0, 5, 0, time.UTC) }}
	body := []byte(`{"orderId":"ord-3","customerId":"cust-1","currency":"EUR",` +
		`"lines":[{"sku":"SKU-1","quantity":2,"unitPriceMinor":1999}],"totalMinor":3998,"placedAt":"2026-11-30T10:00:00Z"}`)
	for i, want := range []idempotent.Outcome{idempotent.Created, idempotent.Duplicate} {
		r := c.Process(t.Context(), idempotent.Message{ID: "ord-3", Body: body, DeliveryCount: uint32(i + 1)})
		if r.Outcome != want {
			t.Fatalf("delivery %d: outcome %v (%s), want %v", i+1, r.Outcome, r.Description, want)
		}
	}
	raw, _, err := s.ReadDocument(t.Context(), "ord-3", order.InboxMarkerID("loyalty", "ord-3"))
	if err != nil {
		t.Fatal(err)
	}
	var m order.InboxMarker
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.TTL != 600 || m.Consumer != "loyalty" || m.MessageID != "ord-3" {
		t.Errorf("inbox marker %+v; want consumer loyalty, message ord-3, ttl 600", m)
	}
}

// BenchmarkCosmium_ReadReplaceDocument measures one read-modify-write cycle
// of a document, the store's half of a status change, against cosmium on
// loopback: the store's and the SDK's overhead, not Cosmos DB's latency.
func BenchmarkCosmium_ReadReplaceDocument(b *testing.B) {
	s := benchStore(b)
	d := idempotent.Document{ID: "Payment:ord-1", Body: []byte(`{"id":"Payment:ord-1","orderId":"ord-1","type":"payment","attempts":0}`)}
	if _, err := s.CreateBatch(b.Context(), "ord-1", []idempotent.Document{d}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, etag, err := s.ReadDocument(b.Context(), "ord-1", d.ID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.ReplaceDocument(b.Context(), "ord-1", d, etag); err != nil {
			b.Fatal(err)
		}
	}
}

// Cosmium v0.1.20 applies a patch whatever its condition: it never reads
// the filter predicate. This is why the processor's one-call status path is
// tested against the fake gateway (TestRoundTrips_FakeGateway) and why a
// worker on cosmium needs cosmosstore.WithoutPatch. If this test fails,
// cosmium evaluates conditions now, and both can go.
func TestCosmium_PatchConditionIgnored_CosmiumNotFaithful(t *testing.T) {
	s, _ := cosmiumStore(t)
	if err := writeOrder(t.Context(), s, newWrite("ord-p", "cust-1")); err != nil {
		t.Fatal(err)
	}
	_, err := s.PatchDocument(t.Context(), "ord-p", "ord-p", idempotent.Patch{
		If:  []idempotent.Below{{Path: "/version", Value: 1}}, // the stored version is 1: not below 1
		Ops: []idempotent.PatchOp{{Op: idempotent.PatchSet, Path: "/status", Value: "paid"}},
	})
	doc, rerr := order.ReadOrder(t.Context(), s, "ord-p")
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil || doc.Status != "paid" {
		t.Errorf("patch with an unmet condition: %v, status %q; cosmium used to apply it regardless", err, doc.Status)
	}
}

// TestCosmium_ReadPartitionReturnsOnlyThatPartition: ReadPartition returns
// every document of one partition key value and none of another's, although
// cosmium keys items by id alone (its filter on the partition key field
// does the isolating there), and an empty slice for a partition with none.
func TestCosmium_ReadPartitionReturnsOnlyThatPartition(t *testing.T) {
	s, _ := cosmiumStore(t)
	for _, id := range []string{"ord-1", "ord-2"} {
		if err := writeOrder(t.Context(), s, newWrite(id, "cust-1")); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := s.ReadPartition(t.Context(), "ord-1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range docs {
		var h struct {
			ID      string `json:"id"`
			OrderID string `json:"orderId"`
		}
		if err := json.Unmarshal(d, &h); err != nil || h.OrderID != "ord-1" {
			t.Fatalf("document %s of another partition (%v)", d, err)
		}
		ids = append(ids, h.ID)
	}
	slices.Sort(ids)
	if want := []string{"OrderAccepted:ord-1", "ord-1"}; !slices.Equal(ids, want) {
		t.Fatalf("ReadPartition(ord-1) = %q, want %q", ids, want)
	}
	if docs, err := s.ReadPartition(t.Context(), "ord-none"); err != nil || docs == nil || len(docs) != 0 {
		t.Fatalf("ReadPartition of an empty partition = %v, %v; want an empty slice", docs, err)
	}
}
