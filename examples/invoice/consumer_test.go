package invoice_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// body returns an invoice message for id; with no changes it is the
// invoice every test starts from, and each change replaces the text of a
// field ("amountMinor": "2500").
func body(id string, changes ...string) string {
	fields := [][2]string{
		{"invoiceId", `"` + id + `"`},
		{"customerId", `"cust-42"`},
		{"currency", `"EUR"`},
		{"amountMinor", "1999"},
		{"issuedAt", `"2026-11-30T10:00:00Z"`},
	}
	for i := 0; i+1 < len(changes); i += 2 {
		for j := range fields {
			if fields[j][0] == changes[i] {
				fields[j][1] = changes[i+1]
			}
		}
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		if f[1] != "" { // an empty value removes the field
			parts = append(parts, fmt.Sprintf("%q: %s", f[0], f[1]))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// hashOf returns the request hash of a valid invoice message.
func hashOf(t *testing.T, b string) string {
	t.Helper()
	v, err := invoice.Kind{}.Decode([]byte(b))
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return invoice.Kind{}.RequestHash(v)
}

// delivery is one delivery of a message and what it must decide and cost.
type delivery struct {
	body  string // %s is the case's invoice id
	msgID string // the MessageId; "" is the case's invoice id
	count uint32 // DeliveryCount
	want  idempotent.Outcome
	// reason is the Result's Reason.
	reason string
	// creates and reads are the round trips it must cost.
	creates, reads int64
}

// TestConsumer: every decision of the pattern, for invoices, on the
// in-memory model and on a real cosmosstore against cosmium, with the round
// trips each delivery costs.
func TestConsumer(t *testing.T) {
	valid := body("%s")
	reordered := `{"issuedAt":"2026-11-30T11:00:00+01:00",  "amountMinor":1999,"currency":"EUR","customerId":"cust-42","invoiceId":"%s"}`
	created := delivery{body: valid, count: 1, want: idempotent.Created, creates: 1}
	tests := []struct {
		name       string
		deliveries []delivery
	}{
		{"created", []delivery{created}},
		{"duplicate on a redelivery: reads first, creates nothing", []delivery{created,
			{body: valid, count: 2, want: idempotent.Duplicate, reads: 1}}},
		{"duplicate on a first-delivery resend: the create conflicts, a read compares", []delivery{created,
			{body: valid, count: 1, want: idempotent.Duplicate, creates: 1, reads: 1}}},
		{"duplicate in other JSON: key order, white space and time zone do not count", []delivery{created,
			{body: reordered, count: 1, want: idempotent.Duplicate, creates: 1, reads: 1}}},
		{"id reused with another amount, on a redelivery", []delivery{created,
			{body: body("%s", "amountMinor", "2500"), count: 2, want: idempotent.Mismatch, reason: invoice.ReasonInvoiceIDReused, reads: 1}}},
		{"id reused for another customer, on a first delivery", []delivery{created,
			{body: body("%s", "customerId", `"cust-7"`), count: 1, want: idempotent.Mismatch, reason: invoice.ReasonInvoiceIDReused, creates: 1, reads: 1}}},
		{"id reused, then the original again: still a duplicate", []delivery{created,
			{body: body("%s", "issuedAt", `"2026-12-01T10:00:00Z"`), count: 1, want: idempotent.Mismatch, reason: invoice.ReasonInvoiceIDReused, creates: 1, reads: 1},
			{body: valid, count: 3, want: idempotent.Duplicate, reads: 1}}},
		{"invalid JSON", []delivery{{body: `{"invoiceId": "%s",`, count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"missing field", []delivery{{body: body("%s", "customerId", ""), count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"unknown field", []delivery{{body: strings.Replace(valid, "{", `{"discount": 5, `, 1), count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"data after the object", []delivery{{body: valid + " {}", count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"a field of the wrong type", []delivery{{body: body("%s", "amountMinor", `"19.99"`), count: 1, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
		{"MessageId is not the invoiceId", []delivery{{body: valid, msgID: "inv-other", count: 1, want: idempotent.Invalid, reason: idempotent.ReasonMessageIDMismatch}}},
		{"invalid on a redelivery too, without a round trip", []delivery{{body: body("%s", "currency", `"eur"`), count: 5, want: idempotent.Invalid, reason: idempotent.ReasonInvalidMessage}}},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("inv-consumer-%02d", i)
					fake := &fakeStore{Store: b.open(t)}
					c := invoice.NewConsumer(fake)
					for n, d := range tt.deliveries {
						msgBody := strings.ReplaceAll(d.body, "%s", id)
						m := idempotent.Message{ID: cmp.Or(d.msgID, id), Body: []byte(msgBody), DeliveryCount: d.count}
						r := c.Process(t.Context(), m)
						creates, reads := fake.roundTrips()
						if r.Outcome != d.want || r.Reason != d.reason {
							t.Fatalf("delivery %d: %v %q (%s), want %v %q", n+1, r.Outcome, r.Reason, r.Description, d.want, d.reason)
						}
						if creates != d.creates || reads != d.reads {
							t.Errorf("delivery %d: %d creates and %d reads, want %d and %d", n+1, creates, reads, d.creates, d.reads)
						}
						if r.Outcome == idempotent.Mismatch {
							stored, this := hashOf(t, strings.ReplaceAll(valid, "%s", id)), hashOf(t, msgBody)
							if !strings.Contains(r.Description, stored) || !strings.Contains(r.Description, this) {
								t.Errorf("delivery %d: Mismatch description %q lacks the stored hash %s or this message's %s", n+1, r.Description, stored, this)
							}
						}
					}
					checkStored(t, fake.Store, id, tt.deliveries[0].want == idempotent.Created, strings.ReplaceAll(valid, "%s", id))
				})
			}
		})
	}
}

// checkStored checks that id has its marker, holding the hash of the
// creating message, and its InvoiceIssued event, or neither.
func checkStored(t *testing.T, s idempotent.Store, id string, want bool, creating string) {
	t.Helper()
	for _, docID := range []string{id, invoice.EventID(id)} {
		b, _, err := s.ReadDocument(context.Background(), id, docID)
		switch {
		case !want:
			if !errors.Is(err, idempotent.ErrNotFound) {
				t.Errorf("read %s = %s, %v; want ErrNotFound: nothing is written", docID, b, err)
			}
			continue
		case err != nil:
			t.Errorf("read %s: %v", docID, err)
			continue
		}
		got, err := idempotent.MarkerHash(b)
		if err != nil || got != hashOf(t, creating) {
			t.Errorf("%s holds request hash %q (%v), want the creating message's %s", docID, got, err, hashOf(t, creating))
		}
	}
}

// TestConsumer_StoreFailures: a store that fails in a way that may pass is
// a retry counted as a dependency failure; a store that rejects the write
// for the message's content makes the message Invalid at once. Once the
// store answers, the redelivery decides as if nothing had happened.
func TestConsumer_StoreFailures(t *testing.T) {
	transient := fmt.Errorf("503 Service Unavailable: %w", idempotent.ErrTransient)
	rejected := fmt.Errorf("413 Request Entity Too Large: %w", idempotent.ErrRejected)
	forbidden := errors.New("403 Forbidden: the identity may not write the container")
	tests := []struct {
		name               string
		createFirst        bool // the invoice is stored before the failing delivery
		createErr, readErr error
		count              uint32
		want               idempotent.Outcome
		reason             string
		dependency         bool
		afterwards         idempotent.Outcome // the next delivery, the store healthy again
		creates, reads     int64
	}{
		{"the create fails transiently", false, transient, nil, 1, idempotent.Transient, idempotent.ReasonStoreUnavailable, true, idempotent.Created, 1, 0},
		{"the read-first fails transiently", false, nil, transient, 2, idempotent.Transient, idempotent.ReasonStoreUnavailable, true, idempotent.Created, 0, 1},
		{"the read after a conflict fails transiently", true, nil, transient, 1, idempotent.Transient, idempotent.ReasonStoreUnavailable, true, idempotent.Duplicate, 1, 1},
		{"the store refuses the identity", false, forbidden, nil, 1, idempotent.Transient, idempotent.ReasonStoreError, true, idempotent.Created, 1, 0},
		{"the store rejects the content", false, rejected, nil, 1, idempotent.Invalid, idempotent.ReasonStoreRejected, false, idempotent.Created, 1, 0},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("inv-failure-%02d", i)
					m := idempotent.Message{ID: id, Body: []byte(body(id)), DeliveryCount: tt.count}
					fake := &fakeStore{Store: b.open(t)}
					c := invoice.NewConsumer(fake)
					if tt.createFirst {
						if r := c.Process(t.Context(), idempotent.Message{ID: id, Body: m.Body, DeliveryCount: 1}); r.Outcome != idempotent.Created {
							t.Fatalf("setup: %v %s", r.Outcome, r.Description)
						}
						fake.roundTrips()
					}
					fake.createErr, fake.readErr = tt.createErr, tt.readErr
					r := c.Process(t.Context(), m)
					if r.Outcome != tt.want || r.Reason != tt.reason || r.Dependency != tt.dependency || r.DependencyFailed() != tt.dependency {
						t.Errorf("%v %q dependency %v (%s), want %v %q dependency %v", r.Outcome, r.Reason, r.Dependency, r.Description, tt.want, tt.reason, tt.dependency)
					}
					if r.Key != id || r.Err == nil || !errors.Is(r.Err, cmp.Or(tt.createErr, tt.readErr)) {
						t.Errorf("Key %q, Err %v; want %q and the store's error", r.Key, r.Err, id)
					}
					if creates, reads := fake.roundTrips(); creates != tt.creates || reads != tt.reads {
						t.Errorf("%d creates and %d reads, want %d and %d", creates, reads, tt.creates, tt.reads)
					}
					fake.createErr, fake.readErr = nil, nil
					m.DeliveryCount++
					if r := c.Process(t.Context(), m); r.Outcome != tt.afterwards {
						t.Errorf("the next delivery, the store healthy: %v %s, want %v", r.Outcome, r.Description, tt.afterwards)
					}
					checkStored(t, fake.Store, id, true, body(id))
				})
			}
		})
	}
}

// TestConsumer_FactCache: with the fact cache, a duplicate or an id reused
// the worker has seen costs no round trip on a redelivery, and a
// first-delivery resend only its create; what the cache learns from a read
// counts too.
func TestConsumer_FactCache(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			id := "inv-cache"
			fake := &fakeStore{Store: b.open(t)}
			cache := idempotent.NewFactCache(64)
			c := invoice.NewConsumer(fake, idempotent.WithLookup(cache.Wrap))
			other := body(id, "amountMinor", "2500")
			for n, d := range []delivery{
				{body: body(id), count: 1, want: idempotent.Created, creates: 1},
				{body: body(id), count: 2, want: idempotent.Duplicate},
				{body: other, count: 2, want: idempotent.Mismatch, reason: invoice.ReasonInvoiceIDReused},
				{body: body(id), count: 1, want: idempotent.Duplicate, creates: 1},
			} {
				r := c.Process(t.Context(), idempotent.Message{ID: id, Body: []byte(d.body), DeliveryCount: d.count})
				creates, reads := fake.roundTrips()
				if r.Outcome != d.want || r.Reason != d.reason || creates != d.creates || reads != d.reads {
					t.Errorf("delivery %d: %v %q, %d creates, %d reads; want %v %q, %d, %d",
						n+1, r.Outcome, r.Reason, creates, reads, d.want, d.reason, d.creates, d.reads)
				}
				if r.Outcome == idempotent.Mismatch && (!strings.Contains(r.Description, hashOf(t, body(id))) || !strings.Contains(r.Description, hashOf(t, other))) {
					t.Errorf("delivery %d: Mismatch description %q lacks a hash", n+1, r.Description)
				}
			}
			// Another worker, its cache empty, learns the hash from its
			// first read.
			c2 := invoice.NewConsumer(fake, idempotent.WithLookup(idempotent.NewFactCache(64).Wrap))
			for n, wantReads := range []int64{1, 0, 0} {
				r := c2.Process(t.Context(), idempotent.Message{ID: id, Body: []byte(body(id)), DeliveryCount: 2})
				if creates, reads := fake.roundTrips(); r.Outcome != idempotent.Duplicate || creates != 0 || reads != wantReads {
					t.Errorf("second worker, redelivery %d: %v, %d creates, %d reads; want duplicate, 0, %d", n+1, r.Outcome, creates, reads, wantReads)
				}
			}
			if s := cache.Stats(); s.Entries != 1 || s.Hits == 0 {
				t.Errorf("cache stats %+v, want the one invoice and hits", s)
			}
		})
	}
}

// TestConsumer_CopyShare: with the adaptive read-first policy and the fact
// cache, a stream of first-delivery copies of known invoices turns reading
// first on, after which each costs no round trip, and a new invoice costs
// its read and its create; decisions never change.
func TestConsumer_CopyShare(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			fake := &fakeStore{Store: b.open(t)}
			var policy idempotent.CopyShare
			c := invoice.NewConsumer(fake, idempotent.WithLookup(idempotent.NewFactCache(256).Wrap), idempotent.WithReadFirst(&policy))
			const n = 40
			msg := func(i int) idempotent.Message {
				id := fmt.Sprintf("inv-share-%03d", i)
				return idempotent.Message{ID: id, Body: []byte(body(id)), DeliveryCount: 1}
			}
			for i := range n {
				if r := c.Process(t.Context(), msg(i)); r.Outcome != idempotent.Created {
					t.Fatalf("invoice %d: %v %s", i, r.Outcome, r.Description)
				}
			}
			if creates, reads := fake.roundTrips(); creates != n || reads != 0 {
				t.Errorf("%d new invoices: %d creates, %d reads; want one create each, creating first", n, creates, reads)
			}
			// The producer sends every invoice again, as new copies.
			var costs []int64
			for i := range n {
				if r := c.Process(t.Context(), msg(i)); r.Outcome != idempotent.Duplicate {
					t.Fatalf("copy of invoice %d: %v %s", i, r.Outcome, r.Description)
				}
				creates, reads := fake.roundTrips()
				costs = append(costs, creates+reads)
			}
			if costs[0] != 1 || costs[n-1] != 0 {
				t.Errorf("round trips of the copies = %v; want 1 (create, conflict, cache) at first and 0 (cache) once reading first", costs)
			}
			if share, readFirst := policy.Estimate(); !readFirst {
				t.Errorf("after %d copies the estimate is %.2f and first deliveries do not read first", n, share)
			}
			if r := c.Process(t.Context(), msg(n)); r.Outcome != idempotent.Created {
				t.Fatalf("a new invoice while reading first: %v %s", r.Outcome, r.Description)
			}
			if creates, reads := fake.roundTrips(); creates != 1 || reads != 1 {
				t.Errorf("a new invoice while reading first: %d creates, %d reads; want 1 and 1", creates, reads)
			}
		})
	}
}

