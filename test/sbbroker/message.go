package sbbroker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf16"

	"github.com/Azure/go-amqp"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker/internal/wire"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// Message annotation keys Service Bus sets on deliveries and the SDK maps
// to ReceivedMessage fields.
const (
	annotLockedUntil      = "x-opt-locked-until"
	annotSequenceNumber   = "x-opt-sequence-number"
	annotEnqueuedTime     = "x-opt-enqueued-time"
	annotPartitionKey     = "x-opt-partition-key"
	annotDeadLetterSource = "x-opt-deadletter-source"
	annotScheduledTime    = "x-opt-scheduled-enqueue-time"
)

// maxHeaderTTL is the longest time-to-live an AMQP header carries: its ttl
// field is a uint32 of milliseconds.
const maxHeaderTTL = time.Duration(math.MaxUint32) * time.Millisecond

// lockTokenTag converts an RFC 4122 lock token into the delivery tag
// Service Bus sends: .NET Guid.ToByteArray order, with the first three
// fields little-endian. The conversion is its own inverse.
func lockTokenTag(token [16]byte) [16]byte {
	t := token
	t[0], t[1], t[2], t[3] = token[3], token[2], token[1], token[0]
	t[4], t[5] = token[5], token[4]
	t[6], t[7] = token[7], token[6]
	return t
}

// encodeDelivery encodes m as the AMQP message of a PeekLock delivery, with
// the annotation types the SDK asserts.
func encodeDelivery(m sbqueue.ReceivedMessage) ([]byte, error) {
	return toAMQP(m).MarshalBinary()
}

func toAMQP(m sbqueue.ReceivedMessage) *amqp.Message {
	annotations := amqp.Annotations{
		annotSequenceNumber: m.SequenceNumber,
		annotEnqueuedTime:   m.EnqueuedTime,
	}
	if !m.LockedUntil.IsZero() {
		annotations[annotLockedUntil] = m.LockedUntil
	}
	if m.PartitionKey != "" {
		annotations[annotPartitionKey] = m.PartitionKey
	}
	if m.DeadLetterSource != "" {
		annotations[annotDeadLetterSource] = m.DeadLetterSource
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		annotations[annotScheduledTime] = m.ScheduledEnqueueTime
	}
	header := &amqp.MessageHeader{Priority: 4}
	if m.DeliveryCount > 0 {
		header.DeliveryCount = m.DeliveryCount - 1 // the SDK adds one
	}
	props := &amqp.MessageProperties{MessageID: m.MessageID}
	if !m.ExpiresAt.IsZero() {
		// The real expiry, as Service Bus sends it: the message's
		// effective time-to-live (its own, or the entity's default, which
		// caps it) in the header, from which the SDK computes ExpiresAt =
		// EnqueuedTime + TimeToLive, and the absolute expiry in the
		// properties. The header's ttl is milliseconds in a uint32: a
		// longer time-to-live (over 49.7 days) is left out of the header,
		// as Service Bus leaves it out, rather than sent wrapped around.
		if ttl := m.ExpiresAt.Sub(m.EnqueuedTime); ttl <= maxHeaderTTL {
			header.TTL = ttl
		}
		created, expires := m.EnqueuedTime, m.ExpiresAt
		props.CreationTime, props.AbsoluteExpiryTime = &created, &expires
	}
	setString := func(dst **string, v string) {
		if v != "" {
			*dst = &v
		}
	}
	setString(&props.ContentType, m.ContentType)
	setString(&props.Subject, m.Subject)
	setString(&props.ReplyTo, m.ReplyTo)
	setString(&props.To, m.To)
	setString(&props.GroupID, m.SessionID)
	setString(&props.ReplyToGroupID, m.ReplyToSessionID)
	if m.CorrelationID != "" {
		props.CorrelationID = m.CorrelationID
	}
	appProps := make(map[string]any, len(m.ApplicationProperties)+2)
	for k, v := range m.ApplicationProperties {
		appProps[k] = v
	}
	if m.DeadLetterReason != "" {
		appProps[sbqueue.PropertyDeadLetterReason] = m.DeadLetterReason
	}
	if m.DeadLetterErrorDescription != "" {
		appProps[sbqueue.PropertyDeadLetterErrorDescription] = m.DeadLetterErrorDescription
	}
	if len(appProps) == 0 {
		appProps = nil
	}
	return &amqp.Message{
		Header:                header,
		Annotations:           annotations,
		Properties:            props,
		ApplicationProperties: appProps,
		Data:                  [][]byte{m.Body},
	}
}

// errScheduled refuses scheduled messages, which the queue model does not
// hold.
var errScheduled = errors.New("scheduled messages are not supported by the test broker")

