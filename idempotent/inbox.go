package idempotent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Inbox is the dedicated-marker ("inbox") technique: it records that a
// named consumer processed a message in a marker document written in the
// same transactional batch as the consumer's business documents. Build one
// per consumer with NewInbox, and call Process from the handler, after
// decoding and validating the message:
//
//	inbox, err := idempotent.NewInbox(store, idempotent.InboxConfig{
//		Consumer: "loyalty", PartitionKeyField: "customerId",
//		MarkerTTL: 30 * 24 * time.Hour, Horizon: horizon,
//	})
//	...
//	r := inbox.Process(ctx, m, ev.CustomerID, ev.Hash(), func(at time.Time) ([]idempotent.Document, error) {
//		return []idempotent.Document{entry(ev, at)}, nil
//	})
//
// It serves a consumer whose business write is not keyed by the message (an
// entry with a random id appended to a ledger, a counter moved), and
// several consumers of the same messages that share one store. The marker
// and the business documents are written together or not at all, and the
// create of the marker is the duplicate check, so the business write
// happens once per consumer and message however often it is delivered.
//
// # The seam
//
// The caller keeps its schema: it names the partition, hashes the content
// it considers the message's and builds its documents; the Inbox owns the
// marker (its id, its fields, its TTL), the store calls and the decision.
// Documents come from a function rather than a slice so that a delivery
// decided by the read before the batch builds none, and so that they can
// carry the marker's processing time. The store is only a Store (a batch
// create and a read).
//
// # Concurrency and idempotency
//
// An Inbox is safe for concurrent use: it holds only its configuration, and
// concurrent deliveries of one message meet in the store's atomic batch,
// where one creates the marker and every other conflicts. For one consumer
// and one MessageId, at most one call of Process returns Created (the
// business write happened in that call's batch); every other returns
// Duplicate when its hash equals the marker's, Mismatch when it does not,
// or Transient when the store failed, and writes nothing. A write that
// committed but reported a failure is decided by the next delivery, which
// finds the marker: Duplicate. Consumers of other names never suppress each
// other. The guarantee lasts while the marker does: MarkerTTL must outlast
// every copy of the message the broker can still deliver, which NewInbox
// checks against the configured Horizon.
type Inbox struct {
	consumer string
	store    Store
	pkField  string
	ttl      int // the marker's ttl field, in seconds; -1: never expires
	now      func() time.Time
	policy   ReadFirstPolicy
	reused   string
	failure  func(key, op string, err error) Result
}

// InboxConfig configures an Inbox. Consumer, PartitionKeyField and
// MarkerTTL are required.
type InboxConfig struct {
	// Consumer names the consumer: its markers are keyed by it (see
	// InboxMarkerID), so two consumers of the same messages each process
	// every message once. See ValidateConsumerName.
	Consumer string
	// PartitionKeyField is the top-level JSON field that holds the
	// partition key value in the container's documents, as the container's
	// partition key path names it ("tenantId" or "/tenantId"). The marker
	// carries the partition key value in it.
	PartitionKeyField string
	// MarkerTTL is how long a marker is kept: from 1 second to
	// MaxMarkerTTL, or UnboundedRetention. A store that honours a per-document
	// "ttl" field (Cosmos DB with a default TTL set on the container)
	// deletes the marker after it.
	MarkerTTL time.Duration
	// Horizon is the redelivery horizon of the queue or subscription the
	// consumer reads: NewInbox refuses a MarkerTTL below its minimum
	// retention, since a copy delivered after its marker expired would be
	// processed again. Nil skips the check; it is for tests that show what
	// a short TTL breaks, never for a deployment.
	Horizon RetentionHorizon
	// Now stamps the marker's processing time; nil means time.Now.
	Now func() time.Time
	// ReadFirst decides whether a delivery reads the marker before it
	// writes the batch; nil means RedeliveriesFirst.
	ReadFirst ReadFirstPolicy
	// ReusedReason is the reason of a Mismatch: a MessageId the consumer
	// processed with another content hash. Empty means ReasonIDReused.
	ReusedReason string
	// Failure turns a store error of operation op into a result; nil
	// means StoreFailure, except that a marker that cannot be decoded is
	// Invalid at once (ReasonStoredDocumentUnreadable), as the Consumer
	// decides its markers: every redelivery would read the same bytes. Such
	// a marker reaches Failure as an *UnreadableError (it matches
	// ErrUnreadable), for a caller that describes it in its own words.
	Failure func(key, op string, err error) Result
}

// RetentionHorizon bounds how long after a message was first processed
// another copy of it can still be delivered.
type RetentionHorizon interface {
	// MinRetention returns the shortest safe retention of a deduplication
	// marker, or UnboundedRetention if no finite one is safe, and how it was
	// computed, for the error that refuses a shorter one.
	MinRetention() (time.Duration, string)
}

