package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/ordergen"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
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
	// Status is a status change of a valid order (Subject
	// order.SubjectOrderStatusChanged), sent, retried and shuffled like any
	// other message.
	Status
)

var kindNames = [...]string{Original: "original", Retry: "retry", Reuse: "reuse", Malformed: "malformed", IDMismatch: "id-mismatch", Status: "status"}

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
	OrderID     string // the order the message is about: MessageID, except for a Status message
	Kind        Kind
	RequestHash string // the order's request hash; empty unless Kind.Processable
	// Version and Status are the change a Status message carries.
	Version int64
	Status  string
	// Resend is true for a message sent again at once, with the same bytes,
	// as a producer does after a lost acknowledgement.
	Resend bool
	// Enqueued is false when the broker's duplicate detection dropped the
	// message (the sender still saw success).
	Enqueued bool
	// Seq is the sequence number the queue gave the message, if Enqueued.
	Seq int64
	// EnqueuedAt is when the queue took it, on the run's clock (read when
	// the send returned): what a delayed-retry copy of it carries as
	// worker.PropertyRetrySince, which tells apart the messages of one
	// MessageId (see copyOwner).
	EnqueuedAt time.Time
	// Resubmission is true for a copy the operator sent from the
	// dead-letter queue; ResubmittedOf is the sequence number of the
	// dead-lettered message it copies.
	Resubmission  bool
	ResubmittedOf int64
	// ResubmittedAs is set on a dead-lettered message the operator
	// resubmitted: the sequence number of its copy (0 if the copy was
	// dropped by duplicate detection). DeadLetterReason and
	// DeadLetterDescription are what it was dead-lettered with: the
	// operator completed the dead-lettered message, so the final state no
	// longer shows it.
	ResubmittedAs         int64
	Resubmitted           bool
	DeadLetterReason      string
	DeadLetterDescription string
	// ResubmittedCopy is set with Resubmitted when what the operator
	// resubmitted was a dead-lettered delayed-retry copy of the message,
	// not the message itself: its worker completed it after scheduling
	// the copy.
	ResubmittedCopy bool
}

// outlet is one subscription's queue as the producer sees it, with the
// ground truth of what it received. The producer sends from one goroutine,
// so it knows the sequence number of every message it enqueues: a queue
// numbers them 1, 2, 3, … in order.
type outlet struct {
	consumer string // "" for the order writers' queue, else the inbox consumer's name
	q        *sbqueue.Queue
	statuses bool // the subscription's filter lets status changes through
	hist     *history
	sent     []Sent
}

// producer sends the planned messages to every subscription, as a sender
// to a Service Bus topic does, and records the ground truth.
type producer struct {
	outlets []*outlet // outlets[0] is the order writers' queue
	gen     *ordergen.Generator
	plan    *plan

	late   []late // sends planned for after the duplicate-detection window
	faults FaultCounts

	orderDelay time.Duration // Config.OrderDelay
}

type late struct {
	i       int
	kind    Kind
	resend  bool  // sent twice at once
	version int64 // of a Status
}

func newProducer(outlets []*outlet, gen *ordergen.Generator, p *plan) *producer {
	return &producer{outlets: outlets, gen: gen, plan: p}
}

