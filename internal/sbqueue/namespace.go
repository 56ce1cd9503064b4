package sbqueue

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Defaults applied by CreateQueue to zero QueueOptions fields; they are the
// Service Bus defaults.
const (
	DefaultLockDuration             = 60 * time.Second
	DefaultMaxDeliveryCount         = 10
	DefaultDuplicateDetectionWindow = 10 * time.Minute
)

// DeadLetterQueueSuffix is appended to a queue's name to address its
// dead-letter sub-queue, as in "orders/$DeadLetterQueue".
const DeadLetterQueueSuffix = "/$DeadLetterQueue"

// ErrQueueExists is returned by CreateQueue for a name already in use.
var ErrQueueExists = errors.New("sbqueue: queue already exists")

// QueueOptions are a queue's properties. CreateQueue replaces a zero
// LockDuration, MaxDeliveryCount or DuplicateDetectionWindow with the
// Service Bus default; Queue.Options reports the values in effect.
type QueueOptions struct {
	// LockDuration is how long a received message stays locked to its
	// receiver. Default 60 s.
	LockDuration time.Duration

	// MaxDeliveryCount is the number of deliveries after which an abandoned
	// or lock-expired message is dead-lettered. Default 10.
	MaxDeliveryCount int

	// RequiresDuplicateDetection turns on duplicate detection by MessageID.
	RequiresDuplicateDetection bool

	// DuplicateDetectionWindow is how long an accepted MessageID is
	// remembered. Default 10 minutes.
	DuplicateDetectionWindow time.Duration

	// DefaultMessageTimeToLive is the time-to-live of messages that set none,
	// and the upper bound of those that do. Zero means messages never expire.
	DefaultMessageTimeToLive time.Duration

	// DeadLetteringOnMessageExpiration moves expired messages to the
	// dead-letter queue instead of discarding them.
	DeadLetteringOnMessageExpiration bool
}

// withDefaults validates o and fills in the defaults.
func (o QueueOptions) withDefaults() (QueueOptions, error) {
	if o.LockDuration < 0 || o.MaxDeliveryCount < 0 || o.DuplicateDetectionWindow < 0 || o.DefaultMessageTimeToLive < 0 {
		return o, errors.New("sbqueue: queue options must not be negative")
	}
	if o.LockDuration == 0 {
		o.LockDuration = DefaultLockDuration
	}
	if o.MaxDeliveryCount == 0 {
		o.MaxDeliveryCount = DefaultMaxDeliveryCount
	}
	if o.DuplicateDetectionWindow == 0 {
		o.DuplicateDetectionWindow = DefaultDuplicateDetectionWindow
	}
	return o, nil
}

// Namespace holds queues by name, like a Service Bus namespace. Names are
// case-insensitive, as in Service Bus. It is safe for concurrent use.
type Namespace struct {
	clock Clock

	mu     sync.Mutex
	queues map[string]*Queue // by strings.ToLower(name)
}

// NewNamespace returns an empty namespace whose queues take time from
// clock. A nil clock means RealClock().
func NewNamespace(clock Clock) *Namespace {
	if clock == nil {
		clock = RealClock()
	}
	return &Namespace{clock: clock, queues: make(map[string]*Queue)}
}

// CreateQueue creates the queue name, with its dead-letter queue. It returns
// an error wrapping ErrQueueExists if the name is taken.
func (n *Namespace) CreateQueue(name string, o QueueOptions) (*Queue, error) {
	if name == "" || len(name) > 260 || strings.ContainsAny(name, "$") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return nil, fmt.Errorf("sbqueue: invalid queue name %q", name)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	key := strings.ToLower(name)

	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.queues[key]; ok {
		return nil, fmt.Errorf("create %q: %w", name, ErrQueueExists)
	}
	q := newQueue(name, o, n.clock)
	n.queues[key] = q
	return q, nil
}

// Queue returns the queue called name. A name ending in
// DeadLetterQueueSuffix (case-insensitively) resolves to that queue's
// dead-letter queue.
func (n *Namespace) Queue(name string) (*Queue, bool) {
	key := strings.ToLower(name)
	dlq := strings.HasSuffix(key, strings.ToLower(DeadLetterQueueSuffix))
	if dlq {
		key = key[:len(key)-len(DeadLetterQueueSuffix)]
	}

	n.mu.Lock()
	q, ok := n.queues[key]
	n.mu.Unlock()
	if !ok {
		return nil, false
	}
	if dlq {
		return q.dlq, true
	}
	return q, true
}
