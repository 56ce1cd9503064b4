package sbqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// SubscriptionsSegment joins a topic's name and a subscription's name in the
// subscription's entity path, as in "order-events/Subscriptions/loyalty";
// the subscription's dead-letter queue adds DeadLetterQueueSuffix. Service
// Bus matches it case-insensitively, like every entity name.
const SubscriptionsSegment = "/Subscriptions/"

// maxSubscriptionNameLength is the longest subscription name Service Bus
// accepts.
const maxSubscriptionNameLength = 50

// TopicOptions are a topic's properties: those Service Bus keeps on the
// topic rather than on its subscriptions. CreateTopic replaces a zero
// DuplicateDetectionWindow with the Service Bus default.
type TopicOptions struct {
	// RequiresDuplicateDetection turns on duplicate detection by MessageID
	// at the topic: a duplicate is dropped before it reaches any
	// subscription.
	RequiresDuplicateDetection bool

	// DuplicateDetectionWindow is how long an accepted MessageID is
	// remembered. Default 10 minutes.
	DuplicateDetectionWindow time.Duration

	// DefaultMessageTimeToLive is the time-to-live of messages that set
	// none, and the upper bound of those that do; each subscription's own
	// default bounds it again. Zero means no bound at the topic.
	DefaultMessageTimeToLive time.Duration
}

func (o TopicOptions) withDefaults() (TopicOptions, error) {
	if o.DuplicateDetectionWindow < 0 || o.DefaultMessageTimeToLive < 0 {
		return o, errors.New("sbqueue: topic options must not be negative")
	}
	if o.DuplicateDetectionWindow == 0 {
		o.DuplicateDetectionWindow = DefaultDuplicateDetectionWindow
	}
	return o, nil
}

// SubscriptionOptions are a subscription's properties. A subscription has no
// duplicate detection of its own (Service Bus keeps it on the topic).
// CreateSubscription replaces a zero LockDuration or MaxDeliveryCount with
// the Service Bus default.
type SubscriptionOptions struct {
	// LockDuration is how long a received message stays locked to its
	// receiver. Default 60 s.
	LockDuration time.Duration

	// MaxDeliveryCount is the number of deliveries after which an abandoned
	// or lock-expired message is dead-lettered. Default 10.
	MaxDeliveryCount int

	// DefaultMessageTimeToLive bounds the time-to-live of the
	// subscription's copies, after the topic's bound. Zero means no bound.
	DefaultMessageTimeToLive time.Duration

	// DeadLetteringOnMessageExpiration moves expired messages to the
	// subscription's dead-letter queue instead of discarding them.
	DeadLetteringOnMessageExpiration bool
}

// TopicCounters are cumulative counts of what happened at one topic, before
// fan-out; each subscription counts its own copies in its Counters.
type TopicCounters struct {
	Sent              int64 // messages accepted and fanned out (also while there were no subscriptions)
	DuplicatesDropped int64 // sends accepted and dropped by the topic's duplicate detection
	Discarded         int64 // accepted messages that reached no subscription, because the topic had none
}

// Topic is one Service Bus topic: what is sent to it is copied to every one
// of its subscriptions (the default rule, TrueFilter, on each), and each
// subscription is a Queue with its own locks, delivery counts,
// MaxDeliveryCount, time-to-live and dead-letter queue. Receive from a
// subscription as from any queue; a topic itself cannot be received from.
//
// The model implements only the default rule. Service Bus subscriptions
// can have SQL and correlation filters and actions instead; the model does
// not, so every subscription sees every message. That cannot hide a defect
// of code that relies on the default rule; code that adds rules needs a
// test against Service Bus.
//
// Duplicate detection is the topic's, as in Service Bus: one window for the
// topic, and a MessageID accepted less than the window ago is dropped before
// fan-out, so no subscription gets it. A message accepted while the topic
// has no subscription is lost (counted in TopicCounters.Discarded), as in
// Service Bus, and a subscription created later gets only what is sent
// after it exists. Every subscription's copy of a message has the sequence
// number the topic assigned it.
//
// Its methods are safe for concurrent use. A send is atomic with respect to
// other sends: every subscription gets concurrent sends' messages in the
// same order.
type Topic struct {
	name             string
	opts             TopicOptions
	clock            Clock
	allowUnrealistic bool // the namespace's NamespaceOptions.AllowUnrealisticTimings

	mu       sync.Mutex // guards the fields below; taken before a subscription's mutex
	subs     []*Queue   // in creation order
	byName   map[string]*Queue
	nextSeq  int64
	dedup    dedupHistory
	counters TopicCounters
}

func newTopic(name string, o TopicOptions, clock Clock) *Topic {
	return &Topic{name: name, opts: o, clock: clock, byName: make(map[string]*Queue)}
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Options returns the topic's options with defaults applied.
func (t *Topic) Options() TopicOptions { return t.opts }

// Counters returns the topic's counters.
func (t *Topic) Counters() TopicCounters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counters
}

