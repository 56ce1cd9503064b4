package cosmosstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/cosmosstore"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// These tests run the DocumentStore methods through the real SDK against the
// fake gateway, for what cosmium v0.1.20 cannot show: it sends no ETag
// header, ignores If-Match and never answers 412 (see documents_cosmium_test.go
// for what it does reproduce). They check the store's half of the contract,
// what it sends and how it maps answers, not Cosmos DB's behaviour.

// sentinels are the sentinel errors a store error may match.
var sentinels = []error{idempotent.ErrAlreadyExists, idempotent.ErrNotFound, idempotent.ErrPreconditionFailed, idempotent.ErrTransient, idempotent.ErrRejected}

// checkSentinels fails t unless err matches want and no other sentinel (want
// nil: none of them).
func checkSentinels(t *testing.T, err, want error) {
	t.Helper()
	for _, s := range sentinels {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(err, %v) = %v, want %v; err = %v", s, got, s == want, err)
		}
	}
}

func TestGateway_ReadDocument_ReturnsBodyAndETag_NotFaithfulInCosmium(t *testing.T) {
	g := newGateway(t, false)
	const stored = `{"id":"Payment:ord-1","orderId":"ord-1","type":"payment","state":"in-progress"}`
	g.setRead(reply{status: 200, header: map[string]string{"ETag": `"00000a00-0000-0000-0000-65f1c2a40000"`}, body: stored})
	s := storeFor(t, g.endpoint(), noRetries())
	body, etag, err := s.ReadDocument(t.Context(), "ord-1", order.PaymentRecordID("ord-1"))
	if err != nil {
		t.Fatalf("ReadDocument = %v", err)
	}
	if string(body) != stored {
		t.Errorf("body = %s, want %s", body, stored)
	}
	if want := `"00000a00-0000-0000-0000-65f1c2a40000"`; etag != want {
		t.Errorf("etag = %s, want %s", etag, want)
	}
}

func TestGateway_ReadDocument_StatusMapping(t *testing.T) {
	tests := []struct {
		name     string
		reply    reply
		wantIs   error
		wantCode int
	}{
		{name: "not found", reply: reply{status: 404, body: `{}`}, wantIs: idempotent.ErrNotFound, wantCode: 404},
		{name: "container not found", reply: reply{status: 404, header: map[string]string{"x-ms-substatus": "1003"}, body: `{}`}, wantCode: 404},
		{name: "throttled", reply: reply{status: 429, body: `{}`}, wantIs: idempotent.ErrTransient, wantCode: 429},
		{name: "unavailable", reply: reply{status: 503, body: `{}`}, wantIs: idempotent.ErrTransient, wantCode: 503},
		{name: "forbidden", reply: reply{status: 403, body: `{}`}, wantCode: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setRead(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			body, etag, err := s.ReadDocument(t.Context(), "ord-1", "Payment:ord-1")
			if body != nil || etag != "" {
				t.Errorf("ReadDocument = %q, %q with an error; want nothing", body, etag)
			}
			var e *cosmosstore.Error
			if !errors.As(err, &e) {
				t.Fatalf("ReadDocument error = %v (%T), want *cosmosstore.Error", err, err)
			}
			checkSentinels(t, err, tt.wantIs)
			if e.Op != "read document" || e.PartitionKey != "ord-1" || e.ID != "Payment:ord-1" || e.StatusCode != tt.wantCode {
				t.Errorf("Op, OrderID, ID, StatusCode = %q, %q, %q, %d; want %q, %q, %q, %d",
					e.Op, e.PartitionKey, e.ID, e.StatusCode, "read document", "ord-1", "Payment:ord-1", tt.wantCode)
			}
		})
	}
}

