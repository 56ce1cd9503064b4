package order

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Message subjects. The Service Bus Subject (label) of a message says which
// kind of message its body is; an empty subject is an order placement.
const (
	SubjectOrderPlaced        = "OrderPlaced"
	SubjectOrderStatusChanged = "OrderStatusChanged"
)

// Order statuses a status change may carry.
var statuses = map[string]bool{"paid": true, "shipped": true, "delivered": true, "cancelled": true}

// StatusChange is an OrderStatusChanged message: event-carried state
// transfer. It carries the order's full new status and a version that grows
// by one with every change (the order document starts at version 1), so
// applying it is idempotent and a stale change is recognisable.
type StatusChange struct {
	OrderID   string    `json:"orderId"`
	Status    string    `json:"status"` // paid, shipped, delivered or cancelled
	Version   int64     `json:"version"`
	ChangedAt time.Time `json:"changedAt"`
}

// statusIDSeparator separates the order id from the version in a status
// change's MessageId; maxVersionDigits is the length of the largest version,
// math.MaxInt64, in decimal.
const (
	statusIDSeparator = ":v"
	maxVersionDigits  = 19
)

// StatusMessageID returns the MessageId of the status change of an order to
// version: unique per version, so the queue's duplicate detection drops only
// resends of the same change. For a valid order id (see ValidateOrderID) it
// is at most MaxMessageIDLength characters, and it never equals an order
// placement's MessageId (the order id itself, which has no ':') nor the
// MessageId of another order's or version's change (the order id ends at
// the only ':').
func StatusMessageID(orderID string, version int64) string {
	return orderID + statusIDSeparator + strconv.FormatInt(version, 10)
}

// DecodeStatusChange parses and validates an OrderStatusChanged body. Its
// errors match ErrInvalid.
func DecodeStatusChange(body []byte) (StatusChange, error) {
	c, err := decodeStatusChange(body)
	if err != nil {
		return StatusChange{}, err
	}
	return c, nil
}

// decodeStatusChange is DecodeStatusChange that, when the body decoded and
// its order id is valid, returns the change with its order id set even if
// another field is invalid, so that the Invalid result can name the order.
func decodeStatusChange(body []byte) (StatusChange, error) {
	var c StatusChange
	if err := decodeStrict(body, &c, "status change"); err != nil {
		return StatusChange{}, err
	}
	if err := checkOrderID("orderId", c.OrderID); err != nil {
		return StatusChange{}, err
	}
	if err := c.validate(); err != nil {
		return StatusChange{OrderID: c.OrderID}, err
	}
	return c, nil
}

// validate checks the fields of c other than the order id: the version is
// from 2 to MaxSafeInteger.
func (c *StatusChange) validate() error {
	if !statuses[c.Status] {
		return &FieldError{Field: "status", Problem: fmt.Sprintf("%q is not paid, shipped, delivered or cancelled", c.Status)}
	}
	if c.Version < 2 {
		return &FieldError{Field: "version", Problem: fmt.Sprintf("%d is below 2 (version 1 is the order's creation)", c.Version)}
	}
	if c.Version > MaxSafeInteger {
		// Stored as the order document's version, it would come back
		// rounded: a resend of it could be applied again, and the
		// document might no longer decode.
		return outOfRange("version", c.Version)
	}
	if c.ChangedAt.IsZero() {
		return &FieldError{Field: "changedAt", Problem: "is required"}
	}
	return nil
}

