package order_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// orders returns n first deliveries of distinct valid orders under prefix.
func orders(prefix string, n int) []idempotent.Message {
	gen := ordergen.New(1, prefix)
	sentAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	out := make([]idempotent.Message, n)
	for i := range out {
		o := gen.Order(i)
		out[i] = idempotent.Message{ID: o.OrderID, Body: ordergen.Body(o, sentAt, "trace-"+o.OrderID), DeliveryCount: 1}
	}
	return out
}

// seeded returns a counting store holding the orders of msgs, stored by a
// processor of its own, so that a processor under test finds them as copies
// its fact cache does not know (the originals went to another worker).
func seeded(t *testing.T, msgs []idempotent.Message) *countingStore {
	t.Helper()
	s := &countingStore{Store: memstore.New("/orderId")}
	seeder := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	for _, m := range msgs {
		if r := seeder.Process(t.Context(), m); r.Outcome != idempotent.Created {
			t.Fatalf("seed %s: %v %s", m.ID, r.Outcome, r.Description)
		}
	}
	return s
}

// callsPer processes msgs in order with p and returns the store calls of
// each, checking each outcome.
func callsPer(t *testing.T, p *order.Processor, s *countingStore, msgs []idempotent.Message, want idempotent.Outcome) []int {
	t.Helper()
	calls := make([]int, len(msgs))
	for i, m := range msgs {
		before := s.count()
		if r := p.Process(t.Context(), m); r.Outcome != want {
			t.Fatalf("message %d (%s): %v %s, want %v", i, m.ID, r.Outcome, r.Description, want)
		}
		calls[i] = s.count() - before
	}
	return calls
}

// pattern returns n call counts: first for the first k, then rest.
func pattern(n, k, first, rest int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = rest
		if i < k {
			out[i] = first
		}
	}
	return out
}

// TestAdaptiveReadFirst pins the adaptive choice with exact store calls per
// message: a fresh processor creates first (a copy costs the conflicting
// create and a read: 2), switches to read-first after 27 copies (the
// estimate, moving 1/32 of the way per finding, first exceeds 9/16 at the
// 27th: 1-(31/32)^27 > 9/16 > 1-(31/32)^26), after which a copy costs 1 and
// a new order 2 (the read misses, the create writes); a run of new orders
// switches it back once the estimate falls below 7/16; a stream
// alternating copies and new orders (a share of exactly 1/2) keeps
// whichever choice the processor had; and with the choice off it always
// creates first.
func TestAdaptiveReadFirst(t *testing.T) {
	t.Run("copies switch to read-first, new orders switch back", func(t *testing.T) {
		copies := orders("cp", 40)
		s := seeded(t, copies)
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
		if share, rf := p.CopyShare(); share != 0 || rf {
			t.Fatalf("fresh processor: CopyShare = %v, %v; want 0, false", share, rf)
		}
		got := callsPer(t, p, s, copies, idempotent.Duplicate)
		if want := pattern(40, 27, 2, 1); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("copies: calls per message\n got %v\nwant %v", got, want)
		}
		share, rf := p.CopyShare()
		if !rf || share < 0.7 || share > 0.73 {
			t.Errorf("after 40 copies: CopyShare = %v, %v; want 1-(31/32)^40 ≈ 0.72, true", share, rf)
		}
		// From 1-(31/32)^40 the estimate falls below 7/16 at the 16th new
		// order: (1-(31/32)^40)·(31/32)^16 < 7/16 < …·(31/32)^15.
		got = callsPer(t, p, s, orders("new", 30), idempotent.Created)
		if want := pattern(30, 16, 2, 1); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("new orders after copies: calls per message\n got %v\nwant %v", got, want)
		}
		if _, rf := p.CopyShare(); rf {
			t.Error("after 30 new orders: still reading first")
		}
	})

	alternating := func(t *testing.T, warm []idempotent.Message, readFirst bool) {
		t.Helper()
		copies := orders("alt", 40)
		s := seeded(t, append(copies, warm...))
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
		callsPer(t, p, s, warm, idempotent.Duplicate)
		if _, rf := p.CopyShare(); rf != readFirst {
			t.Fatalf("after warming: reads first %v, want %v", rf, readFirst)
		}
		fresh := orders("altnew", 40)
		copyCost, newCost := 2, 1
		if readFirst {
			copyCost, newCost = 1, 2
		}
		for i := range 40 {
			for _, c := range []struct {
				m    idempotent.Message
				want idempotent.Outcome
				cost int
			}{{copies[i], idempotent.Duplicate, copyCost}, {fresh[i], idempotent.Created, newCost}} {
				if got := callsPer(t, p, s, []idempotent.Message{c.m}, c.want); got[0] != c.cost {
					t.Fatalf("pair %d, %v: %d calls, want %d (the choice flapped)", i, c.want, got[0], c.cost)
				}
			}
		}
	}
	t.Run("a share of 1/2 keeps create-first", func(t *testing.T) {
		alternating(t, nil, false)
	})
	t.Run("a share of 1/2 keeps read-first", func(t *testing.T) {
		alternating(t, orders("warm", 40), true)
	})

	t.Run("with payments: a copy costs the payment record's read", func(t *testing.T) {
		copies := orders("pay", 40)
		s := seeded(t, copies)
		gw := newGateway()
		opts := []order.Option{order.WithDocuments(s), order.WithPayments(gw, time.Minute, "w1")}
		// The seeder captured nothing: let a processor of its own capture
		// every payment, so that each copy below is a plain duplicate.
		capturer := order.NewProcessor(s, fixedNow, opts...)
		callsPer(t, capturer, s, copies, idempotent.Duplicate)
		p := order.NewProcessor(s, fixedNow, opts...)
		// Create-first: the batch conflicts, the payment record is read.
		if got, want := callsPer(t, p, s, copies, idempotent.Duplicate), pattern(40, 27, 2, 1); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls per message\n got %v\nwant %v", got, want)
		}
	})

	t.Run("off: always create first", func(t *testing.T) {
		copies := orders("off", 60)
		s := seeded(t, copies)
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s), order.WithAdaptiveReadFirst(false))
		if got, want := callsPer(t, p, s, copies, idempotent.Duplicate), pattern(60, 60, 2, 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("calls per message\n got %v\nwant %v", got, want)
		}
		if share, rf := p.CopyShare(); share != 0 || rf {
			t.Errorf("CopyShare = %v, %v; want 0, false", share, rf)
		}
	})

	t.Run("redeliveries and cache hits do not move the estimate", func(t *testing.T) {
		copies := orders("rd", 40)
		s := seeded(t, copies)
		p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
		for _, m := range copies {
			m.DeliveryCount = 2
			if r := p.Process(t.Context(), m); r.Outcome != idempotent.Duplicate {
				t.Fatal(r)
			}
			m.DeliveryCount = 1 // now a fact cache hit
			if r := p.Process(t.Context(), m); r.Outcome != idempotent.Duplicate {
				t.Fatal(r)
			}
		}
		if share, rf := p.CopyShare(); share != 0 || rf {
			t.Errorf("CopyShare = %v, %v; want 0, false", share, rf)
		}
	})
}

