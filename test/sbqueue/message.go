package sbqueue

import (
	"encoding/hex"
	"maps"
	"math/rand/v2"
	"time"
)

// Application property keys under which a dead-lettered message carries its
// reason and description, as Service Bus stores them.
const (
	PropertyDeadLetterReason           = "DeadLetterReason"
	PropertyDeadLetterErrorDescription = "DeadLetterErrorDescription"
)

// Dead-letter reasons the queue itself assigns, with the descriptions
// Service Bus gives them.
const (
	ReasonMaxDeliveryCountExceeded = "MaxDeliveryCountExceeded"
	ReasonTTLExpired               = "TTLExpiredException"

	descriptionTTLExpired = "The message expired and was dead lettered."
)

// Message is what a sender gives to Queue.Send.
type Message struct {
	// MessageID identifies the message for duplicate detection. If empty,
	// the queue assigns a random UUID string.
	MessageID string

	// Body is the message payload. The queue keeps its own copy.
	Body []byte

	ContentType      string // MIME type of Body
	CorrelationID    string // application correlation identifier
	Subject          string // application label
	ReplyTo          string // address to reply to
	ReplyToSessionID string // session to reply to
	To               string // application destination
	SessionID        string // session identifier (stored, not enforced)
	PartitionKey     string // partition key (stored, not enforced)

	// ApplicationProperties are user properties. The queue keeps a shallow
	// copy of the map.
	ApplicationProperties map[string]any

	// TimeToLive is how long the message lives after it is enqueued; zero
	// means the queue's DefaultMessageTimeToLive. It is capped at that
	// default when the queue has one.
	TimeToLive time.Duration
}

// clone returns a copy of m that shares no mutable memory with it (property
// values are shared).
func (m Message) clone() Message {
	if m.Body != nil {
		m.Body = append([]byte(nil), m.Body...)
	}
	m.ApplicationProperties = maps.Clone(m.ApplicationProperties)
	return m
}

// ReceivedMessage is one delivery of a message, or a view of it from Peek or
// Snapshot. It is a value that shares nothing with the queue: it is safe to
// keep and modify.
type ReceivedMessage struct {
	// Message is the message as sent, with TimeToLive set to the effective
	// value and ApplicationProperties as modified by settlements; on a
	// dead-lettered message they include PropertyDeadLetterReason and
	// PropertyDeadLetterErrorDescription.
	Message

	// LockToken identifies this delivery's lock, in RFC 4122 byte order
	// (what the SDK exposes as ReceivedMessage.LockToken). Every delivery
	// has a new token; it is zero in Peek results.
	LockToken [16]byte

	// SequenceNumber is assigned at enqueue: 1 for a queue's first message,
	// then one higher for each message enqueued. A dead-lettered message
	// keeps its number.
	SequenceNumber int64

	// DeliveryCount is the number of counted deliveries, including this
	// one: 1 on the first delivery. Delivery counting restarts when a
	// message moves to the dead-letter queue.
	DeliveryCount uint32

	EnqueuedTime time.Time // when the message was enqueued
	// ScheduledEnqueueTime is when a scheduled message is (or was) to be
	// enqueued (see Queue.Schedule); zero for a message sent to be
	// enqueued at once.
	ScheduledEnqueueTime time.Time
	LockedUntil          time.Time // when this delivery's lock expires; zero if not locked
	ExpiresAt            time.Time // EnqueuedTime + TimeToLive; zero if it never expires

	// Set on messages in a dead-letter queue. DeadLetterSource is empty for
	// a queue's own dead-letter queue, as in Service Bus (it names the
	// original entity only after auto-forwarding).
	DeadLetterReason, DeadLetterErrorDescription, DeadLetterSource string
}

// entry is a message held by a queue. Its fields are guarded by the mutex
// of the queue that holds it.
type entry struct {
	msg        Message
	seq        int64
	enqueued   time.Time
	expiresAt  time.Time
	deliveries uint32 // counted deliveries so far

	scheduledAt time.Time // the scheduled enqueue time; zero if not scheduled
	schedIdx    int       // position in the scheduled messages, or -1

	token       [16]byte // current lock; valid while the entry is in Queue.locked
	lockedUntil time.Time

	dlReason, dlDescription, dlSource string

	availIdx  int // position in Queue.avail, or -1
	expiryIdx int // position in Queue.expiring, or -1
}

// view returns the entry as a ReceivedMessage, copying everything mutable.
func (e *entry) view(withLock bool) ReceivedMessage {
	rm := ReceivedMessage{
		Message:                    e.msg.clone(),
		SequenceNumber:             e.seq,
		DeliveryCount:              e.deliveries,
		EnqueuedTime:               e.enqueued,
		ScheduledEnqueueTime:       e.scheduledAt,
		ExpiresAt:                  e.expiresAt,
		DeadLetterReason:           e.dlReason,
		DeadLetterErrorDescription: e.dlDescription,
		DeadLetterSource:           e.dlSource,
	}
	if withLock {
		rm.LockToken = e.token
		rm.LockedUntil = e.lockedUntil
	}
	return rm
}

// newUUID returns a random (version 4) UUID. Lock tokens and assigned
// message IDs need uniqueness, not secrecy, so math/rand/v2's
// ChaCha8-backed generator is enough.
func newUUID() [16]byte {
	var u [16]byte
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		u[i] = byte(a >> (8 * i))
		u[8+i] = byte(b >> (8 * i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// uuidString formats u in the canonical 8-4-4-4-12 form.
func uuidString(u [16]byte) string {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return string(buf[:])
}
