package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Processor makes the processing decision. It is safe for concurrent use: all
// coordination between concurrent deliveries of one message happens in the
// store's atomic create and its conditional writes; the fact cache (see
// WithFactCache) holds only what the store confirmed and cannot change.
//
// An order placement is the core's create-once consumer
// (idempotent.Consumer) with the payment as its effect-once step
// (idempotent.Effect): this package gives it the order's schema,
// validation, hash and documents (placement), the strict read of the order
// document (orderLookup) and the payments gateway (paymentDownstream), and
// makes no store write or conflict decision of its own.
type Processor struct {
	store    idempotent.Store
	now      func() time.Time
	docs     idempotent.DocumentStore // status changes and payment records; nil: neither
	payments *PaymentOptions          // nil: no payment step
	facts    *idempotent.FactCache    // nil: no fact cache (see WithFactCache)
	copies   *idempotent.CopyShare    // nil: create first on every first delivery (see WithAdaptiveReadFirst)
	// readFirst is copies, or without it idempotent.RedeliveriesFirst.
	readFirst idempotent.ReadFirstPolicy
	// placements decides order placements.
	placements *idempotent.Consumer[Order]
	// statuses applies status changes; nil without a document store.
	statuses *idempotent.Versioned[*statusState]
}

// Option configures a Processor.
type Option func(*Processor)

// WithDocuments gives the Processor the document-level store that status
// changes and payment records need; the project's stores implement both
// Store and DocumentStore.
func WithDocuments(d idempotent.DocumentStore) Option { return func(p *Processor) { p.docs = d } }

// NewProcessor returns a Processor that writes to s. now stamps processedAt;
// nil means time.Now.
func NewProcessor(s idempotent.Store, now func() time.Time, opts ...Option) *Processor {
	if now == nil {
		now = time.Now
	}
	p := &Processor{store: s, now: now, facts: idempotent.NewFactCache(DefaultFactCacheSize), copies: &idempotent.CopyShare{}}
	for _, o := range opts {
		o(p)
	}
	p.readFirst = idempotent.RedeliveriesFirst{}
	if p.copies != nil {
		p.readFirst = p.copies
	}
	copts := []idempotent.Option{
		idempotent.WithLookup(func(idempotent.Lookup) idempotent.Lookup { return orderLookup{s} }),
		idempotent.WithReadFirst(p.readFirst),
		idempotent.WithFactCache(p.facts),
	}
	if p.payments != nil {
		copts = append(copts, idempotent.WithEffect(idempotent.NewEffect(p.docs, paymentEffectOptions(*p.payments, now))))
	}
	p.placements = idempotent.NewConsumer[Order](placement{now: now}, s, copts...)
	if p.docs != nil {
		p.statuses = idempotent.NewVersioned[*statusState](p.docs, statusConfig)
	}
	return p
}

// Process decides what to do with one delivery of m: an order placement, or,
// with the OrderStatusChanged subject, a status change.
func (p *Processor) Process(ctx context.Context, m idempotent.Message) idempotent.Result {
	return dependency(p.process(ctx, m))
}

func (p *Processor) process(ctx context.Context, m idempotent.Message) idempotent.Result {
	switch m.Subject {
	case "", SubjectOrderPlaced:
		return p.placeOrder(ctx, m)
	case SubjectOrderStatusChanged:
		return p.applyStatus(ctx, m)
	default:
		err := fmt.Errorf("unknown message subject %q", m.Subject)
		return idempotent.Result{Outcome: idempotent.Invalid, Reason: idempotent.ReasonUnsupportedMessage, Description: err.Error(), Err: err}
	}
}

