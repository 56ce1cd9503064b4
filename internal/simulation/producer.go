package simulation

import (
	"context"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/internal/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// Kind is what a sent message is, in the producer's ground truth.
type Kind int

// The kinds of sent messages.
const (
	// Original is the first send of a valid order.
	Original Kind = iota + 1
	// Retry is the same order sent again: at once (dropped by duplicate
	// detection) or after the duplicate-detection window (a second queued
	// copy the consumer must treat as a duplicate).
	Retry
	// Reuse is the id of a valid order sent with other content.
	Reuse
	// Malformed is a body that is not a valid order.
	Malformed
	// IDMismatch is a valid order body whose orderId is not its MessageId.
	IDMismatch
)

var kindNames = [...]string{Original: "original", Retry: "retry", Reuse: "reuse", Malformed: "malformed", IDMismatch: "id-mismatch"}

// String returns the kind's name, as the report and violations show it.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Processable reports whether a message of kind k carries a valid order
// whose orderId is its MessageId, so a correct consumer may write it.
func (k Kind) Processable() bool { return k == Original || k == Retry || k == Reuse }

// Sent is one message as the producer sent it: the ground truth the checker
// holds the final state against.
type Sent struct {
	MessageID   string
	Kind        Kind
	RequestHash string // the order's request hash; empty unless Kind.Processable
	// Resend is true for a message sent again at once, with the same bytes,
	// as a producer does after a lost acknowledgement.
	Resend bool
	// Enqueued is false when the broker's duplicate detection dropped the
	// message (the sender still saw success).
	Enqueued bool
	// Seq is the sequence number the queue gave the message, if Enqueued.
	Seq int64
}

// producer sends the planned messages to the queue and records the ground
// truth. It sends from one goroutine, so it knows the sequence number of
// every message it enqueues: the queue numbers them 1, 2, 3, … in order.
type producer struct {
	q     *sbqueue.Queue
	clock *sbqueue.VirtualClock
	gen   *ordergen.Generator
	plan  *plan

	sent    []Sent
	nextSeq int64
	late    []late // sends planned for after the duplicate-detection window
	faults  FaultCounts
}

type late struct {
	i      int
	kind   Kind
	resend bool // sent twice at once
}

func newProducer(q *sbqueue.Queue, clock *sbqueue.VirtualClock, gen *ordergen.Generator, p *plan) *producer {
	return &producer{q: q, clock: clock, gen: gen, plan: p}
}

// sendFirst sends every order once (and planned immediate retries), and
// plans the late sends.
func (p *producer) sendFirst(ctx context.Context, orders int) error {
	for i := range orders {
		op := p.plan.order(i)
		id := p.gen.ID(i)
		var err error
		switch {
		case op.malformed && op.malformedKind < 3:
			err = p.send(ctx, Sent{MessageID: id, Kind: Malformed}, ordergen.Malformed(id, op.malformedKind), op.retry)
		case op.malformed:
			o := p.gen.Order(i)
			o.OrderID += "-other"
			err = p.send(ctx, Sent{MessageID: id, Kind: IDMismatch}, p.body(o, i), op.retry)
		default:
			o := p.gen.Order(i)
			err = p.send(ctx, Sent{MessageID: id, Kind: Original, RequestHash: o.RequestHash()}, p.body(o, i), op.retry)
			if op.lateRetry {
				p.late = append(p.late, late{i: i, kind: Retry, resend: op.lateRetryCopy})
			}
			if op.reuse {
				p.late = append(p.late, late{i: i, kind: Reuse, resend: op.reuseRetry})
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendLate sends the late retries and reused ids. The caller has moved the
// clock past the duplicate-detection window.
func (p *producer) sendLate(ctx context.Context) error {
	for _, l := range p.late {
		o := p.gen.Order(l.i)
		if l.kind == Reuse {
			o = ordergen.Changed(o)
		}
		s := Sent{MessageID: o.OrderID, Kind: l.kind, RequestHash: o.RequestHash()}
		if err := p.send(ctx, s, p.body(o, l.i), l.resend); err != nil {
			return err
		}
	}
	return nil
}

// body stamps o with the producer's metadata at the current virtual time,
// so a late retry differs from the original in sentAt, which the request
// hash ignores.
func (p *producer) body(o order.Order, i int) []byte {
	return ordergen.Body(o, p.clock.Now(), fmt.Sprintf("%016x", uint64(i)))
}

// send sends one message, and the same bytes again at once if resend, as a
// producer does after a lost acknowledgement.
func (p *producer) send(ctx context.Context, s Sent, body []byte, resend bool) error {
	for n := 0; n < 1 || n == 1 && resend; n++ {
		enqueued, err := p.q.Send(ctx, sbqueue.Message{MessageID: s.MessageID, Body: body, ContentType: "application/json"})
		if err != nil {
			return fmt.Errorf("simulation: send %s: %w", s.MessageID, err)
		}
		s.Enqueued, s.Seq = enqueued, 0
		if enqueued {
			p.nextSeq++
			s.Seq = p.nextSeq
		}
		if n == 1 {
			p.faults.ProducerRetry++
			s.Resend = true
			if s.Kind == Original {
				s.Kind = Retry
			}
		}
		p.sent = append(p.sent, s)
	}
	return nil
}

// epoch is where the simulation's virtual clock starts.
var epoch = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
