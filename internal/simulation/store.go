package simulation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// Store is the store a consumer under test gets: the order writes and the
// document-level calls of status changes, payment records and inbox
// markers, all in one Cosmos DB container, as the project's stores provide.
type Store interface {
	order.Store
	order.DocumentStore
}

// faultStore is a Store that injects the plan's store faults around the
// in-memory Cosmos DB model:
//
//   - Transient: a create, read, batch or replace fails with a throttling or
//     unavailability error (matching order.ErrTransient) before it touches
//     the store;
//   - Ambiguous: an order's create (or an inbox consumer's batch) commits,
//     then reports a timeout (matching order.ErrTransient), as when the
//     response to a committed write is lost;
//   - Outage: every call for the order fails as Transient does;
//   - PaymentCrash: the delivery marked by the payment gateway dies at its
//     next payment record write, which never happens (see faultGateway).
//
// It tells the tracker which delivery committed each order (or, for an
// inbox consumer, each marker). It is safe for concurrent use.
type faultStore struct {
	mem   *memstore.Store
	plan  *plan
	tr    *tracker
	inbox bool // the store of an inbox consumer: its batches are its writes

	mu       sync.Mutex
	creates  map[string]uint64 // create calls so far, by order id
	reads    map[string]uint64 // read calls so far, by order id
	docCalls map[string]uint64 // document calls so far, by order id
	outages  map[string]bool   // orders under a permanent outage
}

var _ Store = (*faultStore)(nil)

func newFaultStore(mem *memstore.Store, p *plan, tr *tracker, outages map[string]bool, inbox bool) *faultStore {
	return &faultStore{mem: mem, plan: p, tr: tr, inbox: inbox, outages: outages,
		creates: make(map[string]uint64), reads: make(map[string]uint64), docCalls: make(map[string]uint64)}
}

// errThrottled and errUnavailable are the transient failures the store
// reports; both match order.ErrTransient, as the Cosmos DB adapter's do.
var (
	errThrottled   = fmt.Errorf("simulated 429 Too Many Requests: %w", order.ErrTransient)
	errUnavailable = fmt.Errorf("simulated 503 Service Unavailable: %w", order.ErrTransient)
	errTimedOut    = fmt.Errorf("simulated 408 Request Timeout after the write committed: %w", order.ErrTransient)
)

// next returns the number of the call being made for id, from 1, and
// whether id is under an outage.
func (s *faultStore) next(calls map[string]uint64, id string) (n uint64, outage bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls[id]++
	return calls[id], s.outages[id]
}

// CreateOrder implements order.Store.
func (s *faultStore) CreateOrder(ctx context.Context, w order.Write) error {
	id := w.PartitionKey()
	n, outage := s.next(s.creates, id)
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return fmt.Errorf("create order %q: %w", id, errUnavailable)
	case s.plan.inject(faultTransientCreate, id, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return fmt.Errorf("create order %q: %w", id, errThrottled)
	}
	if err := s.mem.CreateOrder(ctx, w); err != nil {
		return err
	}
	ambiguous := s.plan.inject(faultAmbiguous, id, n, 0)
	s.tr.wrote(deliveryFrom(ctx), id, ambiguous)
	if ambiguous {
		return fmt.Errorf("create order %q: %w", id, errTimedOut)
	}
	return nil
}

// ReadOrder implements order.Store.
func (s *faultStore) ReadOrder(ctx context.Context, orderID string) (order.OrderDocument, error) {
	n, outage := s.next(s.reads, orderID)
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return order.OrderDocument{}, fmt.Errorf("read order %q: %w", orderID, errUnavailable)
	case s.plan.inject(faultTransientRead, orderID, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return order.OrderDocument{}, fmt.Errorf("read order %q: %w", orderID, errThrottled)
	}
	return s.mem.ReadOrder(ctx, orderID)
}

// fail returns the injected failure of document call n for order id, if any.
func (s *faultStore) fail(op, id string, n uint64, outage bool) error {
	switch {
	case outage:
		s.tr.count(func(c *FaultCounts) { c.OutageErrors++ })
		return fmt.Errorf("%s in partition %q: %w", op, id, errUnavailable)
	case s.plan.inject(faultTransientDocument, id, n, 0):
		s.tr.count(func(c *FaultCounts) { c.Transient++ })
		return fmt.Errorf("%s in partition %q: %w", op, id, errThrottled)
	}
	return nil
}

// ReadDocument implements order.DocumentStore.
func (s *faultStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("read "+id, pk, n, outage); err != nil {
		return nil, "", err
	}
	return s.mem.ReadDocument(ctx, pk, id)
}

// CreateDocuments implements order.DocumentStore.
func (s *faultStore) CreateDocuments(ctx context.Context, pk string, docs []order.Document) error {
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("create batch", pk, n, outage); err != nil {
		return err
	}
	if err := s.mem.CreateDocuments(ctx, pk, docs); err != nil {
		return err
	}
	if !s.inbox {
		return nil
	}
	ambiguous := s.plan.inject(faultAmbiguous, pk, n, 1)
	s.tr.wrote(deliveryFrom(ctx), pk, ambiguous)
	if ambiguous {
		return fmt.Errorf("create batch in partition %q: %w", pk, errTimedOut)
	}
	return nil
}

// errPaymentCrash is what the payment record write of a delivery that
// "died" returns: in a real crash the call would never be made, and the
// store sees the same.
var errPaymentCrash = errors.New("simulated crash: the worker died after the capture call, before marking the payment record completed")

// ReplaceDocument implements order.DocumentStore.
func (s *faultStore) ReplaceDocument(ctx context.Context, pk string, d order.Document, ifMatch string) (string, error) {
	if dl := deliveryFrom(ctx); dl != nil && d.ID == order.PaymentRecordID(pk) && s.tr.diesAtPaymentWrite(dl) {
		return "", errPaymentCrash
	}
	n, outage := s.next(s.docCalls, pk)
	if err := s.fail("replace "+d.ID, pk, n, outage); err != nil {
		return "", err
	}
	return s.mem.ReplaceDocument(ctx, pk, d, ifMatch)
}