// Limits of inbox markers.
const (
	// MaxMarkerTTL is the longest finite MarkerTTL: Cosmos DB's largest
	// per-document ttl, 2147483647 seconds.
	MaxMarkerTTL = math.MaxInt32 * time.Second
	// MaxConsumerNameLength is the longest consumer name: the marker id of
	// the longest MessageId Service Bus accepts (128 characters) is then
	// still a legal Cosmos DB id (at most 255 characters).
	MaxConsumerNameLength = maxDocumentIDLength - len(inboxMarkerPrefix) - len(":") - maxMessageIDLength

	maxDocumentIDLength = 255
	maxMessageIDLength  = 128
	inboxMarkerPrefix   = "inbox:"
)

// TypeInboxMarker is the "type" field of an inbox marker.
const TypeInboxMarker = "inbox"

// InboxMarkerID returns the id of consumer's marker for the message whose
// MessageId is messageID: "inbox:<consumer>:<messageID>". For a consumer
// name ValidateConsumerName accepts and a MessageId of at most 128
// characters it is a legal Cosmos DB id, and no two (consumer, MessageId)
// pairs share one, since ':' ends the name.
func InboxMarkerID(consumer, messageID string) string {
	return inboxMarkerPrefix + consumer + ":" + messageID
}

// ValidateConsumerName reports whether name can name an inbox consumer: 1 to
// MaxConsumerNameLength characters from [A-Za-z0-9._-]. Cosmos DB rejects
// ids with '/', '\', '?' or '#' and ids over 255 characters with a 400, so a
// name outside these rules would make the marker id of every message
// illegal; ':' is excluded too, because it separates the parts of the
// marker id ("a:b" with MessageId "c" would share a marker with "a" and
// MessageId "b:c").
func ValidateConsumerName(name string) error {
	if name == "" {
		return errors.New("inbox consumer name is empty")
	}
	if len(name) > MaxConsumerNameLength {
		return fmt.Errorf("inbox consumer name of %d characters exceeds the limit of %d (its marker ids, %q + name + \":\" + a MessageId of up to %d characters, must fit Cosmos DB's %d)",
			len(name), MaxConsumerNameLength, inboxMarkerPrefix, maxMessageIDLength, maxDocumentIDLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("inbox consumer name %q: character %q at offset %d is not one of A-Z a-z 0-9 . _ - (Cosmos DB ids forbid / \\ ? #, and ':' separates the parts of a marker id)", name, c, i)
		}
	}
	return nil
}

// markerFields are the fields of a marker, which the partition key field
// must not be.
var markerFields = [...]string{"id", "type", "consumer", "messageId", "requestHash", "processedAt", "ttl"}

// NewInbox returns the Inbox of cfg.Consumer over store, or an error that
// says what is wrong with cfg: an illegal consumer name, no store, no
// partition key field (or a nested one, or one a marker uses itself), a
// MarkerTTL out of range, or one below the minimum retention of
// cfg.Horizon.
func NewInbox(store Store, cfg InboxConfig) (*Inbox, error) {
	if err := ValidateConsumerName(cfg.Consumer); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("inbox consumer %s has no store", cfg.Consumer)
	}
	field := strings.TrimPrefix(cfg.PartitionKeyField, "/")
	switch {
	case field == "":
		return nil, fmt.Errorf("inbox consumer %s has no partition key field: name the field of the container's partition key path", cfg.Consumer)
	case strings.Contains(field, "/"):
		return nil, fmt.Errorf("inbox consumer %s: partition key field %q is not a top-level field", cfg.Consumer, cfg.PartitionKeyField)
	}
	for _, f := range markerFields {
		if field == f {
			return nil, fmt.Errorf("inbox consumer %s: partition key field %q is a field of the marker itself", cfg.Consumer, field)
		}
	}
	ttl := cfg.MarkerTTL
	if ttl != UnboundedRetention && (ttl < time.Second || ttl > MaxMarkerTTL) {
		return nil, fmt.Errorf("inbox consumer %s: marker TTL %v is not between 1s and %v (Cosmos DB's largest ttl), nor idempotent.UnboundedRetention", cfg.Consumer, ttl, MaxMarkerTTL)
	}
	if cfg.Horizon != nil {
		min, why := cfg.Horizon.MinRetention()
		if ttl < min {
			return nil, fmt.Errorf("inbox consumer %s: marker TTL %v is below the redelivery horizon's minimum retention %v: a copy of a message delivered after its marker expired would be processed again (%s)",
				cfg.Consumer, ttl, min, why)
		}
	}
	in := &Inbox{consumer: cfg.Consumer, store: store, pkField: field, ttl: -1, now: cfg.Now, policy: cfg.ReadFirst,
		reused: nonEmpty(cfg.ReusedReason, ReasonIDReused), failure: cfg.Failure}
	if ttl != UnboundedRetention {
		// Rounded up, so that a marker never expires before MarkerTTL.
		in.ttl = int((ttl + time.Second - 1) / time.Second)
	}
	if in.now == nil {
		in.now = time.Now
	}
	if in.policy == nil {
		in.policy = RedeliveriesFirst{}
	}
	if in.failure == nil {
		in.failure = storeFailure
	}
	return in, nil
}

