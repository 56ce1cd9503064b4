package order_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }

// failingStore fails every call with err.
type failingStore struct{ err error }

func (s failingStore) CreateBatch(context.Context, string, []idempotent.Document) ([]string, error) {
	return nil, s.err
}
func (s failingStore) ReadDocument(context.Context, string, string) ([]byte, string, error) {
	return nil, "", s.err
}

// readFailingStore creates like memstore but fails every read of an order
// document with err.
type readFailingStore struct {
	*memstore.Store
	err error
}

func (s readFailingStore) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	if id == pk {
		return nil, "", s.err
	}
	return s.Store.ReadDocument(ctx, pk, id)
}

func msg(body string) idempotent.Message {
	return idempotent.Message{ID: "ord-1", Body: []byte(body), DeliveryCount: 1}
}

func TestProcess(t *testing.T) {
	changed := strings.Replace(validBody, `"cust-1"`, `"cust-2"`, 1)
	transient := fmt.Errorf("429 throttled: %w", idempotent.ErrTransient)
	tests := []struct {
		name       string
		store      func() idempotent.Store
		before     []string // bodies processed first
		m          idempotent.Message
		want       idempotent.Outcome
		wantReason string
	}{
		{"new order", func() idempotent.Store { return memstore.New("/orderId") }, nil, msg(validBody), idempotent.Created, ""},
		{"same message again", func() idempotent.Store { return memstore.New("/orderId") }, []string{validBody}, msg(validBody), idempotent.Duplicate, ""},
		{"producer retry with new metadata", func() idempotent.Store { return memstore.New("/orderId") }, []string{validBody},
			msg(strings.Replace(validBody, `"abc"`, `"retry-2"`, 1)), idempotent.Duplicate, ""},
		{"same id other content", func() idempotent.Store { return memstore.New("/orderId") }, []string{validBody}, msg(changed), idempotent.Mismatch, order.ReasonOrderIDReused},
		{"malformed body", func() idempotent.Store { return memstore.New("/orderId") }, nil, msg(`{not json`), idempotent.Invalid, idempotent.ReasonInvalidMessage},
		{"invalid field", func() idempotent.Store { return memstore.New("/orderId") }, nil, msg(strings.Replace(validBody, "EUR", "euro", 1)), idempotent.Invalid, idempotent.ReasonInvalidMessage},
		{"MessageId differs from orderId", func() idempotent.Store { return memstore.New("/orderId") }, nil,
			idempotent.Message{ID: "ord-2", Body: []byte(validBody), DeliveryCount: 1}, idempotent.Invalid, idempotent.ReasonMessageIDMismatch},
		{"throttled create", func() idempotent.Store { return failingStore{transient} }, nil, msg(validBody), idempotent.Transient, idempotent.ReasonStoreUnavailable},
		{"create deadline", func() idempotent.Store { return failingStore{context.DeadlineExceeded} }, nil, msg(validBody), idempotent.Transient, idempotent.ReasonStoreUnavailable},
		{"permanent store error is retried, not dropped", func() idempotent.Store { return failingStore{errors.New("403 forbidden")} }, nil, msg(validBody), idempotent.Transient, idempotent.ReasonStoreError},
		{"read after conflict fails", func() idempotent.Store { return readFailingStore{memstore.New("/orderId"), transient} }, []string{validBody}, msg(validBody), idempotent.Transient, idempotent.ReasonStoreUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.store()
			// No fact cache: every decision here comes from the store (the
			// cache's own are in TestFactCache).
			p := order.NewProcessor(s, fixedNow, order.WithFactCache(0))
			ctx := context.Background()
			for _, b := range tt.before {
				if r := p.Process(ctx, msg(b)); r.Outcome != idempotent.Created {
					t.Fatalf("setup: %v %s", r.Outcome, r.Description)
				}
			}
			var before []memstore.Item
			if ms, ok := s.(*memstore.Store); ok {
				before = ms.Items()
			}
			r := p.Process(ctx, tt.m)
			if r.Outcome != tt.want || r.Reason != tt.wantReason {
				t.Fatalf("Process = %v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.wantReason)
			}
			if r.Outcome != idempotent.Created && r.Outcome != idempotent.Duplicate && r.Description == "" {
				t.Error("a failure outcome without a description")
			}
			if ms, ok := s.(*memstore.Store); ok && len(tt.before) > 0 {
				assertUnchanged(t, before, ms.Items())
			}
		})
	}
}

func TestProcessMismatchNamesBothHashes(t *testing.T) {
	p := order.NewProcessor(memstore.New("/orderId"), fixedNow)
	ctx := context.Background()
	p.Process(ctx, msg(validBody))
	other, _ := order.Decode([]byte(strings.Replace(validBody, `"cust-1"`, `"cust-2"`, 1)))
	orig, _ := order.Decode([]byte(validBody))
	r := p.Process(ctx, msg(strings.Replace(validBody, `"cust-1"`, `"cust-2"`, 1)))
	if !strings.Contains(r.Description, orig.RequestHash()) || !strings.Contains(r.Description, other.RequestHash()) {
		t.Errorf("description %q does not name both hashes", r.Description)
	}
}

