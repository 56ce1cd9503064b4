package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// orderWith returns the order message of order id with the given lines and
// total, its MessageId the order id.
func orderWith(t *testing.T, id string, total int64, lines ...order.Line) idempotent.Message {
	t.Helper()
	o := order.Order{OrderID: id, CustomerID: "cust-1", Currency: "EUR", Lines: lines, TotalMinor: total,
		PlacedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return idempotent.Message{ID: id, Body: body, DeliveryCount: 1}
}

// TestStoredIntegersAreBounded: every integer a message carries into the
// store (an order's total and prices, a status change's version, an
// OrderAccepted event's total) is at most order.MaxSafeInteger, 2^53-1: a
// store or reader that keeps numbers as float64 (cosmium, JavaScript)
// would round a larger one, so 2^53+1 would be charged but stored as 2^53,
// and math.MaxInt64 would come back as 9223372036854776000, which no
// int64 decodes. Above the bound the message is Invalid at its first
// delivery, its description naming the field and the bound; at the bound it
// is processed and stored exactly.
func TestStoredIntegersAreBounded(t *testing.T) {
	const (
		safe  = order.MaxSafeInteger
		above = order.MaxSafeInteger + 2 // 2^53+1: the first integer float64 rounds
	)
	if safe != 1<<53-1 {
		t.Fatalf("MaxSafeInteger = %d, want 2^53-1", int64(safe))
	}
	line := func(price int64) order.Line { return order.Line{SKU: "sku-1", Quantity: 1, UnitPriceMinor: price} }
	event := func(t *testing.T, id string, total int64) idempotent.Message {
		o := testOrder(id)
		o.Lines, o.TotalMinor = []order.Line{line(total)}, total
		return eventMsg(id, eventBody(t, o))
	}
	tests := []struct {
		name   string
		inbox  bool // processed by the inbox consumer, not the order processor
		m      func(t *testing.T) idempotent.Message
		want   idempotent.Outcome
		field  string // the Invalid result's field
		stored int64  // for an accepted order, its stored total; for a status change, its stored version
	}{
		{"order total 2^53+1", false, func(t *testing.T) idempotent.Message { return orderWith(t, "big-1", above, line(above)) }, idempotent.Invalid, "totalMinor", 0},
		{"order total math.MaxInt64", false, func(t *testing.T) idempotent.Message {
			return orderWith(t, "big-2", math.MaxInt64, line(math.MaxInt64))
		}, idempotent.Invalid, "totalMinor", 0},
		{"order lines summing beyond 2^53-1", false, func(t *testing.T) idempotent.Message {
			return orderWith(t, "big-3", 0, line(1<<52), line(1<<52))
		}, idempotent.Invalid, "lines[1].unitPriceMinor", 0},
		{"order total 2^53-1", false, func(t *testing.T) idempotent.Message { return orderWith(t, "big-4", safe, line(safe-10), line(10)) }, idempotent.Created, "", safe},
		{"status version math.MaxInt64", false, func(*testing.T) idempotent.Message { return statusMsg(math.MaxInt64, "shipped") }, idempotent.Invalid, "version", 0},
		{"status version 2^53+1", false, func(*testing.T) idempotent.Message { return statusMsg(above, "shipped") }, idempotent.Invalid, "version", 0},
		{"status version 2^53-1", false, func(*testing.T) idempotent.Message { return statusMsg(safe, "shipped") }, idempotent.Applied, "", safe},
		{"event total 2^53+1", true, func(t *testing.T) idempotent.Message { return event(t, "big-5", above) }, idempotent.Invalid, "totalMinor", 0},
		{"event total math.MaxInt64", true, func(t *testing.T) idempotent.Message { return event(t, "big-6", math.MaxInt64) }, idempotent.Invalid, "totalMinor", 0},
		{"event total 2^53-1", true, func(t *testing.T) idempotent.Message { return event(t, "big-7", safe) }, idempotent.Created, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := memstore.New("/orderId")
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
			if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created { // ord-1, for the status changes
				t.Fatal(r)
			}
			before := len(s.Items())
			m := tt.m(t)
			var r idempotent.Result
			if tt.inbox {
				r = (&order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}).Process(ctx, m)
			} else {
				r = p.Process(ctx, m)
			}
			if r.Outcome != tt.want {
				t.Fatalf("%v %q (%s), want %v", r.Outcome, r.Reason, r.Description, tt.want)
			}
			if tt.want != idempotent.Invalid {
				switch {
				case tt.stored != 0 && m.Subject == order.SubjectOrderStatusChanged:
					if doc, err := order.ReadOrder(ctx, s, "ord-1"); err != nil || doc.Version != tt.stored {
						t.Errorf("stored version %d (%v), want %d", doc.Version, err, tt.stored)
					}
				case tt.stored != 0:
					if doc, err := order.ReadOrder(ctx, s, m.ID); err != nil || doc.TotalMinor != tt.stored {
						t.Errorf("stored total %d (%v), want %d", doc.TotalMinor, err, tt.stored)
					}
				}
				return
			}
			var fe *order.FieldError
			if r.Reason != idempotent.ReasonInvalidMessage || !errors.As(r.Err, &fe) || fe.Field != tt.field || !errors.Is(r.Err, order.ErrInvalid) {
				t.Errorf("%q %v, want %s on field %s", r.Reason, r.Err, idempotent.ReasonInvalidMessage, tt.field)
			}
			if !strings.Contains(r.Description, tt.field) || !strings.Contains(r.Description, strconv.FormatInt(safe, 10)) {
				t.Errorf("description %q does not name the field %s and the bound %d", r.Description, tt.field, int64(safe))
			}
			if r.Dependency {
				t.Error("counted as a dependency failure")
			}
			if n := len(s.Items()); n != before {
				t.Errorf("%d documents written", n-before)
			}
		})
	}
}

