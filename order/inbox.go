package order

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// TypeInboxMarker and TypeLoyaltyEntry are the document types the inbox
// variant writes.
const (
	TypeInboxMarker  = "inbox"
	TypeLoyaltyEntry = "loyalty"
)

// InboxMarkerID returns the id of consumer's inbox marker for a message.
// For a consumer name that ValidateConsumerName accepts and a MessageId of
// at most MaxMessageIDLength characters it is a legal Cosmos DB id.
func InboxMarkerID(consumer, messageID string) string { return "inbox:" + consumer + ":" + messageID }

// Limits of an inbox marker id, "inbox:<consumer>:<messageId>".
const (
	// MaxDocumentIDLength is the longest id Cosmos DB accepts.
	MaxDocumentIDLength = 255
	// MaxConsumerNameLength is the longest consumer name: the marker id of
	// the longest MessageId Service Bus accepts is then still a legal id.
	MaxConsumerNameLength = MaxDocumentIDLength - len("inbox:") - len(":") - MaxMessageIDLength
	// maxMarkerTTL is the longest per-item ttl Cosmos DB accepts, in seconds.
	maxMarkerTTL = math.MaxInt32
)

// ValidateConsumerName reports whether name can name an inbox consumer: 1 to
// MaxConsumerNameLength characters from [A-Za-z0-9._-]. Cosmos DB rejects
// ids with '/', '\', '?' or '#' and ids over 255 characters with a 400, so a
// name outside these rules would make the marker id of every message
// illegal; ':' is excluded too, because it separates the parts of the
// marker id ("a:b" with MessageId "c" would share a marker with "a" and
// MessageId "b:c"). A worker checks the name when it starts.
func ValidateConsumerName(name string) error {
	if name == "" {
		return errors.New("inbox consumer name is empty")
	}
	if len(name) > MaxConsumerNameLength {
		return fmt.Errorf("inbox consumer name of %d characters exceeds the limit of %d (its marker ids, %q + name + \":\" + a MessageId of up to %d characters, must fit Cosmos DB's %d)",
			len(name), MaxConsumerNameLength, "inbox:", MaxMessageIDLength, MaxDocumentIDLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("inbox consumer name %q: character %q at offset %d is not one of A-Z a-z 0-9 . _ - (Cosmos DB ids forbid / \\ ? #, and ':' separates the parts of a marker id)", name, c, i)
		}
	}
	return nil
}

// InboxMarker records that a named consumer processed a message. It lives in
// the partition of the message's order, is written in the same transactional
// batch as the consumer's business write, and expires after TTL seconds.
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
// message, or several consumers that share one store. Each consumer has a
// name; it writes a marker keyed by its name and the MessageId together with
// its business write, in one transactional batch. Two differently named
// consumers of the same message each process it once; one never suppresses
// the other. Its business write here awards loyalty points.
//
// An InboxConsumer is safe for concurrent use and implements the worker's
// Handler. MarkerTTL must be at least RedeliveryHorizon.MinRetention of the
// queue it consumes, or a late copy would be processed twice; with
// UnboundedRetention the markers never expire (ttl -1), the only safe choice
// for a queue whose messages never expire.
//
// Build one with NewInboxConsumer, which refuses an illegal name or TTL. A
// consumer built as a struct literal checks the same on every message and,
// when they are wrong, writes nothing and returns a Transient result with
// ReasonConsumerMisconfigured, which Result.DependencyFailed counts: a
// misconfigured consumer must not dead-letter the backlog, which is not at
// fault.
type InboxConsumer struct {
	Name      string
	Store     idempotent.DocumentStore
	MarkerTTL time.Duration
	Now       func() time.Time // nil means time.Now
}

// NewInboxConsumer returns the inbox consumer name writing to store, or an
// error if name or markerTTL is not one Cosmos DB accepts (see Validate).
// now nil means time.Now.
func NewInboxConsumer(name string, store idempotent.DocumentStore, markerTTL time.Duration, now func() time.Time) (*InboxConsumer, error) {
	c := &InboxConsumer{Name: name, Store: store, MarkerTTL: markerTTL, Now: now}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate reports whether c can write legal markers: its name passes
// ValidateConsumerName, it has a store, and its MarkerTTL is
// UnboundedRetention or from 1 second to 2147483647 seconds (Cosmos DB
// rejects a ttl of 0 or beyond that with a 400). It does not check the TTL
// against a redelivery horizon: RedeliveryHorizon.CheckRetention does.
func (c *InboxConsumer) Validate() error {
	if err := ValidateConsumerName(c.Name); err != nil {
		return err
	}
	if c.Store == nil {
		return fmt.Errorf("inbox consumer %s has no store", c.Name)
	}
	if c.MarkerTTL != UnboundedRetention && (c.MarkerTTL < time.Second || c.MarkerTTL > maxMarkerTTL*time.Second) {
		return fmt.Errorf("inbox consumer %s: marker TTL %v is not between 1s and %v (Cosmos DB's largest ttl), nor order.UnboundedRetention", c.Name, c.MarkerTTL, maxMarkerTTL*time.Second)
	}
	return nil
}

// ttlSeconds returns the marker's ttl field: -1 (never expires) for
// UnboundedRetention, else MarkerTTL in whole seconds, rounded up so that a
// marker never expires before MarkerTTL has passed.
func (c *InboxConsumer) ttlSeconds() int {
	if c.MarkerTTL == UnboundedRetention {
		return -1
	}
	return int((c.MarkerTTL + time.Second - 1) / time.Second)
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
	if err := c.Validate(); err != nil {
		return idempotent.Result{Outcome: idempotent.Transient, Reason: ReasonConsumerMisconfigured, Description: err.Error(), Err: err}
	}
	switch m.Subject {
	case "", SubjectOrderPlaced:
		return c.placeOrder(ctx, m)
	case EventOrderAccepted:
		return c.acceptedEvent(ctx, m)
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
func (c *InboxConsumer) placeOrder(ctx context.Context, m idempotent.Message) idempotent.Result {
	o, invalid := decodeOrderMessage(m)
	if invalid != nil {
		return *invalid
	}
	return c.award(ctx, m, o.OrderID, o.CustomerID, o.TotalMinor, o.RequestHash())
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "loyalty-" + hex.EncodeToString(b[:])
}
