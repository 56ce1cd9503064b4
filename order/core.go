package order

import "github.com/idempotent-consumer/sbcosmos/idempotent"

// The order domain is built on package idempotent, the pattern itself: these
// names are the core's, so that the order's decision and the worker speak
// one vocabulary.
type (
	// Message is idempotent.Message: one delivery. For an order, ID is the
	// order id and Subject SubjectOrderPlaced (or empty) or
	// SubjectOrderStatusChanged.
	Message = idempotent.Message
	// Outcome is idempotent.Outcome.
	Outcome = idempotent.Outcome
	// Result is idempotent.Result; its Key is the order id.
	Result = idempotent.Result
	// Document is idempotent.Document.
	Document = idempotent.Document
	// DocumentStore is idempotent.DocumentStore: the order's documents
	// carry their partition key value in their orderId field; a document
	// with a "ttl" field (seconds) expires by itself.
	DocumentStore = idempotent.DocumentStore
	// Patch is idempotent.Patch.
	Patch = idempotent.Patch
	// Below is idempotent.Below.
	Below = idempotent.Below
	// PatchOp is idempotent.PatchOp.
	PatchOp = idempotent.PatchOp
	// Patcher is idempotent.Patcher; the Processor applies a status change
	// with it (see WithDocuments); without it, a status change reads the
	// order and replaces it.
	Patcher = idempotent.Patcher
	// CacheStats is idempotent.CacheStats, of the Processor's fact cache.
	CacheStats = idempotent.CacheStats
)

// The outcomes, as idempotent defines them.
const (
	Created   = idempotent.Created
	Duplicate = idempotent.Duplicate
	Mismatch  = idempotent.Mismatch
	Invalid   = idempotent.Invalid
	Transient = idempotent.Transient
	Applied   = idempotent.Applied
	Stale     = idempotent.Stale
	Ignored   = idempotent.Ignored
)

// The patch operations and limit, as idempotent defines them.
const (
	PatchSet       = idempotent.PatchSet
	PatchIncrement = idempotent.PatchIncrement
	MaxPatchOps    = idempotent.MaxPatchOps
)

// The sentinel errors of the storage port, as idempotent defines them.
var (
	ErrAlreadyExists      = idempotent.ErrAlreadyExists
	ErrNotFound           = idempotent.ErrNotFound
	ErrTransient          = idempotent.ErrTransient
	ErrPreconditionFailed = idempotent.ErrPreconditionFailed
	ErrRejected           = idempotent.ErrRejected
)

// IsTransient is idempotent.IsTransient.
func IsTransient(err error) bool { return idempotent.IsTransient(err) }

// Dead-letter and retry reasons, short and stable so that operators can
// group dead-lettered messages by them. The first six are the pattern's
// own (package idempotent); the others are the order domain's.
const (
	ReasonInvalidMessage     = idempotent.ReasonInvalidMessage
	ReasonMessageIDMismatch  = idempotent.ReasonMessageIDMismatch
	ReasonUnsupportedMessage = idempotent.ReasonUnsupportedMessage
	ReasonStoreUnavailable   = idempotent.ReasonStoreUnavailable
	ReasonStoreError         = idempotent.ReasonStoreError
	ReasonStoreRejected      = idempotent.ReasonStoreRejected
	ReasonConcurrentUpdate   = idempotent.ReasonConcurrentUpdate

	// ReasonOrderIDReused: the order exists with another request hash.
	ReasonOrderIDReused      = "OrderIdReused"
	ReasonOrderNotYetCreated = "OrderNotYetCreated"
	ReasonPaymentInProgress  = "PaymentInProgress"
	// ReasonPaymentUnavailable: the payments service failed; a dependency
	// failure (Result.Dependency).
	ReasonPaymentUnavailable = "PaymentUnavailable"
	ReasonPaymentRejected    = "PaymentRejected"
	// ReasonPaymentNeedsReconciliation: the outcome of an earlier capture
	// cannot be established safely (the payments service may have forgotten
	// its idempotency key); the description carries the key for an operator.
	ReasonPaymentNeedsReconciliation = "PaymentNeedsReconciliation"
	// ReasonStatusVersionReused: a status change carries a version that is
	// already stored with other content.
	ReasonStatusVersionReused = "StatusVersionReused"
	// ReasonOrderDocumentMissing: an order's create conflicted on its
	// OrderAccepted event, but the order document is gone: it was deleted
	// after the order was accepted. An operator must restore it (or delete
	// the event) before the message is resubmitted.
	ReasonOrderDocumentMissing = "OrderDocumentMissing"
	// ReasonConsumerMisconfigured: an inbox consumer's name or marker TTL
	// would make every marker illegal in the store; nothing was written and
	// the message is retried, as a dependency failure (Result.Dependency),
	// so that the worker's breaker counts it.
	ReasonConsumerMisconfigured = "ConsumerMisconfigured"
)

// dependency marks r as a dependency failure when it is a retry for a
// reason that a dependency causes (the store, the payments service, a
// consumer's configuration) rather than the message: what the worker's
// circuit breaker counts (Result.DependencyFailed). Every decision of this
// package returns through it.
func dependency(r Result) Result {
	if r.Outcome == Transient {
		switch r.Reason {
		case ReasonStoreUnavailable, ReasonStoreError, ReasonPaymentUnavailable, ReasonConsumerMisconfigured:
			r.Dependency = true
		}
	}
	return r
}
