package order_test

import (
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