func TestGateway_ReplaceDocument_IfMatch_NotFaithfulInCosmium(t *testing.T) {
	const (
		oldETag = `"00000a00-0000-0000-0000-000000000001"`
		newETag = `"00000a00-0000-0000-0000-000000000002"`
	)
	tests := []struct {
		name        string
		ifMatch     string
		wantIfMatch bool
	}{
		{name: "conditional", ifMatch: oldETag, wantIfMatch: true},
		{name: "unconditional", ifMatch: "", wantIfMatch: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setReplace(reply{status: 200, header: map[string]string{"ETag": newETag}})
			s := storeFor(t, g.endpoint(), noRetries())
			d := idempotent.Document{ID: "Payment:ord-1", Body: []byte(`{"id":"Payment:ord-1","orderId":"ord-1","state":"completed"}`)}
			etag, err := s.ReplaceDocument(t.Context(), "ord-1", d, tt.ifMatch)
			if err != nil {
				t.Fatalf("ReplaceDocument = %v", err)
			}
			if etag != newETag {
				t.Errorf("ReplaceDocument returned ETag %s, want the new one %s", etag, newETag)
			}
			sent := g.sentReplaces()
			if len(sent) != 1 {
				t.Fatalf("sent %d replaces, want 1", len(sent))
			}
			r := sent[0]
			if r.hasIfMatch != tt.wantIfMatch || r.ifMatch != tt.ifMatch {
				t.Errorf("If-Match header sent: %v, %q; want %v, %q", r.hasIfMatch, r.ifMatch, tt.wantIfMatch, tt.ifMatch)
			}
			if want := "/dbs/orders/colls/orders/docs/Payment:ord-1"; r.path != want {
				t.Errorf("path = %q, want %q", r.path, want)
			}
			if r.partitionKey != `["ord-1"]` {
				t.Errorf("partition key header = %q, want %q", r.partitionKey, `["ord-1"]`)
			}
			if r.prefer != "return=minimal" {
				t.Errorf("Prefer header = %q, want return=minimal: the store needs only the ETag back", r.prefer)
			}
			if !bytes.Equal(r.body, d.Body) {
				t.Errorf("body = %s, want %s", r.body, d.Body)
			}
		})
	}
}

func TestGateway_ReplaceDocument_StatusMapping_412NotFaithfulInCosmium(t *testing.T) {
	activity := map[string]string{"x-ms-activity-id": "act-7"}
	tests := []struct {
		name     string
		reply    reply
		wantIs   error
		wantCode int
		wantText string
	}{
		{name: "ETag moved", reply: reply{status: 412, header: activity, body: `{"code":"PreconditionFailed"}`},
			wantIs: idempotent.ErrPreconditionFailed, wantCode: 412, wantText: "412 Precondition Failed"},
		{name: "gone", reply: reply{status: 404, header: activity, body: `{}`}, wantIs: idempotent.ErrNotFound, wantCode: 404},
		{name: "container gone", reply: reply{status: 404, header: map[string]string{"x-ms-activity-id": "act-7", "x-ms-substatus": "1003"}, body: `{}`}, wantCode: 404},
		{name: "throttled", reply: reply{status: 429, header: activity, body: `{}`}, wantIs: idempotent.ErrTransient, wantCode: 429},
		{name: "retry with", reply: reply{status: 449, header: activity, body: `{}`}, wantIs: idempotent.ErrTransient, wantCode: 449},
		{name: "id in body differs", reply: reply{status: 400, header: activity, body: `{}`}, wantIs: idempotent.ErrRejected, wantCode: 400},
		{name: "too large", reply: reply{status: 413, header: activity, body: `{}`}, wantIs: idempotent.ErrRejected, wantCode: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setReplace(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			etag, err := s.ReplaceDocument(t.Context(), "ord-1", idempotent.Document{ID: "ord-1", Body: []byte(`{"id":"ord-1","orderId":"ord-1"}`)}, `"e1"`)
			if etag != "" {
				t.Errorf("ReplaceDocument returned ETag %q with an error", etag)
			}
			var e *cosmosstore.Error
			if !errors.As(err, &e) {
				t.Fatalf("ReplaceDocument = %v (%T), want *cosmosstore.Error", err, err)
			}
			checkSentinels(t, err, tt.wantIs)
			if e.Op != "replace document" || e.ID != "ord-1" || e.Index != -1 || e.StatusCode != tt.wantCode || e.ActivityID != "act-7" {
				t.Errorf("Op, ID, Index, StatusCode, ActivityID = %q, %q, %d, %d, %q; want %q, %q, -1, %d, %q",
					e.Op, e.ID, e.Index, e.StatusCode, e.ActivityID, "replace document", "ord-1", tt.wantCode, "act-7")
			}
			if msg := err.Error(); !strings.Contains(msg, tt.wantText) {
				t.Errorf("error text %q does not contain %q", msg, tt.wantText)
			}
		})
	}
}