// CreateSubscription creates the subscription name on t, with its
// dead-letter queue, and returns it as a Queue named
// "<topic>/Subscriptions/<name>". It gets the messages sent to t from now
// on. Names are checked as Azure checks them (1 to 50 letters, digits,
// '.', '-' and '_', starting and ending with a letter or digit) and are
// case-insensitive; a name in use returns an error wrapping
// ErrSubscriptionExists.
func (t *Topic) CreateSubscription(name string, o SubscriptionOptions) (*Queue, error) {
	if err := checkSubscriptionName(name); err != nil {
		return nil, err
	}
	qo, err := QueueOptions{
		LockDuration:                     o.LockDuration,
		MaxDeliveryCount:                 o.MaxDeliveryCount,
		DefaultMessageTimeToLive:         o.DefaultMessageTimeToLive,
		DeadLetteringOnMessageExpiration: o.DeadLetteringOnMessageExpiration,
	}.withDefaults()
	if err != nil {
		return nil, err
	}
	entity := fmt.Sprintf("sbqueue: subscription %q of topic %q", name, t.name)
	if err := errors.Join(checkLockDuration(entity, qo.LockDuration, t.allowUnrealistic),
		checkMaxDeliveryCount(entity, qo.MaxDeliveryCount)); err != nil {
		return nil, err
	}
	qo.DuplicateDetectionWindow = 0 // the topic's, not the subscription's
	key := strings.ToLower(name)

	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byName[key]; ok {
		return nil, fmt.Errorf("create subscription %q on %s: %w", name, t.name, ErrSubscriptionExists)
	}
	q := newQueue(t.name+SubscriptionsSegment+name, qo, t.clock)
	q.topic, q.dlq.topic = t, t
	t.byName[key] = q
	t.subs = append(t.subs, q)
	return q, nil
}

// Subscription returns the subscription called name (case-insensitively);
// a name ending in DeadLetterQueueSuffix returns its dead-letter queue.
func (t *Topic) Subscription(name string) (*Queue, bool) {
	key := strings.ToLower(name)
	dlq := strings.HasSuffix(key, strings.ToLower(DeadLetterQueueSuffix))
	if dlq {
		key = key[:len(key)-len(DeadLetterQueueSuffix)]
	}
	t.mu.Lock()
	q, ok := t.byName[key]
	t.mu.Unlock()
	if !ok {
		return nil, false
	}
	if dlq {
		return q.dlq, true
	}
	return q, true
}

// Subscriptions returns the topic's subscriptions in creation order.
func (t *Topic) Subscriptions() []*Queue {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.subs)
}

// Send sends m to the topic: every subscription gets a copy. With duplicate
// detection on, a message whose MessageID was accepted less than
// DuplicateDetectionWindow ago is accepted but dropped before fan-out:
// Send then returns (false, nil), as Service Bus reports success to the
// sender. A MessageID accepted exactly DuplicateDetectionWindow ago or
// earlier is accepted, and the window restarts from this send.
func (t *Topic) Send(ctx context.Context, m Message) (enqueued bool, err error) {
	n, err := t.SendBatch(ctx, []Message{m})
	return n == 1, err
}

// SendBatch sends ms atomically and in order, applying duplicate detection
// to each message (also against earlier messages of the batch), and copies
// each accepted one to every subscription. It returns how many were
// accepted rather than dropped as duplicates. If it returns an error,
// nothing was sent.
func (t *Topic) SendBatch(ctx context.Context, ms []Message) (enqueued int, err error) {
	return t.sendBatch(ctx, ms, nil)
}

// SendBatchReport is SendBatch that also reports each message duplicate
// detection dropped: dropped holds their indexes in ms, and window is the
// topic's duplicate-detection window, for the report.
func (t *Topic) SendBatchReport(ctx context.Context, ms []Message) (dropped []int, window time.Duration, err error) {
	_, err = t.sendBatch(ctx, ms, &dropped)
	return dropped, t.opts.DuplicateDetectionWindow, err
}

func (t *Topic) sendBatch(ctx context.Context, ms []Message, dropped *[]int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Validated and copied once here; each subscription copies again, so
	// that settling one subscription's copy cannot change another's.
	entries, err := newEntries(t.name, ms, t.opts.DefaultMessageTimeToLive)
	if err != nil {
		return 0, err
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	accepted := make([]Message, 0, len(entries))
	seqs := make([]int64, 0, len(entries))
	for i, e := range entries {
		if t.opts.RequiresDuplicateDetection && t.dedup.isDuplicate(e.msg.MessageID, now, t.opts.DuplicateDetectionWindow) {
			t.counters.DuplicatesDropped++
			if dropped != nil {
				*dropped = append(*dropped, i)
			}
			continue
		}
		t.nextSeq++
		accepted = append(accepted, e.msg)
		seqs = append(seqs, t.nextSeq)
	}
	t.counters.Sent += int64(len(accepted))
	if len(t.subs) == 0 {
		t.counters.Discarded += int64(len(accepted))
	}
	if len(accepted) > 0 {
		for _, q := range t.subs {
			q.fanIn(accepted, seqs)
		}
	}
	return len(accepted), nil
}

// fanIn enqueues a subscription's copies of messages the topic accepted,
// with the topic's sequence numbers. The topic's mutex is held; the
// subscription's is taken here.
func (q *Queue) fanIn(ms []Message, seqs []int64) {
	entries, _ := newEntries(q.name, ms, q.opts.DefaultMessageTimeToLive) // validated by the topic
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	now := q.sweep()
	for i, e := range entries {
		q.enqueue(e, seqs[i], now)
	}
	q.dispatchPair(now)
}

// Topic returns the topic of a subscription, or of a subscription's
// dead-letter queue, and nil for a queue.
func (q *Queue) Topic() *Topic { return q.topic }

// NewSender returns a Sender on t.
func (t *Topic) NewSender() *Sender { return &Sender{send: t.Send} }
