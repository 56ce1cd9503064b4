package sbqueue

import (
	"context"
	"errors"
	"fmt"
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

// Receiver is a PeekLock receiver on one queue (or dead-letter queue) with
// the method set of *azservicebus.Receiver that the worker uses, so the real
// worker loop runs against the model unchanged.
//
// As with the SDK, ReceiveMessages must not be called concurrently on one
// Receiver (an overlapping call fails); the settlement methods and
// RenewMessageLock are safe to call concurrently with anything. Settlement
// goes by m.LockToken, so a message can be settled through any Receiver on
// its queue.
type Receiver struct {
	q         *Queue
	receiving atomic.Bool
}

// NewReceiver returns a PeekLock receiver on q. To receive dead-lettered
// messages, call it on q.DeadLetterQueue().
func (q *Queue) NewReceiver() *Receiver { return &Receiver{q: q} }

// ReceiveMessages blocks until at least one message is available or ctx is
// done, then locks and returns up to maxMessages of the messages available
// at that moment. When ctx ends first it returns (nil, ctx.Err()), as the
// SDK does. The options are accepted and ignored: the model does not wait
// TimeAfterFirstMessage for more messages, since that would need real time.
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
	msgs, err := r.q.Receive(ctx, maxMessages)
	if err != nil {
		return nil, err
	}
	out := make([]*azservicebus.ReceivedMessage, len(msgs))
	for i := range msgs {
		out[i] = toSDK(&msgs[i])
	}
	return out, nil
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

// Sender sends to one queue with the SendMessage method of
// *azservicebus.Sender. It is safe for concurrent use.
type Sender struct {
	q *Queue
}

// NewSender returns a Sender on q.
func (q *Queue) NewSender() *Sender { return &Sender{q: q} }

// SendMessage sends m to the queue, like Queue.Send: a duplicate dropped by
// duplicate detection is reported as success. Scheduled messages are not
// modelled: a message with ScheduledEnqueueTime set is refused.
func (s *Sender) SendMessage(ctx context.Context, m *azservicebus.Message, _ *azservicebus.SendMessageOptions) error {
	if m.ScheduledEnqueueTime != nil {
		return errors.New("sbqueue: scheduled messages are not supported")
	}
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
	_, err := s.q.Send(ctx, msg)
	return err
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
