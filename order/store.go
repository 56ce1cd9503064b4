package order

import (
	"context"
	"errors"
)

// Store is the storage the processing decision needs. Implementations must be
// safe for concurrent use.
type Store interface {
	// WriteOrder creates every document of w (w.Documents) atomically, in
	// one transactional batch under w.PartitionKey(): all of them or none,
	// and returns the ETags the response reported for them, so that the
	// caller may replace one conditionally without reading it first. If any
	// of them exists already it writes nothing and returns an error
	// matching ErrAlreadyExists.
	WriteOrder(ctx context.Context, w Write) (WriteETags, error)
	// ReadOrder returns the stored order document, or an error matching
	// ErrNotFound.
	ReadOrder(ctx context.Context, orderID string) (OrderDocument, error)
}

// Sentinel errors that Store implementations wrap, so that callers decide with
// errors.Is and never by the text of a status message.
var (
	// ErrAlreadyExists means a create found a document with the same id in
	// the same partition (HTTP 409).
	ErrAlreadyExists = errors.New("document already exists")
	// ErrNotFound means no document has that id in that partition (HTTP 404).
	ErrNotFound = errors.New("document not found")
	// ErrTransient means the call failed for a reason that may pass: throttling
	// (429), unavailability (503), a timeout (408), a write conflict to
	// retry (449) or a lost connection. The same call may succeed later.
	ErrTransient = errors.New("transient store failure")
	// ErrPreconditionFailed means a conditional write found that the document
	// changed since it was read (HTTP 412): its ETag no longer matches.
	ErrPreconditionFailed = errors.New("document changed since it was read")
	// ErrRejected means the store refused the request because of what the
	// message made it contain, for good: an id Cosmos DB does not accept, a
	// document or batch over its size limit (HTTP 400 for the content, 413).
	// No redelivery can succeed, so the message is dead-lettered at once with
	// the status in its description. A permanent error that is not the
	// message's fault (a missing container, 401, 403) does not match it.
	ErrRejected = errors.New("request rejected by the store for its content")
)

// DocumentStore is the document-level storage that the patterns beyond the
// create-or-conflict path need: ETag-conditioned replaces for status updates
// and payment records, and batches that put a dedicated inbox marker beside
// the business write. Documents carry their partition key value in their
// orderId field; a document with a "ttl" field (seconds) expires by itself.
// Implementations must be safe for concurrent use.
type DocumentStore interface {
	// ReadDocument returns the JSON body and ETag of document id in
	// partition pk, or an error matching ErrNotFound.
	ReadDocument(ctx context.Context, pk, id string) (body []byte, etag string, err error)
	// CreateDocuments creates every document in partition pk in one
	// transactional batch: all or none. If any exists it writes nothing and
	// returns an error matching ErrAlreadyExists.
	CreateDocuments(ctx context.Context, pk string, docs []Document) error
	// ReplaceDocument replaces document d.ID in partition pk if its ETag is
	// still ifMatch and returns the new ETag; otherwise it returns an error
	// matching ErrPreconditionFailed (or ErrNotFound if it is gone).
	ReplaceDocument(ctx context.Context, pk string, d Document, ifMatch string) (etag string, err error)
}

// IsTransient reports whether err is worth retrying later: it matches
// ErrTransient, or the context's deadline passed.
func IsTransient(err error) bool {
	return errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}
