package sbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// maxReceiveMessages is the largest maxMessages the SDK's ReceiveMessages
// accepts (its default link credit).
const maxReceiveMessages = 5000

// errConcurrentReceive is the SDK's error for overlapping ReceiveMessages
// calls on one receiver.
var errConcurrentReceive = errors.New("receiver is already receiving messages. ReceiveMessages() cannot be called concurrently")

// Receiver is a PeekLock receiver on one queue, subscription or dead-letter
// queue with the method set of *azservicebus.Receiver that the worker uses,
// so the real worker loop runs against the model unchanged.
//
// It models the SDK's (v1.11.0) link credit, which the worker's shutdown
// depends on:
//
//   - ReceiveMessages(ctx, n) first issues credit so that n messages can
//     arrive: n minus the credit the SDK counts on the link (issued and not
//     yet taken, which includes messages sent and not yet handed out). The
//     broker sends available messages on that credit at once; each one is
//     locked, and its delivery counted, from the moment it is sent.
//   - The call returns as soon as at least one message has arrived, with up
//     to n of them, oldest first; or, with nothing arrived, when ctx ends,
//     with (nil, ctx.Err()). With ctx already done it still issues the
//     credit, as the SDK does, and returns (nil, ctx.Err()): the SDK's
//     buffer is empty between calls (the releaser empties it) and the
//     transfers on the new credit arrive after the flow's round trip, when
//     the releaser already runs. The credit left when a call returns stays
//     on the link: the SDK never drains it.
//   - Between two calls the SDK runs a releaser: whatever arrives on the
//     leftover credit, and whatever the last call left in the buffer, is
//     released (the AMQP "released" outcome, which Service Bus does not
//     count as a delivery), each using one credit. The next call stops it.
//   - Close detaches the link: its credit is gone, and messages sent on it
//     and never handed out keep their locks until they lapse (a counted
//     delivery). Settlement goes by lock token and still works after Close.
//
// The SDK, after the first message, waits TimeAfterFirstMessage (20 ms) for
// more; the model returns what has arrived by then without waiting, since
// the broker sends in process at once. A message that would have arrived
// within those 20 ms arrives after the call instead and is released by the
// releaser: redelivered later, its delivery count unchanged, so the
// difference cannot raise a count the real SDK would not raise.
//
// As with the SDK, ReceiveMessages must not be called concurrently on one
// Receiver (an overlapping call fails); the settlement methods and
// RenewMessageLock are safe to call concurrently with anything. Settlement
// goes by m.LockToken, so a message can be settled through any Receiver on
// its queue.
type Receiver struct {
	q         *Queue
	receiving atomic.Bool
	l         *link // attached on the first ReceiveMessages; guarded by q.s.mu
}

// NewReceiver returns a PeekLock receiver on q. To receive dead-lettered
// messages, call it on q.DeadLetterQueue(). Its link attaches on the first
// ReceiveMessages call.
func (q *Queue) NewReceiver() *Receiver { return &Receiver{q: q} }

// ErrClosed is returned by ReceiveMessages on a closed Receiver, wrapped in
// an error that errors.As reports as an *azservicebus.Error with Code
// azservicebus.CodeClosed.
var ErrClosed = errors.New("sbqueue: receiver closed")

// ReceiveMessages issues credit and returns up to maxMessages messages sent
// on the link's credit, as described on Receiver. Only
// TimeAfterFirstMessage of the options exists, and the model does not wait
// it.
func (r *Receiver) ReceiveMessages(ctx context.Context, maxMessages int, _ *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	if !r.receiving.CompareAndSwap(false, true) {
		return nil, errConcurrentReceive
	}
	defer r.receiving.Store(false)

	if maxMessages <= 0 {
		return nil, errors.New("maxMessages should be greater than 0")
	}
	if maxMessages > maxReceiveMessages {
		return nil, fmt.Errorf("maxMessages cannot exceed %d", maxReceiveMessages)
	}
	q := r.q
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	if r.l == nil {
		r.l = &link{}
		q.links = append(q.links, r.l)
	}
	l := r.l
	if l.closed {
		return nil, &sbError{code: azservicebus.CodeClosed, err: ErrClosed}
	}
	l.releasing = false // the call stops the releaser
	if add := maxMessages - l.localCredit(); add > 0 {
		l.credit += add
	}
	if err := ctx.Err(); err != nil {
		r.startReleaser()
		return nil, err
	}
	for {
		q.sweep() // dispatches on the new credit, and what lapsed meanwhile
		if len(l.buf) > 0 {
			n := min(maxMessages, len(l.buf))
			out := make([]*azservicebus.ReceivedMessage, n)
			for i := range n {
				out[i] = toSDK(&l.buf[i])
			}
			l.buf = l.buf[n:]
			r.startReleaser()
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			r.startReleaser()
			return nil, err
		}
		q.block(ctx, l.waitBuf())
	}
}