func TestGateway_CreateDocuments_OneAtomicBatch(t *testing.T) {
	docs := []idempotent.Document{
		{ID: "inbox:loyalty:ord-5", Body: []byte(`{"id":"inbox:loyalty:ord-5","orderId":"ord-5","type":"inbox","ttl":600}`)},
		{ID: "loyalty-1", Body: []byte(`{"id":"loyalty-1","orderId":"ord-5","type":"loyalty"}`)},
		{ID: "loyalty-2", Body: []byte(`{"id":"loyalty-2","orderId":"ord-5","type":"loyalty"}`)},
	}
	g := newGateway(t, false)
	g.setBatch(batchReply(200, nil, 201, 201, 201))
	s := storeFor(t, g.endpoint(), noRetries())
	if _, err := s.CreateBatch(t.Context(), "ord-5", docs); err != nil {
		t.Fatalf("CreateDocuments = %v", err)
	}
	sent := g.sentBatches()
	if len(sent) != 1 {
		t.Fatalf("sent %d batches, want 1", len(sent))
	}
	b := sent[0]
	if b.partitionKey != `["ord-5"]` || b.atomic != "true" && b.atomic != "True" {
		t.Errorf("partition key header %q, atomic header %q; want %q, true", b.partitionKey, b.atomic, `["ord-5"]`)
	}
	if len(b.ops) != len(docs) {
		t.Fatalf("batch has %d operations, want %d", len(b.ops), len(docs))
	}
	for i, op := range b.ops {
		if op.OperationType != "Create" || !jsonEqual(t, op.ResourceBody, docs[i].Body) {
			t.Errorf("operation %d = %s %s, want Create %s", i, op.OperationType, op.ResourceBody, docs[i].Body)
		}
	}
}

func TestGateway_CreateDocuments_StatusMapping(t *testing.T) {
	docs := []idempotent.Document{
		{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-5"}`)},
		{ID: "b", Body: []byte(`{"id":"b","orderId":"ord-5"}`)},
	}
	tests := []struct {
		name      string
		reply     reply
		wantIs    error
		wantIndex int
		wantCode  int
	}{
		{name: "second document exists", reply: batchReply(207, nil, 424, 409), wantIs: idempotent.ErrAlreadyExists, wantIndex: 1, wantCode: 409},
		{name: "throttled operation", reply: batchReply(207, nil, 429, 424), wantIs: idempotent.ErrTransient, wantIndex: 0, wantCode: 429},
		{name: "whole batch throttled", reply: reply{status: 429, body: `{}`}, wantIs: idempotent.ErrTransient, wantIndex: -1, wantCode: 429},
		{name: "whole batch too large", reply: reply{status: 413, body: `{}`}, wantIs: idempotent.ErrRejected, wantIndex: -1, wantCode: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, false)
			g.setBatch(tt.reply)
			s := storeFor(t, g.endpoint(), noRetries())
			_, err := s.CreateBatch(t.Context(), "ord-5", docs)
			var e *cosmosstore.Error
			if !errors.As(err, &e) {
				t.Fatalf("CreateDocuments = %v (%T), want *cosmosstore.Error", err, err)
			}
			checkSentinels(t, err, tt.wantIs)
			if e.Op != "create documents" || e.PartitionKey != "ord-5" || e.Index != tt.wantIndex || e.StatusCode != tt.wantCode {
				t.Errorf("Op, OrderID, Index, StatusCode = %q, %q, %d, %d; want %q, %q, %d, %d",
					e.Op, e.PartitionKey, e.Index, e.StatusCode, "create documents", "ord-5", tt.wantIndex, tt.wantCode)
			}
		})
	}
}

func TestGateway_CreateDocuments_Empty_ErrorWithoutRequest(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	_, err := s.CreateBatch(t.Context(), "ord-5", nil)
	if err == nil {
		t.Fatal("CreateDocuments of no documents succeeded, want an error")
	}
	checkSentinels(t, err, nil)
	if n := len(g.sentBatches()); n != 0 {
		t.Errorf("sent %d batches for no documents, want 0", n)
	}
}

