package order_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// countingStore is a memstore that counts the calls the processor makes,
// and can make the next batch commit and then report a timeout, as
// when the response of a committed write is lost.
type countingStore struct {
	*memstore.Store
	mu        sync.Mutex
	calls     int
	ambiguous bool // the next batch commits, then fails
}

func (s *countingStore) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }
func (s *countingStore) inc()       { s.mu.Lock(); s.calls++; s.mu.Unlock() }

func (s *countingStore) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	s.inc()
	e, err := s.Store.CreateBatch(ctx, pk, docs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.ambiguous {
		s.ambiguous = false
		return nil, fmt.Errorf("408 timeout after the write committed: %w", idempotent.ErrTransient)
	}
	return e, err
}

func (s *countingStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	s.inc()
	return s.Store.ReadDocument(ctx, pk, id)
}

func (s *countingStore) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	s.inc()
	return s.Store.ReplaceDocument(ctx, pk, d, ifMatch)
}

// TestFactCache: a delivery of an order whose facts the processor learned
// from the store is decided without a store call, Duplicate or Mismatch (with
// the stored hash); what it learned from nothing the store confirmed (an
// ambiguous create) it does not know; with payments, only a completed
// payment lets it skip the store.
func TestFactCache(t *testing.T) {
	ctx := t.Context()
	changed := strings.Replace(validBody, `"cust-1"`, `"cust-2"`, 1)
	stored := validOrder()

	t.Run("hot duplicate and mismatch cost no call", func(t *testing.T) {
		s := &countingStore{Store: memstore.New("/orderId")}
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
		if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
			t.Fatal(r)
		}
		before := s.count()
		if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Duplicate {
			t.Errorf("duplicate: %v %s", r.Outcome, r.Description)
		}
		r := p.Process(ctx, msg(changed))
		if r.Outcome != idempotent.Mismatch || r.Reason != order.ReasonOrderIDReused || !strings.Contains(r.Description, stored.RequestHash()) {
			t.Errorf("reused id: %v %q %s, want Mismatch OrderIdReused naming the stored hash %s", r.Outcome, r.Reason, r.Description, stored.RequestHash())
		}
		if n := s.count() - before; n != 0 {
			t.Errorf("%d store calls, want 0", n)
		}
		if st := p.CacheStats(); st.Hits != 2 || st.Misses != 1 || st.Entries != 1 || st.Capacity != order.DefaultFactCacheSize || st.HitRate() != 2.0/3 {
			t.Errorf("CacheStats = %+v (hit rate %v), want 2 hits, 1 miss, 1 entry of %d", st, st.HitRate(), order.DefaultFactCacheSize)
		}
	})

	t.Run("a read teaches it too", func(t *testing.T) {
		s := &countingStore{Store: memstore.New("/orderId")}
		if r := order.NewProcessor(s, fixedNow).Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
			t.Fatal(r)
		}
		p := order.NewProcessor(s, fixedNow)
		if r := p.Process(ctx, msg(changed)); r.Outcome != idempotent.Mismatch {
			t.Fatalf("cold reused id: %v", r.Outcome)
		}
		before := s.count()
		if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Duplicate || s.count() != before {
			t.Errorf("hot duplicate after a read: %v with %d calls, want Duplicate with none", r.Outcome, s.count()-before)
		}
	})

	t.Run("an ambiguous create teaches it nothing", func(t *testing.T) {
		s := &countingStore{Store: memstore.New("/orderId"), ambiguous: true}
		p := order.NewProcessor(s, fixedNow)
		if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Transient {
			t.Fatalf("ambiguous create: %v", r.Outcome)
		}
		before := s.count()
		if r := p.Process(ctx, idempotent.Message{ID: "ord-1", Body: []byte(validBody), DeliveryCount: 2}); r.Outcome != idempotent.Duplicate || s.count()-before != 1 {
			t.Errorf("redelivery: %v with %d calls, want Duplicate from one read", r.Outcome, s.count()-before)
		}
	})

	t.Run("off", func(t *testing.T) {
		s := &countingStore{Store: memstore.New("/orderId")}
		p := order.NewProcessor(s, fixedNow, order.WithFactCache(0))
		p.Process(ctx, msg(validBody))
		before := s.count()
		if r := p.Process(ctx, msg(validBody)); r.Outcome != idempotent.Duplicate || s.count() == before {
			t.Errorf("without a cache: %v with %d calls, want Duplicate from the store", r.Outcome, s.count()-before)
		}
		if st := p.CacheStats(); st != (idempotent.CacheStats{}) {
			t.Errorf("CacheStats = %+v, want zero", st)
		}
	})

	t.Run("payments: only a completed payment skips the store", func(t *testing.T) {
		s := &countingStore{Store: memstore.New("/orderId")}
		g := newGateway()
		var fail bool
		g.fail = func(int) (error, bool) {
			if fail {
				return fmt.Errorf("503: %w", idempotent.ErrTransient), false
			}
			return nil, true
		}
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithPayments(g, time.Minute, "w1"))
		fail = true
		if r := p.Process(ctx, delivery(validBody, 7, 1)); r.Outcome != idempotent.Transient || r.Reason != order.ReasonPaymentUnavailable {
			t.Fatalf("capture down: %v %q", r.Outcome, r.Reason)
		}
		// The order is known, the payment not: the record is read (not the
		// order) and the capture completed.
		fail = false
		before := s.count()
		if r := p.Process(ctx, delivery(validBody, 7, 2)); r.Outcome != idempotent.Duplicate || g.total() != 1 {
			t.Fatalf("retry: %v %s, %d charges", r.Outcome, r.Description, g.total())
		}
		if n := s.count() - before; n != 3 { // read the record, take the claim over, mark it completed
			t.Errorf("retry: %d store calls, want 3", n)
		}
		before = s.count()
		if r := p.Process(ctx, delivery(validBody, 8, 1)); r.Outcome != idempotent.Duplicate || s.count() != before || g.calls != 2 {
			t.Errorf("after completion: %v with %d store calls and %d captures, want Duplicate with no call", r.Outcome, s.count()-before, g.calls)
		}
	})
}