func TestProcessWritesOrderAndEventTogether(t *testing.T) {
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow)
	if r := p.Process(context.Background(), msg(validBody)); r.Outcome != idempotent.Created {
		t.Fatal(r)
	}
	items := s.Items()
	if len(items) != 2 || items[0].ID != order.EventID("ord-1") || items[1].ID != "ord-1" {
		t.Fatalf("items = %+v, want the order and its OrderAccepted event", items)
	}
	doc, err := order.ReadOrder(context.Background(), s, "ord-1")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := order.Decode([]byte(validBody))
	if doc.RequestHash != o.RequestHash() || doc.MessageID != "ord-1" || !doc.ProcessedAt.Equal(fixedNow()) || doc.OrderID != doc.ID {
		t.Errorf("stored document %+v lacks hash, message id or processing time", doc)
	}
}

func TestConcurrentDeliveriesCreateOnce(t *testing.T) {
	s := memstore.New("/orderId")
	p := order.NewProcessor(s, fixedNow)
	const n = 32
	results := make([]idempotent.Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = p.Process(context.Background(), idempotent.Message{ID: "ord-1", Body: []byte(validBody), DeliveryCount: uint32(i + 1)})
		}()
	}
	close(start)
	wg.Wait()
	counts := map[idempotent.Outcome]int{}
	for _, r := range results {
		counts[r.Outcome]++
	}
	if counts[idempotent.Created] != 1 || counts[idempotent.Duplicate] != n-1 {
		t.Errorf("outcomes = %v, want 1 created and %d duplicates", counts, n-1)
	}
	for _, it := range s.Items() {
		if it.Writes != 1 {
			t.Errorf("%s written %d times", it.ID, it.Writes)
		}
	}
}

func assertUnchanged(t *testing.T, before, after []memstore.Item) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("store had %d documents, now %d", len(before), len(after))
	}
	for i := range before {
		if before[i].ETag != after[i].ETag || !bytes.Equal(before[i].Body, after[i].Body) {
			t.Errorf("document %s changed", before[i].ID)
		}
	}
}

func BenchmarkDecodeValidateHash(b *testing.B) {
	body := []byte(validBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		o, err := order.Decode(body)
		if err != nil {
			b.Fatal(err)
		}
		_ = o.RequestHash()
	}
}

func BenchmarkProcess(b *testing.B) {
	ctx := context.Background()
	b.Run("created", func(b *testing.B) {
		p := order.NewProcessor(memstore.New("/orderId"), nil)
		bodies := make([][]byte, b.N)
		for i := range bodies {
			bodies[i] = []byte(strings.Replace(validBody, `"ord-1"`, fmt.Sprintf(`"ord-%d"`, i), 1))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if r := p.Process(ctx, idempotent.Message{ID: fmt.Sprintf("ord-%d", i), Body: bodies[i], DeliveryCount: 1}); r.Outcome != idempotent.Created {
				b.Fatal(r)
			}
		}
	})
	// The processor's own cost, with a store that encodes the documents
	// and writes nothing: what the project's code adds to the SDK calls.
	b.Run("created, no store", func(b *testing.B) {
		p := order.NewProcessor(nopStore{}, nil)
		bodies := make([][]byte, b.N)
		ids := make([]string, b.N)
		for i := range bodies {
			ids[i] = fmt.Sprintf("ord-%d", i)
			bodies[i] = []byte(strings.Replace(validBody, `"ord-1"`, `"`+ids[i]+`"`, 1))
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if r := p.Process(ctx, idempotent.Message{ID: ids[i], Body: bodies[i], DeliveryCount: 1}); r.Outcome != idempotent.Created {
				b.Fatal(r)
			}
		}
	})
	b.Run("duplicate, cold", func(b *testing.B) {
		s := memstore.New("/orderId")
		p := order.NewProcessor(s, nil, order.WithFactCache(0))
		m := msg(validBody)
		p.Process(ctx, m)
		m.DeliveryCount = 2
		b.ReportAllocs()
		for b.Loop() {
			if r := p.Process(ctx, m); r.Outcome != idempotent.Duplicate {
				b.Fatal(r)
			}
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		p := order.NewProcessor(memstore.New("/orderId"), nil)
		m := msg(validBody)
		p.Process(ctx, m)
		b.ReportAllocs()
		for b.Loop() {
			if r := p.Process(ctx, m); r.Outcome != idempotent.Duplicate {
				b.Fatal(r)
			}
		}
	})
}