// TestClaimSequenceNumberIsBounded: a payment claim records the copy's
// broker sequence number only up to order.MaxSafeInteger; above it (a
// partitioned entity's numbers carry the partition in their top 16 bits)
// it records 0, unknown, which a float64 store cannot round into another
// copy's number.
func TestClaimSequenceNumberIsBounded(t *testing.T) {
	for _, tt := range []struct {
		seq, want int64
	}{
		{7, 7},
		{order.MaxSafeInteger, order.MaxSafeInteger},
		{order.MaxSafeInteger + 2, 0},
		{32 << 48, 0},
		{math.MaxInt64, 0},
	} {
		s := memstore.New("/orderId")
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(newGateway(), time.Minute, "w1"))
		m := delivery(validBody, tt.seq, 1)
		if r := p.Process(t.Context(), m); r.Outcome != idempotent.Created {
			t.Fatalf("sequence number %d: %v %s", tt.seq, r.Outcome, r.Description)
		}
		if rec := paymentRecord(t, s); rec.Claim.SequenceNumber != tt.want {
			t.Errorf("sequence number %d: the claim records %d, want %d", tt.seq, rec.Claim.SequenceNumber, tt.want)
		}
	}
}

// putRaw stores body as document id of partition pk, over any document
// there: what a store holds after someone else wrote it, or after a
// float64 store rounded a number in it.
func putRaw(t *testing.T, s *memstore.Store, pk, id, body string) {
	t.Helper()
	d := idempotent.Document{ID: id, Body: []byte(body)}
	if _, _, err := s.ReadDocument(t.Context(), pk, id); err == nil {
		if _, err := s.ReplaceDocument(t.Context(), pk, d, ""); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := s.CreateBatch(t.Context(), pk, []idempotent.Document{d}); err != nil {
		t.Fatal(err)
	}
}

// TestUnreadableStoredDocumentIsDeadLetteredAtOnce: a message whose order
// document, payment record or inbox marker is stored but cannot be decoded
// is Invalid at its first delivery with ReasonStoredDocumentUnreadable and
// a description that names the document and says what to do; it is not
// retried as a store error (every redelivery would read the same bytes, and
// the retries would count against the store's health).
func TestUnreadableStoredDocumentIsDeadLetteredAtOnce(t *testing.T) {
	// The order document as a worker without the bound left it on cosmium:
	// version math.MaxInt64 applied, stored rounded.
	rounded := strings.Replace(string(mustDocs(t)[0].Body), `"version":1`, `"version":9223372036854776000`, 1)
	tests := []struct {
		name  string
		setup func(t *testing.T, s *memstore.Store)
		run   func(t *testing.T, s *memstore.Store) idempotent.Result
		docID string
	}{
		{"status change, order version rounded", func(t *testing.T, s *memstore.Store) { putRaw(t, s, "ord-1", "ord-1", rounded) },
			func(t *testing.T, s *memstore.Store) idempotent.Result {
				return order.NewProcessor(s, fixedNow, order.WithDocuments(s)).Process(t.Context(), statusMsg(3, "shipped"))
			}, "ord-1"},
		{"status change redelivered, order version rounded", func(t *testing.T, s *memstore.Store) { putRaw(t, s, "ord-1", "ord-1", rounded) },
			func(t *testing.T, s *memstore.Store) idempotent.Result {
				m := statusMsg(3, "shipped")
				m.DeliveryCount = 2
				return order.NewProcessor(s, fixedNow, order.WithDocuments(s)).Process(t.Context(), m)
			}, "ord-1"},
		{"order redelivered, order document not an order", func(t *testing.T, s *memstore.Store) {
			putRaw(t, s, "ord-1", "ord-1", `{"id":"ord-1","orderId":"ord-1","type":"note"}`)
		}, func(t *testing.T, s *memstore.Store) idempotent.Result {
			m := msg(validBody)
			m.DeliveryCount = 2
			return order.NewProcessor(s, fixedNow).Process(t.Context(), m)
		}, "ord-1"},
		{"order redelivered, order document undecodable", func(t *testing.T, s *memstore.Store) {
			putRaw(t, s, "ord-1", "ord-1", `{"id":"ord-1","orderId":"ord-1","type":"order","totalMinor":"4498"}`)
		}, func(t *testing.T, s *memstore.Store) idempotent.Result {
			m := msg(validBody)
			m.DeliveryCount = 2
			return order.NewProcessor(s, fixedNow).Process(t.Context(), m)
		}, "ord-1"},
		{"order redelivered, payment record undecodable", func(t *testing.T, s *memstore.Store) {
			p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(newGateway(), time.Minute, "w1"))
			if r := p.Process(t.Context(), msg(validBody)); r.Outcome != idempotent.Created {
				t.Fatal(r)
			}
			putRaw(t, s, "ord-1", order.PaymentRecordID("ord-1"), `{"id":"Payment:ord-1","orderId":"ord-1","type":"payment","epoch":9223372036854776000}`)
		}, func(t *testing.T, s *memstore.Store) idempotent.Result {
			m := msg(validBody)
			m.DeliveryCount = 2
			return order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(newGateway(), time.Minute, "w1")).Process(t.Context(), m)
		}, order.PaymentRecordID("ord-1")},
		{"event, inbox marker undecodable", func(t *testing.T, s *memstore.Store) {
			putRaw(t, s, "ord-7", order.InboxMarkerID("loyalty", order.EventID("ord-7")), `{"id":"inbox:loyalty:OrderAccepted:ord-7","orderId":"ord-7","processedAt":5}`)
		}, func(t *testing.T, s *memstore.Store) idempotent.Result {
			c := &order.InboxConsumer{Name: "loyalty", Store: s, MarkerTTL: time.Hour, Now: fixedNow}
			return c.Process(t.Context(), eventMsg("ord-7", eventBody(t, testOrder("ord-7"))))
		}, order.InboxMarkerID("loyalty", order.EventID("ord-7"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := memstore.New("/orderId")
			tt.setup(t, s)
			r := tt.run(t, s)
			if r.Outcome != idempotent.Invalid || r.Reason != order.ReasonStoredDocumentUnreadable {
				t.Fatalf("%v %q (%s), want Invalid %s", r.Outcome, r.Reason, r.Description, order.ReasonStoredDocumentUnreadable)
			}
			if !errors.Is(r.Err, order.ErrStoredDocumentUnreadable) || r.Dependency {
				t.Errorf("error %v (dependency %v), want one matching ErrStoredDocumentUnreadable, not a dependency failure", r.Err, r.Dependency)
			}
			for _, want := range []string{strconv.Quote(tt.docID), "Repair the document", "orderctl dlq resubmit"} {
				if !strings.Contains(r.Description, want) {
					t.Errorf("description %q does not contain %q", r.Description, want)
				}
			}
			if len(r.Description) > 1024 {
				t.Errorf("description of %d characters: the worker truncates it at 1024", len(r.Description))
			}
		})
	}
}