// TestFactCache_Bounded: the cache never holds more orders than its size,
// and what it evicted is decided by the store again, correctly.
func TestFactCache_Bounded(t *testing.T) {
	ctx := t.Context()
	s := &countingStore{Store: memstore.New("/orderId")}
	p := order.NewProcessor(s, fixedNow, order.WithFactCache(3))
	bodies := make([]string, 10)
	for i := range bodies {
		id := fmt.Sprintf("ord-%d", i)
		bodies[i] = strings.Replace(validBody, `"ord-1"`, `"`+id+`"`, 1)
		if r := p.Process(ctx, idempotent.Message{ID: id, Body: []byte(bodies[i]), DeliveryCount: 1}); r.Outcome != idempotent.Created {
			t.Fatal(r)
		}
		if st := p.CacheStats(); st.Entries > 3 {
			t.Fatalf("%d entries, bound 3", st.Entries)
		}
	}
	// The last three are remembered; the others were evicted and are read.
	for _, i := range []int{9, 8, 7, 0, 1, 2, 3, 4, 5, 6} {
		id := fmt.Sprintf("ord-%d", i)
		calls := s.count()
		if r := p.Process(ctx, idempotent.Message{ID: id, Body: []byte(bodies[i]), DeliveryCount: 2}); r.Outcome != idempotent.Duplicate {
			t.Errorf("%s: %v", id, r.Outcome)
		}
		if want := map[bool]int{true: 0, false: 1}[i >= 7]; s.count()-calls != want {
			t.Errorf("%s: %d store calls, want %d", id, s.count()-calls, want)
		}
	}
	if st := p.CacheStats(); st.Entries != 3 || st.Hits != 3 || st.Misses != 10+7 {
		t.Errorf("CacheStats = %+v, want 3 entries, 3 hits and 17 misses", st)
	}
}

// BenchmarkFactCache_Memory reports the heap the fact cache takes per
// remembered order (order ids of 12 characters), as bytes/entry.
func BenchmarkFactCache_Memory(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = []byte(strings.Replace(validBody, `"ord-1"`, fmt.Sprintf(`"ord-%08d"`, i), 1))
	}
	b.ReportAllocs()
	var perEntry float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := order.NewProcessor(nopStore{}, fixedNow, order.WithFactCache(n))
		for i := range bodies {
			if r := p.Process(ctx, idempotent.Message{ID: fmt.Sprintf("ord-%08d", i), Body: bodies[i], DeliveryCount: 1}); r.Outcome != idempotent.Created {
				b.Fatal(r)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(p)
	}
	b.ReportMetric(perEntry, "bytes/entry")
}

// nopStore accepts every write and holds nothing: the processor's own cost,
// without a store's.
type nopStore struct{}

// CreateBatch writes nothing (the core's consumer encodes the documents
// before it calls it, as for the project's stores).
func (nopStore) CreateBatch(_ context.Context, _ string, docs []idempotent.Document) ([]string, error) {
	return make([]string, len(docs)), nil
}
func (nopStore) ReadDocument(context.Context, string, string) ([]byte, string, error) {
	return nil, "", idempotent.ErrNotFound
}

func (s *countingStore) PatchDocument(ctx context.Context, pk, id string, p idempotent.Patch) (string, error) {
	s.inc()
	return s.Store.PatchDocument(ctx, pk, id, p)
}

// TestFactCache_DeletedOrderDocument pins the documented decision: an
// operator who deletes an accepted order's document (out of contract) gets
// Duplicate from a worker that remembers the order, on a first delivery and
// on a redelivery, and OrderDocumentMissing from one that does not, on a
// redelivery (a first delivery is retried: its reads may have lagged).
func TestFactCache_DeletedOrderDocument(t *testing.T) {
	ctx := t.Context()
	s := memstore.New("/orderId")
	remembers := order.NewProcessor(s, fixedNow)
	if r := remembers.Process(ctx, msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	if !s.Delete("ord-1", "ord-1") {
		t.Fatal("no order document to delete")
	}
	for _, dc := range []uint32{1, 2} {
		m := msg(validBody)
		m.DeliveryCount = dc
		if r := remembers.Process(ctx, m); r.Outcome != idempotent.Duplicate {
			t.Errorf("delivery count %d, remembered: %v %q, want Duplicate", dc, r.Outcome, r.Reason)
		}
		want, reason := idempotent.Invalid, order.ReasonOrderDocumentMissing
		if dc == 1 { // may be a read that lagged: a redelivery decides
			want, reason = idempotent.Transient, idempotent.ReasonConcurrentUpdate
		}
		if r := order.NewProcessor(s, fixedNow).Process(ctx, m); r.Outcome != want || r.Reason != reason {
			t.Errorf("delivery count %d, not remembered: %v %q, want %v %q", dc, r.Outcome, r.Reason, want, reason)
		}
	}
}
