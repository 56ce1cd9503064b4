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

// maxReplaceAttempts bounds the read-compare-replace loop when concurrent
// changes keep moving the ETag.
const maxReplaceAttempts = 3

// applyStatus applies a status change if it is newer than the stored
// version: on a first delivery with one conditional patch (when the store
// is a Patcher), else, and when the patch's condition fails, by reading the
// order and replacing it ETag-conditioned. An older or equal version is a
// no-op; a change for an order that does not exist yet is retried, not lost.
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
	if p.docs == nil {
		err := errors.New("this worker does not apply status changes (no document store configured)")
		return idempotent.Result{Outcome: idempotent.Invalid, Key: c.OrderID, Reason: idempotent.ReasonUnsupportedMessage, Description: err.Error(), Err: err}
	}
	hash := c.ContentHash()
	// A first delivery is most likely new: apply it in one conditional
	// patch. A patch that fails its condition carries no document, so a
	// stale change, a reused version and a document the patch cannot keep
	// (see statusPatch) are told apart by the read below. A redelivery is
	// most likely applied already: it reads first.
	if pt, ok := p.docs.(idempotent.Patcher); ok && m.DeliveryCount <= 1 {
		_, err := pt.PatchDocument(ctx, c.OrderID, c.OrderID, statusPatch(&c, hash))
		switch {
		case err == nil:
			return idempotent.Result{Outcome: idempotent.Applied, Key: c.OrderID, Description: fmt.Sprintf("status %s, version %d", c.Status, c.Version)}
		case errors.Is(err, idempotent.ErrNotFound):
			return orderNotYetCreated(c, err)
		case !errors.Is(err, idempotent.ErrPreconditionFailed):
			return storeFailure(c.OrderID, "patch for status change", err)
		}
	}
	for range maxReplaceAttempts {
		var doc OrderDocument
		etag, err := readJSON(ctx, p.docs, c.OrderID, c.OrderID, &doc)
		switch {
		case errors.Is(err, idempotent.ErrNotFound):
			return orderNotYetCreated(c, err)
		case err != nil:
			return storeFailure(c.OrderID, "read for status change", err)
		case doc.Version >= c.Version:
			return staleOrReused(doc, c, hash)
		}
		changedAt := c.ChangedAt.UTC()
		doc.Status, doc.Version, doc.StatusChangedAt = c.Status, c.Version, &changedAt
		doc.recordStatusHash(c.Version, hash)
		body, err := json.Marshal(doc)
		if err != nil {
			return storeFailure(c.OrderID, "encode status change", err)
		}
		_, err = p.docs.ReplaceDocument(ctx, c.OrderID, idempotent.Document{ID: doc.ID, Body: body}, etag)
		switch {
		case err == nil:
			return idempotent.Result{Outcome: idempotent.Applied, Key: c.OrderID, Description: fmt.Sprintf("status %s, version %d", c.Status, c.Version)}
		case errors.Is(err, idempotent.ErrPreconditionFailed):
			continue // changed since the read: read again and decide again
		default:
			return storeFailure(c.OrderID, "replace for status change", err)
		}
	}
	return idempotent.Result{Outcome: idempotent.Transient, Key: c.OrderID, Reason: idempotent.ReasonConcurrentUpdate,
		Description: fmt.Sprintf("the order changed during %d attempts to apply version %d", maxReplaceAttempts, c.Version)}
}

// StatusRetryAfter is how long a status change that arrived before its
// order waits at least before it is tried again: the order is usually in
// the queue already, a few deliveries behind.
const StatusRetryAfter = 5 * time.Second

// orderNotYetCreated is the result of a status change c for an order that
// does not exist yet: retried later (RetryAfter), not lost; time, not a
// dependency, resolves it.
func orderNotYetCreated(c StatusChange, err error) idempotent.Result {
	return idempotent.Result{Outcome: idempotent.Transient, Key: c.OrderID, Reason: ReasonOrderNotYetCreated,
		Description: fmt.Sprintf("status %s (version %d) arrived before the order; retrying", c.Status, c.Version), Err: err,
		RetryAfter: StatusRetryAfter}
}

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

// staleOrReused decides a change c (content hash) that is not newer than
// the stored version. A version whose applied content is recorded is
// compared with it: the same hash is a duplicate (Stale), another hash is
// a version reused for other content (Mismatch). The current version is
// always comparable, from the stored status and changedAt, even in a
// document written before hashes were recorded. A version that was never
// applied (skipped because a newer one arrived first) or was applied too
// long ago to be among the MaxStatusHashes recorded ones cannot be
// compared: it is Stale, and its description says so.
func staleOrReused(doc OrderDocument, c StatusChange, hash string) idempotent.Result {
	stored, ok := doc.StatusHashes[c.Version]
	if !ok && c.Version == doc.Version && doc.StatusChangedAt != nil {
		cur := StatusChange{OrderID: doc.OrderID, Status: doc.Status, Version: doc.Version, ChangedAt: *doc.StatusChangedAt}
		stored, ok = cur.ContentHash(), true
	}
	switch {
	case !ok:
		return idempotent.Result{Outcome: idempotent.Stale, Key: c.OrderID,
			Description: fmt.Sprintf("stored version %d (%s) is newer than version %d (%s), whose content was never applied or is no longer recorded: nothing to do",
				doc.Version, doc.Status, c.Version, c.Status)}
	case stored == hash:
		return idempotent.Result{Outcome: idempotent.Stale, Key: c.OrderID,
			Description: fmt.Sprintf("version %d (%s) was applied already with the same content (stored version %d, %s): nothing to do", c.Version, c.Status, doc.Version, doc.Status)}
	}
	return idempotent.Result{Outcome: idempotent.Mismatch, Key: c.OrderID, Reason: ReasonStatusVersionReused,
		Description: fmt.Sprintf("version %d of order %s was applied with content hash %s; this change (status %s, changed at %s) has content hash %s",
			c.Version, c.OrderID, stored, c.Status, c.ChangedAt.UTC().Format(time.RFC3339Nano), hash)}
}

// readJSON reads document id of partition pk into v and returns its ETag.
// A document that does not decode into v is a *StoredDocumentError.
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