// Consumer returns the name of the inbox's consumer.
func (in *Inbox) Consumer() string { return in.consumer }

// storedMarker is what the decision reads from a stored marker.
type storedMarker struct {
	RequestHash string    `json:"requestHash"`
	ProcessedAt time.Time `json:"processedAt"`
}

// Process records that the inbox's consumer processed message m, whose
// content hash is hash, with the business documents docs returns, in one
// transactional batch in partition pk: the marker, InboxMarkerID(consumer,
// m.ID), first, then the documents, which must be in partition pk and
// whose ids must be unique to the message (a random id will do). docs
// receives the marker's processing time and is called at most once, only
// when the batch is written.
//
// A delivery the read-first policy picks (a redelivery, by default) reads
// the marker first and decides from it without the batch, one round trip
// for a duplicate; a first delivery writes the batch first, one round trip
// for a new message. A batch that conflicts reads the marker and compares:
// the same hash is Duplicate, another is Mismatch with the configured
// reason. The result's Key is pk.
func (in *Inbox) Process(ctx context.Context, m Message, pk, hash string, docs func(at time.Time) ([]Document, error)) Result {
	id := InboxMarkerID(in.consumer, m.ID)
	if in.policy.ReadFirst(m) {
		stored, found, err := in.read(ctx, pk, id)
		switch {
		case err != nil:
			return in.failure(pk, "read inbox marker of a redelivery", err)
		case found:
			in.policy.Observe(m, true)
			return in.compare(m, pk, hash, stored)
		}
		// No marker: the earlier delivery wrote nothing (or its marker
		// expired); the batch decides.
	}
	at := in.now().UTC()
	business, err := docs(at)
	if err != nil {
		return Result{Outcome: Invalid, Key: pk, Reason: ReasonInvalidMessage, Description: "build the documents: " + err.Error(), Err: err}
	}
	marker, err := json.Marshal(map[string]any{
		"id": id, in.pkField: pk, "type": TypeInboxMarker, "consumer": in.consumer, "messageId": m.ID,
		"requestHash": hash, "processedAt": at, "ttl": in.ttl,
	})
	if err != nil {
		return in.failure(pk, "encode inbox marker", err)
	}
	batch := make([]Document, 0, 1+len(business))
	batch = append(append(batch, Document{ID: id, Body: marker}), business...)
	_, err = in.store.CreateBatch(ctx, pk, batch)
	switch {
	case err == nil:
		in.policy.Observe(m, false)
		return Result{Outcome: Created, Key: pk, Description: fmt.Sprintf("consumer %s processed message %s", in.consumer, m.ID)}
	case !errors.Is(err, ErrAlreadyExists):
		return in.failure(pk, "create inbox marker and business documents", err)
	}
	in.policy.Observe(m, true)
	stored, found, err := in.read(ctx, pk, id)
	switch {
	case err != nil:
		return in.failure(pk, "read inbox marker after conflict", err)
	case !found:
		// Gone since the create (expired or deleted), or the conflict was
		// on a business document: decide anew.
		return Result{Outcome: Transient, Key: pk, Reason: ReasonConcurrentUpdate,
			Description: fmt.Sprintf("read after conflict: consumer %s's marker %q is not there; retrying", in.consumer, id)}
	}
	return in.compare(m, pk, hash, stored)
}

// read returns the marker id of partition pk, false if it is not there.
func (in *Inbox) read(ctx context.Context, pk, id string) (storedMarker, bool, error) {
	body, _, err := in.store.ReadDocument(ctx, pk, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return storedMarker{}, false, nil
	case err != nil:
		return storedMarker{}, false, err
	}
	var s storedMarker
	if err := json.Unmarshal(body, &s); err != nil {
		return storedMarker{}, false, unreadableError(pk, id, err)
	}
	if s.RequestHash == "" {
		return storedMarker{}, false, unreadableError(pk, id, errors.New("it has no requestHash: it is not an inbox marker"))
	}
	return s, true, nil
}

// compare decides message m, whose marker the inbox found: Duplicate for
// the same hash, Mismatch for another.
func (in *Inbox) compare(m Message, pk, hash string, stored storedMarker) Result {
	if stored.RequestHash != hash {
		return Result{Outcome: Mismatch, Key: pk, Reason: in.reused,
			Description: fmt.Sprintf("consumer %s processed message %s with request hash %s; this message has request hash %s",
				in.consumer, m.ID, stored.RequestHash, hash)}
	}
	return Result{Outcome: Duplicate, Key: pk,
		Description: fmt.Sprintf("consumer %s processed message %s at %s", in.consumer, m.ID, stored.ProcessedAt.Format(time.RFC3339))}
}
