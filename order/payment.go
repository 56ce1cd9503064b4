package order

import (
	"context"
	"errors"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// TypePayment is the document type of payment records.
const TypePayment = "payment"

// Payment record states.
const (
	PaymentInProgress = "in-progress"
	PaymentCompleted  = "completed"
)

// PaymentRecordID returns the id of an order's payment record.
func PaymentRecordID(orderID string) string { return "Payment:" + orderID }

// PaymentKey returns the Idempotency-Key of an order's payment capture. It
// depends on the order id alone, so every delivery and every worker passes
// the same key, and the payments service charges at most once for as long
// as it remembers the key (see PaymentOptions.KeyRetention).
func PaymentKey(orderID string) string { return "capture:" + orderID }

// PaymentClaim names the delivery that holds a payment claim: the core
// effect's claim (see idempotent.EffectClaim for why a claim of an earlier
// delivery of the same copy may be taken over at once).
type PaymentClaim = idempotent.EffectClaim

// PaymentRecord is the stored form of a payment capture's two-phase record,
// for its readers (the audit, operators, tests): the core effect's record
// (idempotent.EffectRecord) of the step "Payment", with the partition key
// in "orderId", the capture's amount and currency beside the record's own
// fields and the payment id in "paymentId". A delivery claims it (in
// progress, with its identity, a new epoch and the time) before it calls
// the payments service, and completes it afterwards. Every write after the
// first is conditioned on the ETag the writer read or wrote last, so a
// claim that was taken over is fenced: its holder's later writes fail with
// 412 and change nothing.
type PaymentRecord struct {
	ID             string `json:"id"`      // PaymentRecordID(OrderID)
	OrderID        string `json:"orderId"` // the partition key
	Type           string `json:"type"`    // TypePayment
	State          string `json:"state"`   // PaymentInProgress or PaymentCompleted
	IdempotencyKey string `json:"idempotencyKey"`
	AmountMinor    int64  `json:"amountMinor"`
	Currency       string `json:"currency"`
	// RequestHash is the request hash of the order the record pays, so that
	// a read of the record alone tells a duplicate of the order from an id
	// reused for other content. Empty in a record written before the field
	// existed.
	RequestHash string       `json:"requestHash,omitempty"`
	Owner       string       `json:"owner"`     // Claim.String(), for people
	Claim       PaymentClaim `json:"claim"`     // the delivery that holds (or last held) the claim
	Epoch       int64        `json:"epoch"`     // incremented on every claim
	ClaimedAt   time.Time    `json:"claimedAt"` // zero: released, claimable at once
	// FirstAttemptAt is when the key was first sent (the claim written just
	// before the first capture call). The payments service remembers the key
	// for its retention after the charge, which came after this time. Nil
	// (a record written before the field existed) counts as older than any
	// retention.
	FirstAttemptAt *time.Time `json:"firstAttemptAt,omitempty"`
	// Attempts counts the claims so far, as it did before epochs existed;
	// for a record created since, it equals Epoch.
	Attempts    int        `json:"attempts"`
	PaymentID   string     `json:"paymentId,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
}

// Capture is a payment capture request. OrderID is also the order reference
// the payments service records the payment under, which PaymentLookup finds.
type Capture struct {
	OrderID     string
	AmountMinor int64
	Currency    string
}

// PaymentGateway captures payments through a downstream service that
// deduplicates on the idempotency key: a repeated key returns the original
// result and charges nothing, for as long as the service remembers the key.
// Errors matching ErrTransient (or a passed deadline) are retried; errors
// matching ErrPaymentRejected never succeed.
type PaymentGateway interface {
	Capture(ctx context.Context, idempotencyKey string, c Capture) (paymentID string, err error)
}

// PaymentLookup is implemented by a PaymentGateway whose service can list
// the payments it recorded for an order reference from its ledger, which,
// unlike its idempotency keys, it never forgets. Without it, a claim older
// than the key retention cannot be resolved and is dead-lettered with
// ReasonPaymentNeedsReconciliation. Errors matching ErrTransient (or a passed
// deadline) are retried.
type PaymentLookup interface {
	LookupPayments(ctx context.Context, orderID string) ([]CapturedPayment, error)
}

// CapturedPayment is a payment the payments service recorded for an order.
type CapturedPayment struct {
	PaymentID   string
	AmountMinor int64
	Currency    string
}

// ErrPaymentRejected means the payments service refused the capture for
// good, for example because the key was used before for another amount.
var ErrPaymentRejected = errors.New("payment rejected")

// Defaults of PaymentOptions: the core's effect-once defaults, named for
// the payment step.
const (
	// DefaultPaymentKeyRetention is the key retention the payment step
	// assumes unless told otherwise: 24 hours, the shortest that payment
	// providers commonly keep keys (idempotent.DefaultKeyRetention).
	DefaultPaymentKeyRetention = idempotent.DefaultKeyRetention
	// DefaultPaymentWriteTimeout bounds a payment-record write made with a
	// context of its own (see PaymentOptions.WriteTimeout).
	DefaultPaymentWriteTimeout = idempotent.DefaultEffectWriteTimeout
	// PaymentClockSkew is the largest difference between two workers'
	// clocks the payment step allows for (idempotent.ClockSkew).
	PaymentClockSkew = idempotent.ClockSkew
)

// PaymentOptions configures the payment step of a Processor.
type PaymentOptions struct {
	// Gateway captures the payments. If it also implements PaymentLookup,
	// claims older than the key retention are resolved by a lookup.
	Gateway PaymentGateway
	// Lease is how long a claim held by another copy of the message (a
	// different SequenceNumber: a producer retry, a resubmission) protects
	// a capture in progress: the queue's lock duration, since a handler
	// never runs longer than its message timeout, which is below it. A
	// claim of an earlier delivery of the same copy needs no lease: its
	// lock has ended, and it is taken over at once. Required.
	Lease time.Duration
	// Owner names this worker in the claims.
	Owner string
	// KeyRetention is how long the payments service remembers an
	// idempotency key after its charge: at most the service's real
	// retention, never more. A claim whose key was first sent longer ago
	// than KeyRetention minus (Lease + PaymentClockSkew) is never captured
	// blindly: the payment is looked up instead. Zero means
	// DefaultPaymentKeyRetention. Check it at start against the redelivery
	// horizon (RedeliveryHorizon.CheckRetention): below it, late
	// redeliveries need a lookup, and a gateway without one dead-letters
	// them for reconciliation.
	KeyRetention time.Duration
	// WriteTimeout bounds every payment-record write made with a context of
	// its own, after the handler's context may have ended: the completed
	// mark after a capture (with its re-read after a 412) and the release of
	// a claim. Process may return up to two WriteTimeouts after the
	// handler's deadline, so keep it well below the lock duration. Zero
	// means DefaultPaymentWriteTimeout, at most a tenth of Lease: with the
	// worker's default message timeout (80% of the lock), both writes then
	// end within the lock.
	WriteTimeout time.Duration
}

// Validate reports every setting of o that the payment step cannot work
// with, after defaults: the core's checks of the effect it configures
// (idempotent.EffectOptions.Validate).
func (o PaymentOptions) Validate() error { return paymentEffectOptions(o, nil).Validate() }

// BlindRetryAge returns how long after a key was first sent a capture may
// still be repeated with it without a lookup: KeyRetention minus the lease
// and minus PaymentClockSkew (idempotent.EffectOptions.BlindRetryAge).
// Zero or less: every retry of a claim is looked up.
func (o PaymentOptions) BlindRetryAge() time.Duration {
	return paymentEffectOptions(o, nil).BlindRetryAge()
}

// WithPaymentOptions makes the Processor capture each accepted order's
// payment through o.Gateway, recording it in the order's partition with a
// fenced two-phase record. The Processor needs a DocumentStore
// (WithDocuments). Invalid options (see PaymentOptions.Validate) make every
// payment step a retry that names the problem; validate them at start.
func WithPaymentOptions(o PaymentOptions) Option {
	return func(p *Processor) { p.payments = &o }
}

// WithPayments is WithPaymentOptions with the default key retention and
// write timeout: lease is the queue's lock duration and owner names this
// worker in the claims.
func WithPayments(g PaymentGateway, lease time.Duration, owner string) Option {
	return WithPaymentOptions(PaymentOptions{Gateway: g, Lease: lease, Owner: owner})
}