// startReleaser starts the SDK's releaser as a call returns: it releases
// what the call left in the buffer, and from now on every arrival. Requires
// q.s.mu.
func (r *Receiver) startReleaser() {
	now := r.q.clock.Now()
	r.l.releasing = true
	r.q.releaseBuffered(r.l, now)
	r.q.dispatchPair(now)
}

// Close detaches the receiver's link, as *azservicebus.Receiver.Close
// does: its credit is gone, and messages sent on it and not handed out keep
// their locks until they lapse. Later ReceiveMessages calls fail with
// CodeClosed; settlements still work.
func (r *Receiver) Close(_ context.Context) error {
	q := r.q
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	if r.l == nil {
		r.l = &link{}
	}
	if r.l.closed {
		return nil
	}
	r.l.closed, r.l.credit, r.l.releasing, r.l.buf = true, 0, false, nil
	r.l.signal()
	q.links = slices.DeleteFunc(q.links, func(l *link) bool { return l == r.l })
	q.nextLink = 0
	return nil
}

// Credit reports the credit the broker holds for the receiver's link and
// the messages sent on it not yet handed out, for tests.
func (r *Receiver) Credit() (credit, buffered int) {
	r.q.s.mu.Lock()
	defer r.q.s.mu.Unlock()
	if r.l == nil {
		return 0, 0
	}
	return r.l.credit, len(r.l.buf)
}

// CompleteMessage completes m. A lost lock is reported as an
// *azservicebus.Error with Code azservicebus.CodeLockLost.
func (r *Receiver) CompleteMessage(_ context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.CompleteMessageOptions) error {
	return sdkError(r.q.Complete(m.LockToken))
}