// TestAdaptiveReadFirst_SameOutcomes: the choice never changes an outcome.
// Each case is decided by a processor that creates first (the choice off)
// and by one that reads first (warmed by copies), with and without a
// payment step: the same outcome and reason, for a new order, a copy, a
// reused id and an order document deleted after its order was accepted
// (retried on its first delivery, dead-lettered on its redelivery).
func TestAdaptiveReadFirst_SameOutcomes(t *testing.T) {
	ctx := t.Context()
	changed := ordergen.Changed(ordergen.New(1, "case").Order(0))
	changedMsg := idempotent.Message{ID: changed.OrderID, Body: ordergen.Body(changed, fixedNow(), "t"), DeliveryCount: 1}
	cases := []struct {
		name    string
		prepare func(s *memstore.Store, stored idempotent.Message) // after the order is stored
		m       func(stored, fresh idempotent.Message) idempotent.Message
		want    idempotent.Outcome
		reason  string
		// then and thenReason, when set, decide a redelivery of the same
		// message: a first delivery cannot tell a deleted order document
		// from a read that lagged, a redelivery can.
		then       idempotent.Outcome
		thenReason string
	}{
		{"new", nil, func(_, fresh idempotent.Message) idempotent.Message { return fresh }, idempotent.Created, "", 0, ""},
		{"copy", nil, func(stored, _ idempotent.Message) idempotent.Message { return stored }, idempotent.Duplicate, "", 0, ""},
		{"id reused", nil, func(_, _ idempotent.Message) idempotent.Message { return changedMsg }, idempotent.Mismatch, order.ReasonOrderIDReused, 0, ""},
		{"order document deleted", func(s *memstore.Store, stored idempotent.Message) {
			if !s.Delete(stored.ID, stored.ID) {
				t.Fatal("no order document to delete")
			}
		}, func(stored, _ idempotent.Message) idempotent.Message { return stored }, idempotent.Transient, idempotent.ReasonConcurrentUpdate,
			idempotent.Invalid, order.ReasonOrderDocumentMissing},
	}
	for _, payments := range []bool{false, true} {
		for _, tt := range cases {
			for _, readFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("payments=%v/%s/readFirst=%v", payments, tt.name, readFirst), func(t *testing.T) {
					warm := orders("warm", 40)
					stored := orders("case", 1)[0]
					s := seeded(t, append(warm, stored))
					opts := []order.Option{order.WithDocuments(s)}
					if payments {
						opts = append(opts, order.WithPayments(newGateway(), time.Minute, "w1"))
					}
					if !readFirst {
						opts = append(opts, order.WithAdaptiveReadFirst(false))
					}
					p := order.NewProcessor(s, fixedNow, opts...)
					if payments {
						// The seeder captured nothing: these copies
						// capture their payments.
						for _, m := range warm {
							p.Process(ctx, m)
						}
						p = order.NewProcessor(s, fixedNow, opts...)
					}
					for _, m := range warm {
						if r := p.Process(ctx, m); r.Outcome != idempotent.Duplicate {
							t.Fatalf("warm %s: %v %s", m.ID, r.Outcome, r.Description)
						}
					}
					if _, rf := p.CopyShare(); rf != readFirst {
						t.Fatalf("reads first %v, want %v", rf, readFirst)
					}
					if tt.prepare != nil {
						tt.prepare(s.Store, stored)
					}
					m := tt.m(stored, orders("fresh", 1)[0])
					r := p.Process(ctx, m)
					if r.Outcome != tt.want || r.Reason != tt.reason {
						t.Errorf("%v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.want, tt.reason)
					}
					if tt.then != 0 {
						m.DeliveryCount++
						if r := p.Process(ctx, m); r.Outcome != tt.then || r.Reason != tt.thenReason {
							t.Errorf("redelivered: %v %q (%s), want %v %q", r.Outcome, r.Reason, r.Description, tt.then, tt.thenReason)
						}
					}
				})
			}
		}
	}
}