// mustDocs returns the documents an accepted validBody writes.
func mustDocs(t *testing.T) []idempotent.Document {
	t.Helper()
	o, err := order.Decode([]byte(validBody))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := order.NewWrite(o, o.OrderID, o.RequestHash(), fixedNow()).Documents()
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestStoredDocumentError: ReadOrder reports an undecodable order document
// as a *StoredDocumentError naming it, matching
// ErrStoredDocumentUnreadable; a missing one still matches ErrNotFound.
func TestStoredDocumentError(t *testing.T) {
	s := memstore.New("/orderId")
	putRaw(t, s, "ord-1", "ord-1", `{"id":"ord-1","orderId":"ord-1","type":"order","version":9223372036854776000}`)
	_, err := order.ReadOrder(t.Context(), s, "ord-1")
	var de *order.StoredDocumentError
	if !errors.As(err, &de) || de.ID != "ord-1" || de.PartitionKey != "ord-1" || !errors.Is(err, order.ErrStoredDocumentUnreadable) {
		t.Errorf("ReadOrder = %v, want a *StoredDocumentError for ord-1", err)
	}
	if _, err := order.ReadOrder(context.Background(), s, "ord-2"); !errors.Is(err, idempotent.ErrNotFound) || errors.Is(err, order.ErrStoredDocumentUnreadable) {
		t.Errorf("ReadOrder of a missing order = %v, want ErrNotFound", err)
	}
}
