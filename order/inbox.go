package order

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// TypeInboxMarker and TypeLoyaltyEntry are the document types the inbox
// variant writes: the core's inbox marker, and the loyalty entry.
const (
	TypeInboxMarker  = idempotent.TypeInboxMarker
	TypeLoyaltyEntry = "loyalty"
)

// InboxMarkerID returns the id of consumer's inbox marker for a message
// (idempotent.InboxMarkerID). For a consumer name that ValidateConsumerName
// accepts and a MessageId of at most MaxMessageIDLength characters it is a
// legal Cosmos DB id.
func InboxMarkerID(consumer, messageID string) string {
	return idempotent.InboxMarkerID(consumer, messageID)
}

// Limits of an inbox marker id, "inbox:<consumer>:<messageId>".
const (
	// MaxDocumentIDLength is the longest id Cosmos DB accepts.
	MaxDocumentIDLength = 255
	// MaxConsumerNameLength is the longest consumer name: the marker id of
	// the longest MessageId Service Bus accepts is then still a legal id.
	MaxConsumerNameLength = idempotent.MaxConsumerNameLength
)

// ValidateConsumerName reports whether name can name an inbox consumer, as
// idempotent.ValidateConsumerName says: 1 to MaxConsumerNameLength
// characters from [A-Za-z0-9._-]. A worker checks the name when it starts.
func ValidateConsumerName(name string) error { return idempotent.ValidateConsumerName(name) }

// InboxMarker is an inbox marker of this example's consumers as the core's
// inbox piece (idempotent.Inbox) writes it, with "orderId" as the partition
// key field: it records that a named consumer processed a message, lives in
// the partition of the message's order, is written in the same
// transactional batch as the consumer's business write, and expires after
// TTL seconds. The audit reads markers with it.
type InboxMarker struct {
	ID          string    `json:"id"`      // InboxMarkerID(Consumer, MessageID)
	OrderID     string    `json:"orderId"` // the partition key
	Type        string    `json:"type"`    // TypeInboxMarker
	Consumer    string    `json:"consumer"`
	MessageID   string    `json:"messageId"`
	RequestHash string    `json:"requestHash"`
	ProcessedAt time.Time `json:"processedAt"`
	TTL         int       `json:"ttl"` // seconds; Cosmos DB deletes the marker after it; -1: never
}

// LoyaltyEntry is the business write of the loyalty consumer: loyalty
// points for an order, appended to the customer's ledger. Its id is random,
// so the entry itself cannot detect a duplicate: the inbox marker does.
type LoyaltyEntry struct {
	ID         string    `json:"id"`
	OrderID    string    `json:"orderId"` // the partition key
	Type       string    `json:"type"`    // TypeLoyaltyEntry
	Consumer   string    `json:"consumer"`
	CustomerID string    `json:"customerId"`
	Points     int64     `json:"points"` // one point per whole currency unit
	AwardedAt  time.Time `json:"awardedAt"`
}

// InboxConsumer is the dedicated-marker ("inbox") variant of the idempotent
// consumer, for consumers whose business write is not naturally keyed by the
// message, or several consumers that share one store: a composition of the
// core's inbox piece (idempotent.Inbox), which writes a marker keyed by the
// consumer's name and the MessageId together with its business write, in
// one transactional batch, and decides a conflict. Two differently named
// consumers of the same message each process it once; one never suppresses
// the other. Its business write here awards loyalty points; this package
// keeps the decoding, the hash and the loyalty entry.
//
// It trusts the topic: an OrderAccepted event is awarded as it reads,
// without reading the order it names, so an event for an order that never
// existed is awarded too. Only the relay sends to the topic: in the
// deployment the namespace has local (SAS) authentication off and Data
// Sender on the topic is held by the relay's identity alone (and an
// optional developer principal), and the relay publishes only events that
// the worker's batch wrote beside their order. A read per event (a point read:
// about one request unit and one round trip more per event) would catch
// only a forged event for an unknown id from a principal who may send to
// the topic, and that principal could as well forge one for an order that
// exists: the protection is the topic's authorization, not a read. A
// consumer of a topic that others may send to must verify the event
// against its source instead (read the order in its partition and compare
// the request hash and the fields it uses), and retry a read that misses,
// which may have lagged behind the order's write.
//
// An InboxConsumer is safe for concurrent use and implements the worker's
// Handler. MarkerTTL must be at least RedeliveryHorizon.MinRetention of the
// queue it consumes, or a late copy would be processed twice: set Horizon
// and the consumer refuses a shorter TTL. With UnboundedRetention the
// markers never expire (ttl -1), the only safe choice for a queue whose
// messages never expire.
//
// Build one with NewInboxConsumer, which refuses an illegal name or TTL, and
// set its fields before its first Process: it builds the core's inbox from
// them then, once. A consumer built as a struct literal checks the same at
// that point and, when they are wrong, writes nothing and returns, for
// every message, a Transient result with
// ReasonConsumerMisconfigured, which Result.DependencyFailed counts: a
// misconfigured consumer must not dead-letter the backlog, which is not at
// fault.
type InboxConsumer struct {
	Name      string
	Store     idempotent.Store
	MarkerTTL time.Duration
	Now       func() time.Time // nil means time.Now
	// Horizon, if not nil, is the redelivery horizon of the queue or
	// subscription the consumer reads (a RedeliveryHorizon): a MarkerTTL
	// below its minimum retention is refused.
	Horizon idempotent.RetentionHorizon

	// once builds the core's inbox from the fields above at the first
	// Process, which the consumer then keeps: set the fields before it.
	once  sync.Once
	built *idempotent.Inbox
	err   error
}