// TestAdaptiveReadFirst_Concurrent runs 16 goroutines over a stream of
// copies and new orders, each message delivered twice at once, while the
// choice switches: every order is created exactly once, every other
// delivery is a duplicate. Run with -race.
func TestAdaptiveReadFirst_Concurrent(t *testing.T) {
	copies := orders("cc", 200)
	s := seeded(t, copies)
	p := order.NewProcessor(s, fixedNow, order.WithDocuments(s))
	fresh := orders("cn", 200)
	var stream []idempotent.Message
	for i := range 200 {
		stream = append(stream, copies[i], copies[i])
		if i%3 == 0 { // a share of copies about 3/4 among the first findings
			stream = append(stream, fresh[i], fresh[i])
		}
	}
	var (
		mu      sync.Mutex
		created = map[string]int{}
		next    = make(chan idempotent.Message)
		wg      sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for m := range next {
				r := p.Process(context.Background(), m)
				mu.Lock()
				switch r.Outcome {
				case idempotent.Created:
					created[m.ID]++
				case idempotent.Duplicate:
				default:
					t.Errorf("%s: %v %s", m.ID, r.Outcome, r.Description)
				}
				mu.Unlock()
			}
		})
	}
	for _, m := range stream {
		next <- m
	}
	close(next)
	wg.Wait()
	for i := 0; i < 200; i += 3 {
		if n := created[fresh[i].ID]; n != 1 {
			t.Errorf("%s created %d times", fresh[i].ID, n)
		}
	}
	for _, m := range copies {
		if n := created[m.ID]; n != 0 {
			t.Errorf("copy %s created %d times", m.ID, n)
		}
	}
	if _, rf := p.CopyShare(); !rf {
		t.Error("a stream of mostly copies left the processor creating first")
	}
}

// A processor that finds mostly copies of orders other workers stored
// starts reading before it creates; WithAdaptiveReadFirst(false) would keep
// it creating first.
func ExampleProcessor_CopyShare() {
	ctx := context.Background()
	s := memstore.New("/orderId")
	other := order.NewProcessor(s, nil, order.WithDocuments(s)) // stored the originals
	p := order.NewProcessor(s, nil, order.WithDocuments(s))
	for _, m := range orders("ex", 30) {
		other.Process(ctx, m)
		p.Process(ctx, m) // a copy: Duplicate
	}
	share, readFirst := p.CopyShare()
	fmt.Printf("copy share %.2f, read first %v\n", share, readFirst)
	// Output: copy share 0.61, read first true
}