// sendFirst sends every order once (and planned immediate retries) with its
// status changes, and plans the late sends.
func (p *producer) sendFirst(ctx context.Context, orders int) error {
	for i := range orders {
		op := p.plan.order(i)
		id := p.gen.ID(i)
		var err error
		switch {
		case op.malformed && op.malformedKind < 3:
			err = p.send(ctx, Sent{MessageID: id, OrderID: id, Kind: Malformed}, ordergen.Malformed(id, op.malformedKind), op.retry)
		case op.malformed:
			o := p.gen.Order(i)
			o.OrderID += "-other"
			err = p.send(ctx, Sent{MessageID: id, OrderID: id, Kind: IDMismatch}, p.body(o, i), op.retry)
		default:
			for _, k := range op.statusOrder[:op.statusBefore] {
				if err = p.sendStatus(ctx, i, k, op); err != nil {
					return err
				}
			}
			if op.statusBefore > 0 {
				if err := p.waitOrderDelay(ctx); err != nil {
					return err
				}
			}
			o := p.gen.Order(i)
			err = p.send(ctx, Sent{MessageID: id, OrderID: id, Kind: Original, RequestHash: o.RequestHash()}, p.body(o, i), op.retry)
			if op.lateRetry {
				p.late = append(p.late, late{i: i, kind: Retry, resend: op.lateRetryCopy})
			}
			if op.reuse {
				p.late = append(p.late, late{i: i, kind: Reuse, resend: op.reuseRetry})
			}
			for _, k := range op.statusOrder[op.statusBefore:] {
				if err == nil {
					err = p.sendStatus(ctx, i, k, op)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendStatus sends the status change to version k+2 of order i.
func (p *producer) sendStatus(ctx context.Context, i, k int, op orderPlan) error {
	v := int64(k + 2)
	if op.statusLate&(1<<k) != 0 {
		p.late = append(p.late, late{i: i, kind: Status, version: v})
	}
	return p.sendStatusVersion(ctx, i, v, op.statusRetry&(1<<k) != 0)
}

func (p *producer) sendStatusVersion(ctx context.Context, i int, v int64, resend bool) error {
	c := statusChange(p.gen.ID(i), i, v)
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	s := Sent{MessageID: order.StatusMessageID(c.OrderID, v), OrderID: c.OrderID, Kind: Status, Version: v, Status: c.Status}
	return p.send(ctx, s, body, resend)
}

// statusNames are the statuses of versions 2, 3 and 4.
var statusNames = [...]string{"paid", "shipped", "delivered"}

// statusChange returns the change of order i (id) to version v. It is the
// same on every send, as a producer's retry of one change is.
func statusChange(id string, i int, v int64) order.StatusChange {
	return order.StatusChange{OrderID: id, Status: statusNames[(v-2)%int64(len(statusNames))], Version: v,
		ChangedAt: statusEpoch.Add(time.Duration(i)*time.Second + time.Duration(v)*time.Minute)}
}

// sendLate sends the late retries and reused ids. The caller has waited
// out the duplicate-detection window.
func (p *producer) sendLate(ctx context.Context) error {
	for _, l := range p.late {
		if l.kind == Status {
			if err := p.sendStatusVersion(ctx, l.i, l.version, false); err != nil {
				return err
			}
			continue
		}
		o := p.gen.Order(l.i)
		if l.kind == Reuse {
			o = ordergen.Changed(o)
		}
		s := Sent{MessageID: o.OrderID, OrderID: o.OrderID, Kind: l.kind, RequestHash: o.RequestHash()}
		if err := p.send(ctx, s, p.body(o, l.i), l.resend); err != nil {
			return err
		}
	}
	return nil
}

// body stamps o with the producer's metadata at the current time,
// so a late retry differs from the original in sentAt, which the request
// hash ignores.
func (p *producer) body(o order.Order, i int) []byte {
	return ordergen.Body(o, time.Now(), fmt.Sprintf("%016x", uint64(i)))
}

// send sends one message to every subscription whose filter lets it
// through, and the same bytes again at once if resend, as a producer does
// after a lost acknowledgement. Every message carries its order id as its
// CorrelationId, which the fault plan charges faults to.
func (p *producer) send(ctx context.Context, s Sent, body []byte, resend bool) error {
	m := sbqueue.Message{MessageID: s.MessageID, Body: body, ContentType: "application/json", CorrelationID: s.OrderID}
	if s.Kind == Status {
		m.Subject = order.SubjectOrderStatusChanged
	}
	for n := 0; n < 1 || n == 1 && resend; n++ {
		if n == 1 {
			p.faults.ProducerRetry++
			s.Resend = true
			if s.Kind == Original {
				s.Kind = Retry
			}
		}
		for _, o := range p.outlets {
			if s.Kind == Status && !o.statuses {
				continue
			}
			if err := o.send(ctx, s, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// send sends m to o's queue and records s, as sent, in its ground truth.
// It returns the sequence number the queue gave m, 0 if duplicate
// detection dropped it.
func (o *outlet) send(ctx context.Context, s Sent, m sbqueue.Message) error {
	// The queue's own number: the workers' scheduled retries take numbers
	// too.
	seq, err := o.q.SendSequenced(ctx, m)
	if err != nil {
		return fmt.Errorf("simulation: send %s: %w", s.MessageID, err)
	}
	s.Enqueued, s.Seq, s.EnqueuedAt = seq != 0, seq, time.Now()
	if s.Enqueued {
		o.hist.add(s.OrderIDOrMessageID(), o.consumer, "sent %s as #%d (%s%s)", s.MessageID, s.Seq, s.Kind, resendNote(s))
	} else {
		o.hist.add(s.OrderIDOrMessageID(), o.consumer, "sent %s (%s%s): dropped by duplicate detection", s.MessageID, s.Kind, resendNote(s))
	}
	o.sent = append(o.sent, s)
	return nil
}

func resendNote(s Sent) string {
	switch {
	case s.Resubmission:
		return fmt.Sprintf(", resubmission of #%d", s.ResubmittedOf)
	case s.Resend:
		return ", resent at once"
	}
	return ""
}

// statusEpoch is the base of the status changes' changedAt.
var statusEpoch = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// ResubmissionCounts counts the operator's resubmissions from the order
// writers' dead-letter queue.
type ResubmissionCounts struct {
	Early, Late int // messages resubmitted in each round
	// AfterKeyRetention counts resubmitted order messages whose order had
	// been charged longer than the key retention before: the payments
	// service no longer knows the key.
	AfterKeyRetention int
	Dropped           int // copies dropped by duplicate detection
}

// operator resubmits dead-lettered order messages as DESIGN.md §5 says: it
// receives them from the dead-letter queue, sends a copy with the same
// MessageId and body (without the dead-letter properties), then completes
// the dead-lettered message. Which messages it resubmits in which round is
// the plan's decision; the others it holds and abandons back to the
// dead-letter queue at the end of the round. It resubmits one message per
// MessageId per round: a second copy sent within the duplicate-detection
// window would be dropped, and the dead-lettered message it completes lost.
//
// A lost lock is a timing event, not a failure: the operator receives in
// small batches and acts on each at once, renews a message's lock before
// it sends its copy (a message whose lock is lost then is not sent, and is
// taken again when the dead-letter queue gives it back), and a message
// whose complete lost its lock after its copy was sent is completed when
// it comes back. Only the lost locks of the messages it abandons are
// ignored: abandoning gives back what a lapsed lock gave back already.
type operator struct {
	out       *outlet
	plan      *plan
	gw        *faultGateway // nil without payments: it knows when orders were charged
	retention time.Duration
	hist      *history
	counts    ResubmissionCounts
	// wrap, when set, wraps the dead-letter queue's receiver: tests lose
	// locks with it. Nil in runs.
	wrap func(dlqReceiver) dlqReceiver
}

// dlqReceiver is the part of *sbqueue.Receiver the operator uses.
type dlqReceiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error
}

var _ dlqReceiver = (*sbqueue.Receiver)(nil)

// operatorBatch is how many dead-lettered messages the operator receives at
// once: it acts on each before it receives more, so that no lock waits for
// the rest of the dead-letter queue (the compressed lock is a second).
const operatorBatch = 16

// isLockLost reports whether err is a settlement or renewal refused for a
// lost lock.
func isLockLost(err error) bool {
	var sbErr *azservicebus.Error
	return errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeLockLost
}

// dlqState is what the operator did with a dead-lettered message this
// round.
type dlqState int

const (
	dlqHeld          dlqState = iota + 1 // not resubmitted: abandoned at the end
	dlqSentUncleared                     // its copy sent, its complete lost the lock
	dlqDone                              // its copy sent and it completed
)

// resubmit runs round (1 or 2) and returns how many messages it
// resubmitted.
func (o *operator) resubmit(ctx context.Context, round int) (int, error) {
	dlq := o.out.q.DeadLetterQueue()
	peeked := dlq.Peek(1 << 30)
	if len(peeked) == 0 {
		return 0, nil
	}
	// The round is over when each message in the dead-letter queue at its
	// start has been acted on: one dead-lettered during the round (a
	// resubmission dead-lettered again) may be received too, and held.
	unseen := make(map[int64]bool, len(peeked))
	for _, m := range peeked {
		unseen[m.SequenceNumber] = true
	}
	sr := dlq.NewReceiver()
	defer sr.Close(context.WithoutCancel(ctx))
	var r dlqReceiver = sr
	if o.wrap != nil {
		r = o.wrap(r)
	}
	state := make(map[int64]dlqState)
	var held []*azservicebus.ReceivedMessage // each lock the round holds, to abandon at its end
	uncleared := 0
	resubmitted := 0
	sentIDs := make(map[string]bool) // a second copy of an id within the window would be dropped
	for len(unseen) > 0 || uncleared > 0 {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ms, err := r.ReceiveMessages(rctx, operatorBatch, nil)
		cancel()
		if err != nil && ctx.Err() != nil {
			return resubmitted, context.Cause(ctx)
		}
		if len(ms) == 0 {
			break // what is left is locked elsewhere: nothing else receives from it
		}
		for _, m := range ms {
			seq := *m.SequenceNumber
			switch state[seq] {
			case dlqSentUncleared:
				if err := r.CompleteMessage(ctx, m, nil); err == nil {
					state[seq] = dlqDone
					uncleared--
				} else if !isLockLost(err) {
					return resubmitted, fmt.Errorf("simulation: complete dead-lettered #%d: %w", seq, err)
				}
				continue
			case dlqHeld, dlqDone: // back after its lock lapsed
				held = append(held, m)
				continue
			}
			st, err := o.resubmitOne(ctx, r, m, round, sentIDs)
			if err != nil {
				return resubmitted, err
			}
			switch st {
			case 0: // its lock was lost before the send: taken again when it comes back
				continue
			case dlqHeld:
				held = append(held, m)
			case dlqSentUncleared:
				uncleared++
				resubmitted++
			case dlqDone:
				resubmitted++
			}
			state[seq] = st
			delete(unseen, seq)
		}
	}
	for _, m := range held {
		if err := r.AbandonMessage(ctx, m, nil); err != nil && !isLockLost(err) {
			return resubmitted, fmt.Errorf("simulation: abandon dead-lettered #%d: %w", *m.SequenceNumber, err)
		}
	}
	return resubmitted, nil
}

// resubmitOne acts on dead-lettered message m in round: it holds m when
// the plan does not resubmit it or its id was resubmitted this round,
// else sends its copy and completes it. It returns 0 when m's lock was
// lost before the send (nothing sent), dlqSentUncleared when the complete
// lost it after.
func (o *operator) resubmitOne(ctx context.Context, r dlqReceiver, m *azservicebus.ReceivedMessage, round int, sentIDs map[string]bool) (dlqState, error) {
	seq := *m.SequenceNumber
	orderID := m.MessageID
	if m.CorrelationID != nil {
		orderID = *m.CorrelationID
	}
	if !o.plan.resubmits(m.MessageID, seq, round) || sentIDs[m.MessageID] {
		return dlqHeld, nil
	}
	cp := m.Message()
	props := maps.Clone(cp.ApplicationProperties)
	delete(props, sbqueue.PropertyDeadLetterReason)
	delete(props, sbqueue.PropertyDeadLetterErrorDescription)
	id, props := resubmissionOf(m.MessageID, props)
	i := slices.IndexFunc(o.out.sent, func(s Sent) bool { return s.Enqueued && s.Seq == seq })
	if i < 0 && id != m.MessageID { // a scheduled retry: the message it retries
		i = copyOwner(o.out.sent, m.MessageID, cp.ApplicationProperties, seq)
	}
	if sentIDs[id] { // a second copy of an id within the window would be dropped
		return dlqHeld, nil
	}
	if i < 0 {
		return 0, fmt.Errorf("simulation: dead-lettered #%d (%s) was never sent", seq, m.MessageID)
	}
	// The lock must outlive the send, so that the complete after it
	// succeeds: a message whose lock is already lost is not sent.
	if err := r.RenewMessageLock(ctx, m, nil); err != nil {
		if isLockLost(err) {
			o.hist.add(orderID, "", "operator: the lock of dead-lettered #%d was lost before its resubmission; taken again when it comes back, round %d", seq, round)
			return 0, nil
		}
		return 0, fmt.Errorf("simulation: renew dead-lettered #%d: %w", seq, err)
	}
	orig := &o.out.sent[i]
	msg := sbqueue.Message{MessageID: id, Body: cp.Body, ApplicationProperties: props}
	if cp.ContentType != nil {
		msg.ContentType = *cp.ContentType
	}
	if cp.CorrelationID != nil {
		msg.CorrelationID = *cp.CorrelationID
	}
	if cp.Subject != nil {
		msg.Subject = *cp.Subject
	}
	s := *orig
	s.Resend, s.Resubmission, s.ResubmittedOf, s.Resubmitted, s.ResubmittedAs = false, true, seq, false, 0
	s.DeadLetterReason, s.DeadLetterDescription = "", ""
	if err := o.out.send(ctx, s, msg); err != nil {
		return 0, err
	}
	sentIDs[id] = true
	orig = &o.out.sent[i] // send appended: o.out.sent may have moved
	copySent := o.out.sent[len(o.out.sent)-1]
	// A message and a delayed-retry copy of it can both be dead-lettered
	// (its completion after the scheduling was lost): its own
	// resubmission, or the first of a copy's, stands for the message.
	if copied := id != m.MessageID; !copied || !orig.Resubmitted {
		orig.Resubmitted, orig.ResubmittedAs, orig.ResubmittedCopy = true, copySent.Seq, copied
		orig.DeadLetterReason, orig.DeadLetterDescription = deref0(m.DeadLetterReason), deref0(m.DeadLetterErrorDescription)
	}
	if !copySent.Enqueued {
		o.counts.Dropped++
	}
	st := dlqDone
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		if !isLockLost(err) {
			return 0, fmt.Errorf("simulation: complete dead-lettered #%d: %w", seq, err)
		}
		st = dlqSentUncleared
		o.hist.add(orderID, "", "operator: the complete of dead-lettered #%d lost its lock after its resubmission; completed when it comes back, round %d", seq, round)
	}
	after := ""
	if o.gw != nil && s.Kind.Processable() {
		if at, ok := o.gw.firstCharge(orderID); ok && time.Since(at) >= o.retention {
			o.counts.AfterKeyRetention++
			after = fmt.Sprintf(", %v after its first charge: past the key retention %v", time.Since(at).Round(time.Second), o.retention)
		}
	}
	o.hist.add(orderID, "", "operator resubmitted dead-lettered #%d (%s) as #%d, round %d%s", seq, orig.DeadLetterReason, copySent.Seq, round, after)
	if round == 1 {
		o.counts.Early++
	} else {
		o.counts.Late++
	}
	return st, nil
}

func deref0(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
