package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// ReadOrder returns the stored order document of orderID, or an error
// matching ErrNotFound. A stored document that cannot be decoded, or is not
// an order document (another type, or another orderId), is a
// *StoredDocumentError: no retry can change it.
func ReadOrder(ctx context.Context, s idempotent.Reader, orderID string) (OrderDocument, error) {
	body, _, err := s.ReadDocument(ctx, orderID, orderID)
	if err != nil {
		return OrderDocument{}, err
	}
	// The form this package writes is decoded in one pass (fastdecode.go);
	// anything else by encoding/json, which names what is wrong.
	var doc OrderDocument
	if !decodeStoredPlain(body, &doc) {
		var strict OrderDocument // on the heap (Unmarshal takes an any): only on this path
		if err := json.Unmarshal(body, &strict); err != nil {
			return OrderDocument{}, fmt.Errorf("read order %q: %w", orderID, &StoredDocumentError{PartitionKey: orderID, ID: orderID, Err: err})
		}
		doc = strict
	}
	if doc.Type != TypeOrder || doc.OrderID != orderID {
		err := fmt.Errorf("it is not the order (type %q, orderId %q)", doc.Type, doc.OrderID)
		return OrderDocument{}, fmt.Errorf("read order %q: %w", orderID, &StoredDocumentError{PartitionKey: orderID, ID: orderID, Err: err})
	}
	return doc, nil
}

// ErrStoredDocumentUnreadable is what a *StoredDocumentError matches with
// errors.Is: the core's idempotent.ErrUnreadable.
var ErrStoredDocumentUnreadable = idempotent.ErrUnreadable

// StoredDocumentError reports a stored document of this package (an order
// document, a payment record, an inbox marker) that cannot be decoded as
// what its id says it is: written by something else, edited by hand, or
// holding a number that a JavaScript-based store rounded (an integer above
// MaxSafeInteger, stored before messages were bounded). Every delivery
// would read the same bytes, so a message that needs the document is
// dead-lettered at its first delivery with ReasonStoredDocumentUnreadable,
// not retried. It is the core's idempotent.UnreadableError.
type StoredDocumentError = idempotent.UnreadableError

// unreadable returns the Invalid result for err, from operation op on the
// documents of orderID, when err reports a stored document that cannot be
// decoded: the message is dead-lettered at once with what an operator must
// do, since every redelivery would read the same document.
func unreadable(orderID, op string, err error) (idempotent.Result, bool) {
	var de *StoredDocumentError
	if !errors.As(err, &de) {
		return idempotent.Result{}, false
	}
	return idempotent.Result{Outcome: idempotent.Invalid, Key: orderID, Reason: ReasonStoredDocumentUnreadable,
		Description: fmt.Sprintf("%s: stored document %q in partition %q cannot be decoded, and every redelivery would read the same bytes. "+
			"Repair the document so that it decodes (or delete it, once you know what it records: an order, its payment or a consumer's marker), "+
			"then resubmit this message with orderctl dlq resubmit. The decoding error: %v",
			op, de.ID, de.PartitionKey, de.Err), Err: err}, true
}