// NewInboxConsumer returns the inbox consumer name writing to store, or an
// error if name or markerTTL is not one Cosmos DB accepts (see Validate).
// now nil means time.Now.
func NewInboxConsumer(name string, store idempotent.Store, markerTTL time.Duration, now func() time.Time) (*InboxConsumer, error) {
	c := &InboxConsumer{Name: name, Store: store, MarkerTTL: markerTTL, Now: now}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate reports whether c can write legal markers: its name passes
// ValidateConsumerName, it has a store, its MarkerTTL is UnboundedRetention
// or from 1 second to 2147483647 seconds (Cosmos DB rejects a ttl of 0 or
// beyond that with a 400) and, with a Horizon, not below its minimum
// retention (see idempotent.NewInbox).
func (c *InboxConsumer) Validate() error {
	_, err := c.newInbox()
	return err
}

// inbox returns the core's inbox for c's configuration, or why there is
// none, built once at the first call.
func (c *InboxConsumer) inbox() (*idempotent.Inbox, error) {
	c.once.Do(func() { c.built, c.err = c.newInbox() })
	return c.built, c.err
}

// newInbox builds the core's inbox for c's configuration.
func (c *InboxConsumer) newInbox() (*idempotent.Inbox, error) {
	return idempotent.NewInbox(c.Store, idempotent.InboxConfig{
		Consumer: c.Name, PartitionKeyField: "orderId", MarkerTTL: c.MarkerTTL, Horizon: c.Horizon, Now: c.Now,
		ReusedReason: ReasonOrderIDReused, Failure: storeFailure,
	})
}

// Process decides by the message's Subject. An order placement is decoded,
// then the marker and the loyalty entry are written atomically; a conflict
// on the marker is this consumer's duplicate (or, if the marker's request
// hash differs, an id reused for other content). A redelivery
// (DeliveryCount above 1, most likely a duplicate) reads the marker first,
// as idempotent.RedeliveriesFirst says: one round trip for a duplicate
// instead of the conflicting batch and a read, two for a message whose
// earlier delivery wrote nothing. The choice changes round trips, never an
// outcome: the batch stays the duplicate check. An OrderAccepted event
// from the outbox relay (Subject EventOrderAccepted, MessageId the event id)
// is decoded with DecodeAcceptedEvent and written the same way, keyed by the
// event id. A status change is of no use to the loyalty consumer: Ignored,
// nothing written. An unknown subject is Invalid.
func (c *InboxConsumer) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	return dependency(c.process(ctx, m))
}

func (c *InboxConsumer) process(ctx context.Context, m idempotent.Message) idempotent.Result {
	inbox, err := c.inbox()
	if err != nil {
		return idempotent.Result{Outcome: idempotent.Transient, Reason: ReasonConsumerMisconfigured, Description: err.Error(), Err: err}
	}
	switch m.Subject {
	case "", SubjectOrderPlaced:
		return c.placeOrder(ctx, inbox, m)
	case EventOrderAccepted:
		return c.acceptedEvent(ctx, inbox, m)
	case SubjectOrderStatusChanged:
		// Named by its MessageId only: the body is not this consumer's
		// business, so it is not decoded.
		var orderID string
		if id, _, ok := strings.Cut(m.ID, statusIDSeparator); ok && checkOrderID("orderId", id) == nil {
			orderID = id
		}
		return idempotent.Result{Outcome: idempotent.Ignored, Key: orderID,
			Description: fmt.Sprintf("consumer %s has no use for status changes; message %s completed, nothing written", c.Name, m.ID)}
	default:
		err := fmt.Errorf("unknown message subject %q", m.Subject)
		return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonUnsupportedMessage, Description: err.Error(), Err: err}
	}
}

// placeOrder is Process for an order placement.
func (c *InboxConsumer) placeOrder(ctx context.Context, inbox *idempotent.Inbox, m idempotent.Message) idempotent.Result {
	o, invalid := decodeOrderMessage(m)
	if invalid != nil {
		return *invalid
	}
	return c.award(ctx, inbox, m, o.OrderID, o.CustomerID, o.TotalMinor, o.RequestHash())
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "loyalty-" + hex.EncodeToString(b[:])
}