// TestConsumer_Concurrent: 32 concurrent deliveries of one invoice, first
// deliveries and redeliveries mixed, decide one Created and 31 Duplicates,
// and write the marker and its event once.
//
// On cosmium the batch is not atomic (see package cosmiumtest), so two
// batches can each create one of the two documents and both see a
// conflict: there, at most one is Created and every other a Duplicate.
// Exactly one holds in Cosmos DB and in memstore.
func TestConsumer_Concurrent_ExactlyOneCreated_AtMostOneOnCosmiumWhoseBatchIsNotAtomic(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			const id, n = "inv-race", 32
			s := b.open(t)
			c := invoice.NewConsumer(s)
			results := make([]idempotent.Result, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() {
					<-start
					results[i] = c.Process(t.Context(), idempotent.Message{ID: id, Body: []byte(body(id)), DeliveryCount: uint32(1 + i%2)})
				})
			}
			close(start)
			wg.Wait()
			count := map[idempotent.Outcome]int{}
			for _, r := range results {
				count[r.Outcome]++
				if r.Outcome != idempotent.Created && r.Outcome != idempotent.Duplicate {
					t.Errorf("a delivery decided %v %q: %s", r.Outcome, r.Reason, r.Description)
				}
			}
			if count[idempotent.Created] > 1 || b.atomicBatch && count[idempotent.Created] != 1 {
				t.Errorf("outcomes %v, want exactly one created (at most one on cosmium)", count)
			}
			if count[idempotent.Created] == 0 {
				t.Logf("no delivery created: cosmium's non-atomic batch let two batches each write one document")
			}
			checkStored(t, s, id, true, body(id))
		})
	}
}