// AbandonMessage abandons m, applying o.PropertiesToModify. A lost lock is
// reported as an *azservicebus.Error with Code azservicebus.CodeLockLost.
func (r *Receiver) AbandonMessage(_ context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error {
	var props map[string]any
	if o != nil {
		props = o.PropertiesToModify
	}
	return sdkError(r.q.Abandon(m.LockToken, props))
}

// DeadLetterMessage dead-letters m with o's Reason, ErrorDescription and
// PropertiesToModify (an unset reason or description is stored as "", as
// the SDK sends it). A lost lock is reported as an *azservicebus.Error with
// Code azservicebus.CodeLockLost.
func (r *Receiver) DeadLetterMessage(_ context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error {
	var reason, description string
	var props map[string]any
	if o != nil {
		if o.Reason != nil {
			reason = *o.Reason
		}
		if o.ErrorDescription != nil {
			description = *o.ErrorDescription
		}
		props = o.PropertiesToModify
	}
	return sdkError(r.q.DeadLetter(m.LockToken, reason, description, props))
}

// RenewMessageLock renews m's lock and, like the SDK, sets m.LockedUntil to
// the new expiry. A lost lock is reported as an *azservicebus.Error with
// Code azservicebus.CodeLockLost.
func (r *Receiver) RenewMessageLock(_ context.Context, m *azservicebus.ReceivedMessage, _ *azservicebus.RenewMessageLockOptions) error {
	until, err := r.q.RenewLock(m.LockToken)
	if err != nil {
		return sdkError(err)
	}
	m.LockedUntil = &until
	return nil
}

// Sender sends to one queue or topic with the SendMessage,
// ScheduleMessages and CancelScheduledMessages methods of
// *azservicebus.Sender. It is safe for concurrent use.
type Sender struct {
	send func(context.Context, Message) (bool, error) // Queue.Send or Topic.Send
	q    *Queue                                       // nil on a topic, whose scheduling is not modelled
}

// NewSender returns a Sender on q. On a dead-letter queue every send fails
// with ErrDeadLetterQueue.
func (q *Queue) NewSender() *Sender { return &Sender{send: q.Send, q: q} }

// errTopicSchedule is the error of scheduling on a topic's Sender.
var errTopicSchedule = errors.New("sbqueue: scheduled messages are modelled on queues only, not on topics")

// SendMessage sends m to the queue or topic, like Queue.Send or Topic.Send:
// a duplicate dropped by duplicate detection is reported as success. A
// message with ScheduledEnqueueTime set is scheduled, as by
// ScheduleMessages (on a queue only).
func (s *Sender) SendMessage(ctx context.Context, m *azservicebus.Message, _ *azservicebus.SendMessageOptions) error {
	if m.ScheduledEnqueueTime != nil {
		_, err := s.ScheduleMessages(ctx, []*azservicebus.Message{m}, *m.ScheduledEnqueueTime, nil)
		return err
	}
	_, err := s.send(ctx, fromSDK(m))
	return err
}

// ScheduleMessages schedules ms to be enqueued at scheduledEnqueueTime and
// returns their sequence numbers, like Queue.Schedule. A topic's Sender
// refuses it.
func (s *Sender) ScheduleMessages(ctx context.Context, ms []*azservicebus.Message, scheduledEnqueueTime time.Time, _ *azservicebus.ScheduleMessagesOptions) ([]int64, error) {
	if s.q == nil {
		return nil, errTopicSchedule
	}
	msgs := make([]Message, len(ms))
	for i, m := range ms {
		msgs[i] = fromSDK(m)
	}
	return s.q.Schedule(ctx, msgs, scheduledEnqueueTime)
}

// CancelScheduledMessages cancels scheduled messages by the sequence
// numbers ScheduleMessages returned, like Queue.CancelScheduled.
func (s *Sender) CancelScheduledMessages(_ context.Context, seqs []int64, _ *azservicebus.CancelScheduledMessagesOptions) error {
	if s.q == nil {
		return errTopicSchedule
	}
	return s.q.CancelScheduled(seqs)
}

// fromSDK converts a message to send into the model's.
func fromSDK(m *azservicebus.Message) Message {
	msg := Message{
		Body:                  m.Body,
		ApplicationProperties: m.ApplicationProperties,
	}
	for _, f := range []struct {
		dst *string
		src *string
	}{
		{&msg.MessageID, m.MessageID},
		{&msg.ContentType, m.ContentType},
		{&msg.CorrelationID, m.CorrelationID},
		{&msg.Subject, m.Subject},
		{&msg.ReplyTo, m.ReplyTo},
		{&msg.ReplyToSessionID, m.ReplyToSessionID},
		{&msg.To, m.To},
		{&msg.SessionID, m.SessionID},
		{&msg.PartitionKey, m.PartitionKey},
	} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	if m.TimeToLive != nil {
		msg.TimeToLive = *m.TimeToLive
	}
	return msg
}

// toSDK converts a delivery to the SDK's type, filling the fields the SDK
// fills from a Service Bus transfer. rm is not retained.
func toSDK(rm *ReceivedMessage) *azservicebus.ReceivedMessage {
	m := &azservicebus.ReceivedMessage{
		ApplicationProperties: rm.ApplicationProperties,
		Body:                  rm.Body,
		ContentType:           optional(rm.ContentType),
		CorrelationID:         optional(rm.CorrelationID),
		DeliveryCount:         rm.DeliveryCount,
		EnqueuedTime:          optionalTime(rm.EnqueuedTime),
		ScheduledEnqueueTime:  optionalTime(rm.ScheduledEnqueueTime),
		ExpiresAt:             optionalTime(rm.ExpiresAt),
		LockedUntil:           optionalTime(rm.LockedUntil),
		LockToken:             rm.LockToken,
		MessageID:             rm.MessageID,
		PartitionKey:          optional(rm.PartitionKey),
		ReplyTo:               optional(rm.ReplyTo),
		ReplyToSessionID:      optional(rm.ReplyToSessionID),
		SequenceNumber:        &rm.SequenceNumber,
		SessionID:             optional(rm.SessionID),
		State:                 azservicebus.MessageStateActive,
		Subject:               optional(rm.Subject),
		To:                    optional(rm.To),
		DeadLetterSource:      optional(rm.DeadLetterSource),
	}
	if rm.TimeToLive > 0 {
		ttl := rm.TimeToLive
		m.TimeToLive = &ttl
	}
	// Like the SDK, take the dead-letter reason and description from the
	// application properties.
	if s, ok := rm.ApplicationProperties[PropertyDeadLetterReason].(string); ok {
		m.DeadLetterReason = &s
	}
	if s, ok := rm.ApplicationProperties[PropertyDeadLetterErrorDescription].(string); ok {
		m.DeadLetterErrorDescription = &s
	}
	return m
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// sdkError translates the model's errors into the SDK's: ErrLockLost
// becomes an error that errors.As reports as an *azservicebus.Error with
// Code azservicebus.CodeLockLost, and that still matches ErrLockLost with
// errors.Is.
func sdkError(err error) error {
	if errors.Is(err, ErrLockLost) {
		return &sbError{code: azservicebus.CodeLockLost, err: err}
	}
	return err
}

// sbError is an error that errors.As can turn into an *azservicebus.Error.
// The SDK's Error keeps its cause in an unexported field, so the model
// cannot build one that also unwraps to the model's own error.
type sbError struct {
	code azservicebus.Code
	err  error
}

// Error formats like *azservicebus.Error: "(code): cause".
func (e *sbError) Error() string { return fmt.Sprintf("(%s): %v", e.code, e.err) }

func (e *sbError) Unwrap() error { return e.err }

// As sets an **azservicebus.Error target to an Error with e's code.
func (e *sbError) As(target any) bool {
	t, ok := target.(**azservicebus.Error)
	if ok {
		*t = &azservicebus.Error{Code: e.code}
	}
	return ok
}
