package order

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TypeInboxMarker and TypeLoyaltyEntry are the document types the inbox
// variant writes.
const (
	TypeInboxMarker  = "inbox"
	TypeLoyaltyEntry = "loyalty"
)

// InboxMarkerID returns the id of consumer's inbox marker for a message.
func InboxMarkerID(consumer, messageID string) string { return "inbox:" + consumer + ":" + messageID }

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
	TTL         int       `json:"ttl"` // seconds; Cosmos DB deletes the marker after it
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
// queue it consumes, or a late copy would be processed twice.
type InboxConsumer struct {
	Name      string
	Store     DocumentStore
	MarkerTTL time.Duration
	Now       func() time.Time // nil means time.Now
}

// Process decodes the order, then writes the marker and the loyalty entry
// atomically. A conflict on the marker is this consumer's duplicate (or, if
// the marker's request hash differs, an id reused for other content).
func (c *InboxConsumer) Process(ctx context.Context, m Message) Result {
	o, invalid := decodeOrderMessage(m)
	if invalid != nil {
		return *invalid
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	at := now().UTC()
	hash := o.RequestHash()
	marker := InboxMarker{ID: InboxMarkerID(c.Name, m.ID), OrderID: o.OrderID, Type: TypeInboxMarker, Consumer: c.Name,
		MessageID: m.ID, RequestHash: hash, ProcessedAt: at, TTL: int(c.MarkerTTL / time.Second)}
	entry := LoyaltyEntry{ID: randomID(), OrderID: o.OrderID, Type: TypeLoyaltyEntry, Consumer: c.Name,
		CustomerID: o.CustomerID, Points: o.TotalMinor / 100, AwardedAt: at}
	mb, err := json.Marshal(marker)
	if err != nil {
		return storeFailure(o.OrderID, "encode inbox marker", err)
	}
	eb, err := json.Marshal(entry)
	if err != nil {
		return storeFailure(o.OrderID, "encode loyalty entry", err)
	}
	err = c.Store.CreateDocuments(ctx, o.OrderID, []Document{{ID: marker.ID, Body: mb}, {ID: entry.ID, Body: eb}})
	switch {
	case err == nil:
		return Result{Outcome: Created, OrderID: o.OrderID, Description: fmt.Sprintf("%d points awarded by %s", entry.Points, c.Name)}
	case !errors.Is(err, ErrAlreadyExists):
		return storeFailure(o.OrderID, "create inbox marker and loyalty entry", err)
	}
	var stored InboxMarker
	if _, err := readJSON(ctx, c.Store, o.OrderID, marker.ID, &stored); err != nil {
		return storeFailure(o.OrderID, "read inbox marker after conflict", err)
	}
	if stored.RequestHash != hash {
		return Result{Outcome: Mismatch, OrderID: o.OrderID, Reason: ReasonOrderIDReused,
			Description: fmt.Sprintf("consumer %s processed message %s with request hash %s; this message has request hash %s",
				c.Name, m.ID, stored.RequestHash, hash)}
	}
	return Result{Outcome: Duplicate, OrderID: o.OrderID,
		Description: fmt.Sprintf("consumer %s processed it at %s", c.Name, stored.ProcessedAt.Format(time.RFC3339))}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "loyalty-" + hex.EncodeToString(b[:])
}
