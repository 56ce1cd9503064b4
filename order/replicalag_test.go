package order_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// scriptedPicks answers memstore's ReplicaLag.Pick from a script: true is
// the latest state, false the oldest the bound allows; after the script,
// the latest.
type scriptedPicks struct {
	mu     sync.Mutex
	script []bool
}

func (p *scriptedPicks) pick(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	latest := true
	if len(p.script) > 0 {
		latest, p.script = p.script[0], p.script[1:]
	}
	if latest {
		return n - 1
	}
	return 0
}

// Under Session consistency, a worker whose create conflicts with another
// worker's may read from replicas behind that create: its reads of the
// payment record and the order answer 404 while the order exists, and the
// event read may find the event. No such sequence of reads may dead-letter
// the message OrderDocumentMissing: a lagging read is retried, and a
// redelivery decides the duplicate. Every combination of lagging and
// up-to-date reads is tried, with and without a payment step.
func TestReplicaLag_ConflictThenLaggingReads_NeverOrderDocumentMissing(t *testing.T) {
	const reads = 5
	for _, payments := range []bool{false, true} {
		reached := false
		for combo := range 1 << reads {
			script := make([]bool, reads)
			for i := range script {
				script[i] = combo&(1<<i) != 0
			}
			name := fmt.Sprintf("payments=%v/reads=%v", payments, script)
			picks := &scriptedPicks{}
			s := memstore.New("/orderId")
			s.SetReplicaLag(memstore.ReplicaLag{Versions: 4, Pick: picks.pick})
			newProcessor := func(sess *memstore.Session) *order.Processor {
				opts := []order.Option{order.WithDocuments(sess), order.WithFactCache(0)}
				if payments {
					opts = append(opts, order.WithPayments(newGateway(), time.Hour, "w1"))
				}
				return order.NewProcessor(sess, fixedNow, opts...)
			}
			// Worker A accepts the order; worker B gets a copy.
			if r := newProcessor(s.NewSession()).Process(t.Context(), delivery(validBody, 1, 1)); r.Outcome != idempotent.Created {
				t.Fatalf("%s: worker A: %v %s", name, r.Outcome, r.Description)
			}
			b := newProcessor(s.NewSession())
			picks.mu.Lock()
			picks.script = script
			picks.mu.Unlock()
			settled := false
			for dc := uint32(1); dc <= 10 && !settled; dc++ {
				r := b.Process(t.Context(), delivery(validBody, 2, dc))
				if strings.Contains(r.Description, "lagged") {
					reached = true
				}
				switch r.Outcome {
				case idempotent.Duplicate:
					settled = true
				case idempotent.Transient:
				default:
					t.Fatalf("%s: worker B, delivery %d: %v %q (%s); want a retry or Duplicate for an order that exists", name, dc, r.Outcome, r.Reason, r.Description)
				}
			}
			if !settled {
				t.Errorf("%s: worker B never settled the duplicate", name)
			}
		}
		if !reached {
			t.Errorf("payments=%v: no combination reached a first read that lagged and a re-read that did not", payments)
		}
	}
}

// tokenless is a store adapter that carries no session token: every read
// is a new session's, as a copier's adapter that drops Cosmos DB's session
// tokens would read, so any read may lag behind writes, its own included.
type tokenless struct{ *memstore.Store }

func (s tokenless) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	return s.NewSession().ReadDocument(ctx, pk, id)
}

// The sequence of issue 32 (item 4): after a 409, two lagging reads of the
// order around one current read of its event, from a store that carries no
// session token. The first delivery used to dead-letter the existing (and
// paid) order OrderDocumentMissing; no read a lagging replica can serve may
// do that on the first delivery. The consumer retries, and a later delivery
// (whose reads see the order) settles it Duplicate.
func TestReplicaLag_NoSessionToken_LaggingReadsAroundTheEvent_NotDeadLettered(t *testing.T) {
	tests := []struct {
		name     string
		payments bool
		script   []bool // true: the read sees the latest state
	}{
		// marker (lags), event (current), marker again (lags)
		{"no payment", false, []bool{false, true, false}},
		// the payment record (lags), then as above
		{"paid", true, []bool{false, false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			picks := &scriptedPicks{}
			s := memstore.New("/orderId")
			s.SetReplicaLag(memstore.ReplicaLag{Versions: 4, Pick: picks.pick})
			newProcessor := func(st tokenless) *order.Processor {
				opts := []order.Option{order.WithDocuments(st), order.WithFactCache(0), order.WithAdaptiveReadFirst(false)}
				if tt.payments {
					opts = append(opts, order.WithPayments(newGateway(), time.Hour, "w1"))
				}
				return order.NewProcessor(st, fixedNow, opts...)
			}
			if r := newProcessor(tokenless{s}).Process(t.Context(), delivery(validBody, 1, 1)); r.Outcome != idempotent.Created {
				t.Fatalf("worker A: %v %s", r.Outcome, r.Description)
			}
			picks.mu.Lock()
			picks.script = tt.script
			picks.mu.Unlock()
			b := newProcessor(tokenless{s})
			r := b.Process(t.Context(), delivery(validBody, 2, 1))
			if r.Outcome != idempotent.Transient {
				t.Fatalf("worker B, first delivery: %v %q (%s); want a retry: every read that missed the order may have lagged", r.Outcome, r.Reason, r.Description)
			}
			picks.mu.Lock()
			left := len(picks.script)
			picks.mu.Unlock()
			if left != 0 {
				t.Fatalf("worker B's first delivery made %d reads fewer than the script's %d: the sequence was not reached", left, len(tt.script))
			}
			if r := b.Process(t.Context(), delivery(validBody, 2, 2)); r.Outcome != idempotent.Duplicate {
				t.Errorf("worker B, second delivery (the replicas caught up): %v %q (%s); want Duplicate", r.Outcome, r.Reason, r.Description)
			}
		})
	}
}