func TestGateway_RequestCharge_DocumentCalls(t *testing.T) {
	g := newGateway(t, false)
	s := storeFor(t, g.endpoint(), noRetries())
	charge := func(ru string) map[string]string { return map[string]string{"x-ms-request-charge": ru} }
	doc := idempotent.Document{ID: "a", Body: []byte(`{"id":"a","orderId":"ord-1"}`)}
	steps := []struct {
		name string
		call func() error
		want float64
	}{
		{"create documents", func() error {
			g.setBatch(batchReply(200, charge("6.5"), 201))
			_, err := s.CreateBatch(t.Context(), "ord-1", []idempotent.Document{doc})
			return err
		}, 6.5},
		{"read document", func() error {
			g.setRead(reply{status: 200, header: charge("1"), body: string(doc.Body)})
			_, _, err := s.ReadDocument(t.Context(), "ord-1", "a")
			return err
		}, 7.5},
		{"replace document", func() error {
			g.setReplace(reply{status: 200, header: charge("10.25")})
			_, err := s.ReplaceDocument(t.Context(), "ord-1", doc, `"e1"`)
			return err
		}, 17.75},
		{"replace document refused with 412", func() error {
			g.setReplace(reply{status: 412, header: charge("1.25"), body: `{}`})
			_, err := s.ReplaceDocument(t.Context(), "ord-1", doc, `"e1"`)
			return err
		}, 19},
		{"read document not found", func() error {
			g.setRead(reply{status: 404, header: charge("1"), body: `{}`})
			_, _, err := s.ReadDocument(t.Context(), "ord-1", "b")
			return err
		}, 20},
	}
	for _, step := range steps {
		err := step.call()
		if got := s.RequestCharge(); got != step.want {
			t.Fatalf("after %s (err %v): RequestCharge = %v, want %v", step.name, err, got, step.want)
		}
	}
}

// The processor's status change against Cosmos DB's answers: a replace
// refused with 412 makes it read again and replace with the new ETag. This is
// the ETag guard that cosmium cannot exercise.
func TestGateway_Processor_StatusChange_RereadsAfter412_NotFaithfulInCosmium(t *testing.T) {
	stored := newWrite("ord-1", "cust-1").Order
	v1, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	paid := stored
	paid.Status, paid.Version = "paid", 2
	v2, err := json.Marshal(paid)
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, false)
	g.queueReads(
		reply{status: 200, header: map[string]string{"ETag": `"e1"`}, body: string(v1)},
		reply{status: 200, header: map[string]string{"ETag": `"e2"`}, body: string(v2)}, // a concurrent change to paid, version 2
	)
	g.queueReplaces(
		reply{status: 412, body: `{"code":"PreconditionFailed"}`},
		reply{status: 200, header: map[string]string{"ETag": `"e3"`}},
	)
	s := storeFor(t, g.endpoint(), noRetries())
	p := order.NewProcessor(s, nil, order.WithDocuments(s))
	body := []byte(`{"orderId":"ord-1","status":"shipped","version":3,"changedAt":"2026-12-01T09:00:00Z"}`)
	// A redelivery: it reads first, and so takes the read-and-replace path
	// (a first delivery patches; see TestRoundTrips_FakeGateway).
	r := p.Process(t.Context(), idempotent.Message{ID: order.StatusMessageID("ord-1", 3), Subject: order.SubjectOrderStatusChanged, Body: body, DeliveryCount: 2})
	if r.Outcome != idempotent.Applied {
		t.Fatalf("outcome %v (%s), want applied", r.Outcome, r.Description)
	}
	sent := g.sentReplaces()
	if len(sent) != 2 {
		t.Fatalf("sent %d replaces, want 2", len(sent))
	}
	for i, want := range []string{`"e1"`, `"e2"`} {
		if sent[i].ifMatch != want {
			t.Errorf("replace %d sent If-Match %q, want %q", i+1, sent[i].ifMatch, want)
		}
	}
	var got order.OrderDocument
	if err := json.Unmarshal(sent[1].body, &got); err != nil {
		t.Fatal(err)
	}
	wantAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if got.Status != "shipped" || got.Version != 3 || got.StatusChangedAt == nil || !got.StatusChangedAt.Equal(wantAt) || got.RequestHash != stored.RequestHash {
		t.Errorf("replaced with %s; want the order at status shipped, version 3, changed at %v", sent[1].body, wantAt)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	ja, _ := json.Marshal(va) // encoding/json sorts map keys
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
