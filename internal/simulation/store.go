package simulation

import (
	"context"
	"fmt"
	"sync"

	"github.com/idempotent-consumer/sbcosmos/memstore"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// faultStore is an order.Store that injects the plan's store faults around
// the in-memory Cosmos DB model:
//
//   - Transient: a create or read fails with a throttling or unavailability
//     error (matching order.ErrTransient) before it touches the store;
//   - Ambiguous: a create commits, then reports a timeout (matching
//     order.ErrTransient), as when the response to a committed write is lost;
//   - Outage: every call for the order fails as Transient does.
//
// It tells the tracker which delivery committed each order. It is safe for
// concurrent use.
type faultStore struct {
	mem  *memstore.Store
	plan *plan
	tr   *tracker

	mu      sync.Mutex
	creates map[string]uint64 // create calls so far, by order id
	reads   map[string]uint64 // read calls so far, by order id
	outages map[string]bool   // orders under a permanent outage
}

var _ order.Store = (*faultStore)(nil)

func newFaultStore(mem *memstore.Store, p *plan, tr *tracker, outages map[string]bool) *faultStore {
	return &faultStore{mem: mem, plan: p, tr: tr, creates: make(map[string]uint64), reads: make(map[string]uint64), outages: outages}
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