// placeOrder runs the core's consumer: decode, look up, create, compare,
// and the payment once (see idempotent.Consumer.Process). The round trips
// to the store: a new order costs one (the batch), with a payment step two
// (the batch with the claim, the completed mark) and the payments call. A
// duplicate costs one read (with a payment step, of the payment record,
// which tells both the request hash and whether the payment is done), or
// none when the fact cache knows it.
func (p *Processor) placeOrder(ctx context.Context, m idempotent.Message) idempotent.Result {
	r := p.placements.Process(ctx, m)
	if r.Reason == idempotent.ReasonStoredDocumentUnreadable {
		// Say what an operator of this deployment does about it.
		if u, ok := unreadable(r.Key, "read", r.Err); ok {
			return u
		}
	}
	return r
}

// placement is the order placement's idempotent.Kind: the order's schema,
// validation, hash and documents, and its payment as the effect's request.
type placement struct{ now func() time.Time }

var (
	_ idempotent.Kind[Order]       = placement{}
	_ idempotent.EffectKind[Order] = placement{}
	_ idempotent.ReasonNamer       = placement{}
	_ idempotent.MissingNamer      = placement{}
)

// Decode decodes and validates an order message; an error names the order
// when its id parsed.
func (placement) Decode(body []byte) (Order, error) {
	o, orderID, err := decodeOrder(body)
	if err != nil && orderID != "" {
		return o, &idempotent.EntityError{Entity: orderID, Err: err}
	}
	return o, err
}

// ID returns the order id: the MessageId the producer sets.
func (placement) ID(o Order) string { return o.OrderID }

// RequestHash returns the order's request hash.
func (placement) RequestHash(o Order) string { return o.RequestHash() }

// Documents returns the order document (the marker) and its OrderAccepted
// event.
func (k placement) Documents(m idempotent.Message, o Order, hash string) ([]idempotent.Document, error) {
	return NewWrite(o, m.ID, hash, k.now()).Documents()
}

// EffectRequest returns the capture of the order's total; an order whose
// total is zero has nothing to capture (the payments API rejects a zero
// amount): no record, no call.
func (placement) EffectRequest(o Order) ([]byte, bool) {
	if o.TotalMinor == 0 {
		return nil, false
	}
	return captureRequest(o.TotalMinor, o.Currency), true
}

// ReusedReason names an order id reused for other content.
func (placement) ReusedReason() string { return ReasonOrderIDReused }

// MissingReason names an order document deleted while its OrderAccepted
// event exists.
func (placement) MissingReason() string { return ReasonOrderDocumentMissing }

// orderLookup is the placement's idempotent.Lookup: it reads the order
// document strictly (ReadOrder), so that a document that is not an order is
// unreadable, never a mismatch.
type orderLookup struct{ s idempotent.Reader }

func (l orderLookup) Lookup(ctx context.Context, orderID string) (string, bool, error) {
	doc, err := ReadOrder(ctx, l.s, orderID)
	switch {
	case errors.Is(err, idempotent.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return doc.RequestHash, true, nil
}

func (orderLookup) Learn(string, string) {}

// storeFailure turns a store error into a result: see
// idempotent.StoreFailure; a stored document that cannot be decoded is
// Invalid (see unreadable).
func storeFailure(orderID, op string, err error) idempotent.Result {
	if r, ok := unreadable(orderID, op, err); ok {
		return r
	}
	return idempotent.StoreFailure(orderID, op, err)
}

// decodeOrderMessage decodes and validates an order message and checks that
// its orderId is its MessageId. It returns the Invalid result to settle with
// when either fails.
func decodeOrderMessage(m idempotent.Message) (Order, *idempotent.Result) {
	o, orderID, err := decodeOrder(m.Body)
	if err != nil {
		return Order{}, &idempotent.Result{Outcome: idempotent.Invalid, Key: orderID, Reason: idempotent.ReasonInvalidMessage, Description: err.Error(), Err: err}
	}
	if m.ID != o.OrderID {
		err := &FieldError{Field: "orderId", Problem: fmt.Sprintf("%q does not equal the MessageId %q", o.OrderID, m.ID)}
		return o, &idempotent.Result{Outcome: idempotent.Invalid, Key: o.OrderID, Reason: idempotent.ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	return o, nil
}
