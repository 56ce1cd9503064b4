package order

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// WriteOrder creates every document of w (w.Documents) atomically, in one
// transactional batch under w.PartitionKey(): all of them or none, and
// returns the ETags the response reported for them, so that the caller may
// replace one conditionally without reading it first. If any of them exists
// already it writes nothing and returns an error matching ErrAlreadyExists.
func WriteOrder(ctx context.Context, s idempotent.Store, w Write) (WriteETags, error) {
	docs, err := w.Documents()
	if err != nil {
		return WriteETags{}, fmt.Errorf("create order %q: encode its documents: %w", w.PartitionKey(), err)
	}
	etags, err := s.CreateBatch(ctx, w.PartitionKey(), docs)
	if err != nil {
		return WriteETags{}, err
	}
	return w.ETags(etags), nil
}

// ReadOrder returns the stored order document of orderID, or an error
// matching ErrNotFound. A stored document that is not an order document
// (another type, or another orderId) is an error.
func ReadOrder(ctx context.Context, s idempotent.Reader, orderID string) (OrderDocument, error) {
	body, _, err := s.ReadDocument(ctx, orderID, orderID)
	if err != nil {
		return OrderDocument{}, err
	}
	var doc OrderDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return OrderDocument{}, fmt.Errorf("read order %q: decode the stored document: %w", orderID, err)
	}
	if doc.Type != TypeOrder || doc.OrderID != orderID {
		return OrderDocument{}, fmt.Errorf("read order %q: stored document is not the order (type %q, orderId %q)", orderID, doc.Type, doc.OrderID)
	}
	return doc, nil
}
