package order

import "github.com/idempotent-consumer/sbcosmos/idempotent"

// The order domain's dead-letter and retry reasons, short and stable so
// that operators can group dead-lettered messages by them, beside the
// pattern's own (idempotent.ReasonInvalidMessage and the others).
const (
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
	// ReasonStoredDocumentUnreadable: a document the message needs (its
	// order, payment record or inbox marker) is stored but cannot be
	// decoded (see StoredDocumentError). Every redelivery would read the
	// same bytes, so the message is dead-lettered at its first delivery;
	// the description names the document: an operator repairs (or
	// deletes) it, then resubmits the message.
	ReasonStoredDocumentUnreadable = "StoredDocumentUnreadable"
	// ReasonConsumerMisconfigured: an inbox consumer's name or marker TTL
	// would make every marker illegal in the store; nothing was written and
	// the message is retried, as a dependency failure (Result.Dependency),
	// so that the worker's breaker counts it.
	ReasonConsumerMisconfigured = "ConsumerMisconfigured"
)

// dependency marks r as a dependency failure when it is a retry for a
// reason that a dependency causes (the store, the payments service, a
// consumer's configuration) rather than the message: what the worker's
// circuit breaker counts (idempotent.Result.DependencyFailed). Every decision of this
// package returns through it.
func dependency(r idempotent.Result) idempotent.Result {
	if r.Outcome == idempotent.Transient {
		switch r.Reason {
		case idempotent.ReasonStoreUnavailable, idempotent.ReasonStoreError, ReasonPaymentUnavailable, ReasonConsumerMisconfigured:
			r.Dependency = true
		}
	}
	return r
}
