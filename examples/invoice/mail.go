package invoice

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// MailName names the invoice mail's step: its record's id is
// "InvoiceMail:<invoiceId>", in the invoice's partition, and so is the
// idempotency key passed to the Mailer.
const MailName = "InvoiceMail"

// The invoice mail's reasons (see idempotent.EffectReasons).
const (
	// ReasonMailInProgress: another delivery (or request) holds the mail's
	// claim; retried.
	ReasonMailInProgress = "InvoiceMailInProgress"
	// ReasonMailUnavailable: the mail service failed; a dependency
	// failure, retried.
	ReasonMailUnavailable = "MailServiceUnavailable"
	// ReasonMailRejected: the mail service refused the mail for good.
	ReasonMailRejected = "InvoiceMailRejected"
	// ReasonMailNeedsReconciliation: whether an earlier call sent the mail
	// cannot be established safely (see idempotent.Finder); the
	// description carries the key.
	ReasonMailNeedsReconciliation = "InvoiceMailNeedsReconciliation"
)

// Mail is what the Mailer sends: the invoice, to its customer.
type Mail struct {
	InvoiceID   string
	CustomerID  string
	Currency    string
	AmountMinor int64
}

// Mailer is the client of a mail service that sends an invoice to its
// customer and deduplicates on an idempotency key: a key it has seen
// returns the first call's message id and sends nothing again, for as long
// as the service remembers keys. An error wrapping
// idempotent.ErrEffectRejected is a refusal for good; any other error is
// retried. Implementations must be safe for concurrent use and must pass
// key to the service unchanged (as an Idempotency-Key header, say).
//
// The Mailer has no lookup of the mails sent (see idempotent.Finder): a
// claim whose key the service may have forgotten (older than
// MailOptions.KeyRetention, less a lease and the clock skew) is never sent
// blindly but dead-lettered with ReasonMailNeedsReconciliation.
type Mailer interface {
	SendInvoice(ctx context.Context, key string, m Mail) (messageID string, err error)
}

// MailOptions configures the invoice mail. Each field is the
// idempotent.EffectOptions field of the same name.
type MailOptions struct {
	Mailer Mailer // required
	// Lease is the queue's lock duration for a consumer; for a Handler,
	// above its Timeout (see HandlerOptions).
	Lease        time.Duration
	Owner        string           // names this worker in the claims
	KeyRetention time.Duration    // how long the mail service keeps keys; zero: idempotent.DefaultKeyRetention
	Now          func() time.Time // nil: time.Now
}

// NewMailEffect returns the invoice mail as an effect-once step over store,
// to give to a consumer (idempotent.WithEffect) or a Handler
// (HandlerOptions.Mail). Its record is stored in the invoice's partition,
// and the key passed to the Mailer is stable per invoice, so that every
// delivery and every request of one invoice sends at most one mail.
// Invalid options make every run a retry that names the problem: check
// Err at start.
func NewMailEffect(store idempotent.DocumentStore, o MailOptions) *idempotent.Effect {
	var d idempotent.Downstream
	if o.Mailer != nil {
		d = mailDownstream{o.Mailer}
	}
	return idempotent.NewEffect(store, idempotent.EffectOptions{
		Name:              MailName,
		PartitionKeyField: "invoiceId",
		RefField:          "mailId",
		Downstream:        d,
		Lease:             o.Lease,
		Owner:             o.Owner,
		KeyRetention:      o.KeyRetention,
		Now:               o.Now,
		Reasons: idempotent.EffectReasons{InProgress: ReasonMailInProgress, Unavailable: ReasonMailUnavailable,
			Rejected: ReasonMailRejected, NeedsReconciliation: ReasonMailNeedsReconciliation},
	})
}

// mailRequest is the mail's request as its record stores it, beside the
// record's own fields.
type mailRequest struct {
	CustomerID  string `json:"customerId"`
	Currency    string `json:"currency"`
	AmountMinor int64  `json:"amountMinor"`
}

// EffectRequest returns the mail's request for v: every accepted invoice is
// mailed to its customer.
func (Kind) EffectRequest(v Invoice) ([]byte, bool) {
	b, err := json.Marshal(mailRequest{CustomerID: v.CustomerID, Currency: v.Currency, AmountMinor: v.AmountMinor})
	return b, err == nil
}

// mailDownstream is a Mailer as the core's Downstream.
type mailDownstream struct{ m Mailer }

var _ idempotent.Downstream = mailDownstream{}

// Do sends the invoice mail the request describes under key.
func (d mailDownstream) Do(ctx context.Context, key, invoiceID string, request []byte) (string, error) {
	var r mailRequest
	if err := json.Unmarshal(request, &r); err != nil {
		return "", fmt.Errorf("%w: mail request %s: %w", idempotent.ErrEffectRejected, request, err)
	}
	return d.m.SendInvoice(ctx, key, Mail{InvoiceID: invoiceID, CustomerID: r.CustomerID, Currency: r.Currency, AmountMinor: r.AmountMinor})
}