// fromAMQP converts a message a client sent into the queue model's form.
func fromAMQP(am *amqp.Message) (sbqueue.Message, error) {
	var m sbqueue.Message
	if _, ok := am.Annotations[annotScheduledTime]; ok {
		return m, errScheduled
	}
	if am.Properties != nil {
		p := am.Properties
		if p.MessageID != nil {
			m.MessageID = fmt.Sprint(p.MessageID)
		}
		if p.CorrelationID != nil {
			m.CorrelationID = fmt.Sprint(p.CorrelationID)
		}
		deref := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		m.ContentType = deref(p.ContentType)
		m.Subject = deref(p.Subject)
		m.ReplyTo = deref(p.ReplyTo)
		m.To = deref(p.To)
		m.SessionID = deref(p.GroupID)
		m.ReplyToSessionID = deref(p.ReplyToGroupID)
	}
	if pk, ok := am.Annotations[annotPartitionKey].(string); ok {
		m.PartitionKey = pk
	}
	if am.Header != nil {
		m.TimeToLive = am.Header.TTL
	}
	if len(am.ApplicationProperties) > 0 {
		m.ApplicationProperties = am.ApplicationProperties
	}
	switch len(am.Data) {
	case 0:
		if am.Value != nil || am.Sequence != nil {
			return m, errors.New("only data-section bodies are supported")
		}
	case 1:
		m.Body = am.Data[0]
	default:
		for _, d := range am.Data {
			m.Body = append(m.Body, d...)
		}
	}
	return m, nil
}

// decodeSend decodes a transfer from a client sender: one message, or the
// inner messages of a batch.
func decodeSend(format uint32, data []byte) ([]sbqueue.Message, error) {
	var env amqp.Message
	if err := env.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	if format != batchFormat {
		m, err := fromAMQP(&env)
		return []sbqueue.Message{m}, err
	}
	ms := make([]sbqueue.Message, 0, len(env.Data))
	for i, d := range env.Data {
		var inner amqp.Message
		if err := inner.UnmarshalBinary(d); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		m, err := fromAMQP(&inner)
		if err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// MaxMessageIDLength is the longest MessageId Service Bus accepts, in
// UTF-16 code units (see messageIDLength). A longer one fails the send (for
// a batch, the whole batch) and the scheduling.
const MaxMessageIDLength = 128

// messageIDLength returns the length of id as Service Bus measures it. The
// documentation says "characters"; Service Bus is a .NET service, whose
// string length counts UTF-16 code units, so a character outside the Basic
// Multilingual Plane counts as 2 (inferred, not documented). A byte that is
// not valid UTF-8 counts as one unit, as the U+FFFD it decodes to.
func messageIDLength(id string) int {
	n := 0
	for _, r := range id {
		n += utf16.RuneLen(r)
	}
	return n
}

// condArgumentOutOfRange is the condition the broker rejects a too-long
// MessageId with: the one Service Bus uses for an argument outside its
// limits (com.microsoft:argument-out-of-range). The SDK does not map it, so
// it retries the send (RetryOptions) and then returns the error to the
// sender.
const condArgumentOutOfRange wire.Symbol = "com.microsoft:argument-out-of-range"

// enqueue stores what a client sender transferred and returns the outcome
// to settle the transfer with. Duplicates dropped by duplicate detection
// are accepted, as Service Bus does, but unlike Service Bus the broker
// logs each one with its MessageId and the window, and counts it (see
// Broker.Dropped).
func (c *conn) enqueue(l *link, format uint32, data []byte) any {
	// Counted under the entity's own name, whatever case the client used.
	var (
		kind, name string
		send       func(context.Context, []sbqueue.Message) ([]int, time.Duration, error)
	)
	if l.topic != nil {
		kind, name, send = "topic", l.topic.Name(), l.topic.SendBatchReport
	} else {
		kind, name, send = "queue", l.queue.Name(), l.queue.SendBatchReport
	}
	ms, err := decodeSend(format, data)
	if errors.Is(err, errScheduled) {
		return c.b.reject(kind, name, condNotAllowed, err.Error())
	}
	if err != nil {
		return c.b.reject(kind, name, condDecodeError, err.Error())
	}
	for i, m := range ms {
		if n := messageIDLength(m.MessageID); n > MaxMessageIDLength {
			return c.b.reject(kind, name, condArgumentOutOfRange, fmt.Sprintf(
				"message %d: the MessageId is %d UTF-16 code units long; the maximum is %d", i, n, MaxMessageIDLength))
		}
	}
	dropped, window, err := send(context.Background(), ms)
	if err != nil {
		return c.b.reject(kind, name, condNotAllowed, err.Error())
	}
	for _, i := range dropped {
		c.b.dropped(kind, name, ms[i].MessageID, window)
	}
	return wire.Accepted{}
}