// applyStatus applies a status change if it is newer than the stored
// version, through the core's versioned-state piece (idempotent.Versioned):
// on a first delivery with one conditional patch (when the store is a
// Patcher), else, and when the patch's condition fails, by reading the
// order and replacing it ETag-conditioned. An older or equal version is a
// no-op (Stale), an equal version with other content a Mismatch
// (ReasonStatusVersionReused); a change for an order that does not exist
// yet is retried after StatusRetryAfter (ReasonOrderNotYetCreated), not
// lost. This package supplies the order document's schema: how to decode
// it, the versions' recorded hashes (statusState), the patch (statusPatch)
// and the replace's mutation.
//
// Round trips: a change applied on its first delivery costs one (the
// patch); a redelivery of an applied change one (the read). A stale change
// on its first delivery (out of order, or a resend) costs two, since the
// failed patch returns no document and telling a stale change from a
// reused version needs the stored hashes; a redelivery that is applied
// after all costs two (read, replace).
func (p *Processor) applyStatus(ctx context.Context, m idempotent.Message) idempotent.Result {
	c, err := decodeStatusChange(m.Body)
	if err != nil {
		return idempotent.Result{Outcome: idempotent.Invalid, Key: c.OrderID, Reason: idempotent.ReasonInvalidMessage, Description: err.Error(), Err: err}
	}
	if want := StatusMessageID(c.OrderID, c.Version); m.ID != want {
		err := &FieldError{Field: "version", Problem: fmt.Sprintf("MessageId %q is not %q", m.ID, want)}
		return idempotent.Result{Outcome: idempotent.Invalid, Key: c.OrderID, Reason: idempotent.ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	if p.statuses == nil {
		err := errors.New("this worker does not apply status changes (no document store configured)")
		return idempotent.Result{Outcome: idempotent.Invalid, Key: c.OrderID, Reason: idempotent.ReasonUnsupportedMessage, Description: err.Error(), Err: err}
	}
	hash := c.ContentHash()
	return p.statuses.Apply(ctx, m, idempotent.VersionedChange[*statusState]{
		PartitionKey: c.OrderID, ID: c.OrderID, Version: c.Version, Hash: hash,
		What:  fmt.Sprintf("status %s, changed at %s", c.Status, c.ChangedAt.UTC().Format(time.RFC3339Nano)),
		Patch: statusPatch(&c, hash),
		Decode: func(body []byte) (*statusState, error) {
			s := new(statusState)
			if err := json.Unmarshal(body, &s.doc); err != nil {
				return nil, &StoredDocumentError{PartitionKey: c.OrderID, ID: c.OrderID, Err: err}
			}
			return s, nil
		},
		Apply: func(s *statusState) ([]byte, error) {
			changedAt := c.ChangedAt.UTC()
			s.doc.Status, s.doc.Version, s.doc.StatusChangedAt = c.Status, c.Version, &changedAt
			s.doc.recordStatusHash(c.Version, hash)
			return json.Marshal(s.doc)
		},
	})
}

// statusConfig is how status changes use the versioned-state piece: the
// order's version is "/version" (1 at its creation), and the order's
// reasons name a reused version and a change that came before its order.
var statusConfig = idempotent.VersionedConfig{
	VersionPath:       "/version",
	ReusedReason:      ReasonStatusVersionReused,
	MissingReason:     ReasonOrderNotYetCreated,
	MissingRetryAfter: StatusRetryAfter,
	Failure:           storeFailure,
}

// statusState is the order document as the versioned-state piece sees it.
type statusState struct{ doc OrderDocument }

var _ idempotent.VersionedDocument = (*statusState)(nil)

// StateVersion returns the order's version.
func (s *statusState) StateVersion() int64 { return s.doc.Version }

// AppliedHash returns the content hash recorded for version v. The current
// version is always comparable, from the stored status and changedAt, even
// in a document written before hashes were recorded. A version that was
// never applied (skipped because a newer one arrived first) or was applied
// too long ago to be among the MaxStatusHashes recorded ones is not.
func (s *statusState) AppliedHash(v int64) (string, bool) {
	if h, ok := s.doc.StatusHashes[v]; ok {
		return h, true
	}
	if v == s.doc.Version && s.doc.StatusChangedAt != nil {
		cur := StatusChange{OrderID: s.doc.OrderID, Status: s.doc.Status, Version: s.doc.Version, ChangedAt: *s.doc.StatusChangedAt}
		return cur.ContentHash(), true
	}
	return "", false
}

// StatusRetryAfter is how long a status change that arrived before its
// order waits at least before it is tried again: the order is usually in
// the queue already, a few deliveries behind.
const StatusRetryAfter = 5 * time.Second

// statusHashVersion names the canonical encoding of a status change's
// content; changing the encoding must change it.
const statusHashVersion = "order-status/v1"

// ContentHash returns the hex SHA-256 of the canonical encoding of the
// change's content: its status and changedAt (UTC, to the nanosecond),
// length-prefixed like Order.RequestHash. The order id and version are not
// part of it: they are where the hash is recorded, not what it compares.
func (c *StatusChange) ContentHash() string {
	b := make([]byte, 0, 96)
	b = appendString(b, statusHashVersion)
	b = appendString(b, c.Status)
	b = appendString(b, c.ChangedAt.UTC().Format(time.RFC3339Nano))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MaxStatusHashes bounds the status hashes an order document records: the
// hashes of the most recently applied versions, one per applied version.
const MaxStatusHashes = 32

// recordStatusHash records hash as the content of applied version v, and
// forgets the lowest versions beyond MaxStatusHashes.
func (d *OrderDocument) recordStatusHash(v int64, hash string) {
	if d.StatusHashes == nil {
		d.StatusHashes = make(map[int64]string, 1)
	}
	d.StatusHashes[v] = hash
	for len(d.StatusHashes) > MaxStatusHashes {
		lowest := int64(math.MaxInt64)
		for k := range d.StatusHashes {
			lowest = min(lowest, k)
		}
		delete(d.StatusHashes, lowest)
	}
	d.StatusHashCount = len(d.StatusHashes)
}

// readJSON reads document id of partition pk into v and returns its ETag.
// A document that does not decode into v is a *StoredDocumentError. The
// payment records' code reads with it.
func readJSON(ctx context.Context, s idempotent.DocumentStore, pk, id string, v any) (string, error) {
	body, etag, err := s.ReadDocument(ctx, pk, id)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return "", &StoredDocumentError{PartitionKey: pk, ID: id, Err: err}
	}
	return etag, nil
}
