package idempotent

import (
	"context"
	"errors"
)

// Document is one JSON document, ready for a store.
type Document struct {
	ID   string
	Body []byte
}

// Store is the storage the pattern needs. Implementations must be safe for
// concurrent use.
//
// Consistency: a read must see every write the same Store made, and every
// document a refused write (409, 412) or an earlier read of the same
// partition saw before it began (read your writes, monotonic reads: Cosmos
// DB's Session consistency within one session, or Strong). The decisions
// after a conflict rest on it: a 409 says some document of the batch
// exists, and the reads that follow decide which and with what content. A
// store whose reads may be served by a replica behind the create that
// conflicted (Session consistency without session tokens, Eventual,
// Consistent Prefix) can answer "not found" for a document that exists.
// cosmosstore carries the session token of each partition's latest
// response into its next read for this reason. The Consumer still decides
// nothing permanent on a first delivery from reads that found a document
// missing (see ReasonMarkerMissing), so a store that breaks the rule costs
// retries, not messages; but an adapter of one's own must carry the
// tokens, or read at Strong consistency.
type Store interface {
	// CreateBatch creates every document of docs in partition pk in one
	// transactional batch, all of them or none, and returns the ETag of
	// each, in the order of docs (empty where the store reports none). If
	// any of them exists it writes nothing and returns an error matching
	// ErrAlreadyExists. This create is the duplicate check.
	CreateBatch(ctx context.Context, pk string, docs []Document) (etags []string, err error)
	Reader
}

// Reader reads documents one at a time.
type Reader interface {
	// ReadDocument returns the JSON body and ETag of document id in
	// partition pk, or an error matching ErrNotFound.
	ReadDocument(ctx context.Context, pk, id string) (body []byte, etag string, err error)
}

// Sentinel errors that Store implementations wrap, so that callers decide
// with errors.Is and never by the text of a status message.
var (
	// ErrAlreadyExists means a create found a document with the same id in
	// the same partition (HTTP 409).
	ErrAlreadyExists = errors.New("document already exists")
	// ErrNotFound means no document has that id in that partition (HTTP 404).
	ErrNotFound = errors.New("document not found")
	// ErrTransient means the call failed for a reason that may pass:
	// throttling (429), unavailability (503), a timeout (408), a write
	// conflict to retry (449) or a lost connection. The same call may
	// succeed later.
	ErrTransient = errors.New("transient store failure")
	// ErrPreconditionFailed means a conditional write found that the
	// document changed since it was read (HTTP 412): its ETag no longer
	// matches.
	ErrPreconditionFailed = errors.New("document changed since it was read")
	// ErrRejected means the store refused the request because of what the
	// message made it contain, for good: an id the store does not accept,
	// a document or batch over its size limit (HTTP 400 for the content,
	// 413). A permanent error that is not the message's fault (a missing
	// container, 401, 403) does not match it.
	ErrRejected = errors.New("request rejected by the store for its content")
)

// IsTransient reports whether err is worth retrying later: it matches
// ErrTransient, or the context's deadline passed.
func IsTransient(err error) bool {
	return errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}
