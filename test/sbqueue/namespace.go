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

// Errors for names already in use. Queues and topics share one set of
// names, as in Service Bus: the error names what holds the name.
var (
	// ErrQueueExists is returned by CreateQueue and CreateTopic for the
	// name of a queue.
	ErrQueueExists = errors.New("sbqueue: queue already exists")

	// ErrTopicExists is returned by CreateQueue and CreateTopic for the
	// name of a topic.
	ErrTopicExists = errors.New("sbqueue: topic already exists")

	// ErrSubscriptionExists is returned by Topic.CreateSubscription for the
	// name of one of the topic's subscriptions.
	ErrSubscriptionExists = errors.New("sbqueue: subscription already exists")
)

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

// Namespace holds queues and topics by name, like a Service Bus namespace.
// Names are case-insensitive, as in Service Bus, and a queue and a topic
// cannot share one. It is safe for concurrent use.
type Namespace struct {
	clock            Clock
	allowUnrealistic bool // NamespaceOptions.AllowUnrealisticTimings

	mu     sync.Mutex
	queues map[string]*Queue // by strings.ToLower(name)
	topics map[string]*Topic // by strings.ToLower(name)
}

// NewNamespace returns an empty namespace whose queues take time from
// clock. A nil clock means RealClock().
func NewNamespace(clock Clock) *Namespace {
	if clock == nil {
		clock = RealClock()
	}
	return &Namespace{clock: clock, queues: make(map[string]*Queue), topics: make(map[string]*Topic)}
}

// validEntityName reports whether name can name a queue or a topic: 1 to
// 260 characters, no "$", no leading or trailing "/", and no
// SubscriptionsSegment, which would make subscription paths ambiguous.
func validEntityName(name string) bool {
	return name != "" && len(name) <= 260 && !strings.ContainsAny(name, "$") &&
		!strings.HasPrefix(name, "/") && !strings.HasSuffix(name, "/") &&
		!strings.Contains(strings.ToLower(name), strings.ToLower(SubscriptionsSegment))
}

// taken returns the error for a name held by a queue or a topic, or nil.
// Requires n.mu.
func (n *Namespace) taken(name, key string) error {
	if _, ok := n.queues[key]; ok {
		return fmt.Errorf("create %q: %w", name, ErrQueueExists)
	}
	if _, ok := n.topics[key]; ok {
		return fmt.Errorf("create %q: %w", name, ErrTopicExists)
	}
	return nil
}

// CreateQueue creates the queue name, with its dead-letter queue. It returns
// an error wrapping ErrQueueExists or ErrTopicExists if the name is taken.
func (n *Namespace) CreateQueue(name string, o QueueOptions) (*Queue, error) {
	if !validEntityName(name) {
		return nil, fmt.Errorf("sbqueue: invalid queue name %q", name)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	entity := fmt.Sprintf("sbqueue: queue %q", name)
	if err := errors.Join(checkLockDuration(entity, o.LockDuration, n.allowUnrealistic),
		checkDuplicateWindow(entity, o.DuplicateDetectionWindow, n.allowUnrealistic),
		checkMaxDeliveryCount(entity, o.MaxDeliveryCount)); err != nil {
		return nil, err
	}
	key := strings.ToLower(name)

	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.taken(name, key); err != nil {
		return nil, err
	}
	q := newQueue(name, o, n.clock)
	n.queues[key] = q
	return q, nil
}

// CreateTopic creates the topic name, without subscriptions. It returns an
// error wrapping ErrQueueExists or ErrTopicExists if the name is taken.
func (n *Namespace) CreateTopic(name string, o TopicOptions) (*Topic, error) {
	if !validEntityName(name) {
		return nil, fmt.Errorf("sbqueue: invalid topic name %q", name)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkDuplicateWindow(fmt.Sprintf("sbqueue: topic %q", name), o.DuplicateDetectionWindow, n.allowUnrealistic); err != nil {
		return nil, err
	}
	key := strings.ToLower(name)

	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.taken(name, key); err != nil {
		return nil, err
	}
	t := newTopic(name, o, n.clock)
	t.allowUnrealistic = n.allowUnrealistic
	n.topics[key] = t
	return t, nil
}

// Topic returns the topic called name (case-insensitively).
func (n *Namespace) Topic(name string) (*Topic, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.topics[strings.ToLower(name)]
	return t, ok
}

// Queue returns the queue an entity path names, case-insensitively, as
// Service Bus resolves it:
//
//	orders                                          the queue orders
//	orders/$DeadLetterQueue                         its dead-letter queue
//	order-events/Subscriptions/loyalty              a topic's subscription
//	order-events/Subscriptions/loyalty/$DeadLetterQueue
//	                                                the subscription's dead-letter queue
//
// A topic's own name is not a queue: use Topic for it.
func (n *Namespace) Queue(name string) (*Queue, bool) {
	key := strings.ToLower(name)
	dlq := strings.HasSuffix(key, strings.ToLower(DeadLetterQueueSuffix))
	if dlq {
		key = key[:len(key)-len(DeadLetterQueueSuffix)]
	}

	var q *Queue
	if i := strings.LastIndex(key, strings.ToLower(SubscriptionsSegment)); i >= 0 {
		t, ok := n.Topic(key[:i])
		if !ok {
			return nil, false
		}
		if q, ok = t.Subscription(key[i+len(SubscriptionsSegment):]); !ok {
			return nil, false
		}
	} else {
		n.mu.Lock()
		q = n.queues[key]
		n.mu.Unlock()
		if q == nil {
			return nil, false
		}
	}
	if dlq {
		return q.dlq, true
	}
	return q, true
}
