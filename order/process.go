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
type Processor struct {
	store    idempotent.Store
	now      func() time.Time
	docs     idempotent.DocumentStore // status changes and payment records; nil: neither
	payments *payments                // nil: no payment step
	facts    *idempotent.FactCache    // nil: no fact cache (see WithFactCache)
	copies   *idempotent.CopyShare    // nil: create first on every first delivery (see WithAdaptiveReadFirst)
	// readFirst is copies, or without it idempotent.RedeliveriesFirst.
	readFirst idempotent.ReadFirstPolicy
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

// placeOrder reads top to bottom: decode, look up, create, compare,
// effect. The store's atomic create is both the duplicate check and the
// write; the lookup before it (lookup.go) only saves round trips, and the
// create stays the arbiter of every race: a lookup that finds nothing leads
// to the create, which conflicts if another delivery was first.
//
// The round trips to the store: a new order costs one (the batch), with a
// payment step two (the batch with the claim, the completed mark) and the
// payments call. A duplicate costs one read (with a payment step, of the
// payment record, which tells both the request hash and whether the
// payment is done), or none when the fact cache knows it.
func (p *Processor) placeOrder(ctx context.Context, m idempotent.Message) idempotent.Result {
	// 1. Decode and validate; the dedup key is the MessageId, which the
	// producer sets to the order id. A message that fails here can never
	// succeed.
	o, invalid := decodeOrderMessage(m)
	if invalid != nil {
		return *invalid
	}
	hash := o.RequestHash()
	// 2. Look up: the facts the store confirmed earlier, then, when a
	// duplicate is likely, what the store holds.
	if res, found := p.lookUp(ctx, m, &o, hash); found {
		return res
	}
	// 3. Create the order, its outbox event and (with a payment step) the
	// payment claim atomically: the dedup check and the write in one step.
	w := p.newWrite(m, &o, hash)
	etags, err := WriteOrder(ctx, p.store, w)
	switch {
	case errors.Is(err, idempotent.ErrAlreadyExists):
		p.readFirst.Observe(m, true)
		// 4. Compare with what the store holds: a duplicate or a reused id.
		res, _ := p.fromStore(ctx, m, &o, hash, true)
		return res
	case err != nil:
		return storeFailure(o.OrderID, "create", err)
	}
	p.readFirst.Observe(m, false)
	p.learn(o.OrderID, hash, false)
	// 5. The side effect outside the transaction: the payment capture.
	return p.effect(ctx, m, &o, hash, w, etags)
}

// newWrite builds what an accepted o writes: with a payment step, the
// payment record's first claim joins the order's batch.
func (p *Processor) newWrite(m idempotent.Message, o *Order, hash string) Write {
	w := NewWrite(*o, m.ID, hash, p.now())
	if p.claimsInBatch(o) {
		rec := newPaymentRecord(o, hash, p.claimOf(m), p.now().UTC())
		w.Payment = &rec
	}
	return w
}

// effect captures the payment of the order this delivery created, on the
// claim its batch wrote, at the ETag the batch reported; without a claim
// in the batch, the payment step runs on its own (or says why it cannot).
func (p *Processor) effect(ctx context.Context, m idempotent.Message, o *Order, hash string, w Write, etags WriteETags) idempotent.Result {
	res := idempotent.Result{Outcome: idempotent.Created, Key: o.OrderID}
	switch {
	case w.Payment != nil:
		if r := p.captureClaimed(ctx, *w.Payment, etags.Payment); r != nil {
			return *r
		}
		p.learn(o.OrderID, hash, true)
	case p.payments != nil:
		if r, _ := p.capturePayment(ctx, m, w.Order); r != nil {
			return *r
		}
	}
	return res
}

// claimsInBatch reports whether the payment claim of o is written in its
// order's batch: a payment step is configured and can run, and there is
// something to capture.
func (p *Processor) claimsInBatch(o *Order) bool {
	return p.payments != nil && p.payments.err == nil && p.docs != nil && o.TotalMinor > 0
}

// fromStore decides a delivery of o (hash) from what the store holds, when it
// holds the order: Duplicate (after the payment step, if any) or Mismatch.
// With a payment step it reads the payment record first, written in the
// order's batch with the order's request hash: one read then tells a
// duplicate from a reused id and whether the payment is done. Without one,
// or for a record that predates the request hash, it reads the order.
//
// If the store holds no order, fromStore reports false, unless conflicted (the
// create just conflicted): then the order document is missing although a
// document of its batch exists (see orderDocumentMissing).
//
// A payment record with a request hash is written only in its order's
// batch, so finding one proves the order was accepted with that hash. Like
// the fact cache, this path does not notice an order document deleted
// since, which is out of contract (see WithFactCache): the order document
// itself is read, and OrderDocumentMissing reported, only without a
// payment step, for an order with nothing to capture, or when the record
// predates the hash.
func (p *Processor) fromStore(ctx context.Context, m idempotent.Message, o *Order, hash string, conflicted bool) (idempotent.Result, bool) {
	op := "read"
	if conflicted {
		op = "read after conflict"
	}
	if p.claimsInBatch(o) {
		var rec PaymentRecord
		etag, err := readJSON(ctx, p.docs, o.OrderID, PaymentRecordID(o.OrderID), &rec)
		switch {
		case errors.Is(err, idempotent.ErrNotFound):
			if !conflicted {
				return idempotent.Result{}, false // a new order, most likely: create it
			}
			// The order was accepted without a claim (before claims were
			// batched, or by a worker without payments): read the order.
		case err != nil:
			return storeFailure(o.OrderID, op+" payment record", err), true
		case rec.RequestHash == "":
			// A record that predates the request hash: read the order.
		case rec.RequestHash != hash:
			p.learn(o.OrderID, rec.RequestHash, false)
			return idempotent.Result{Outcome: idempotent.Mismatch, Key: o.OrderID, Reason: ReasonOrderIDReused,
				Description: fmt.Sprintf("order %s exists with request hash %s (recorded on its payment record %s, claimed first by message %s); this message has request hash %s",
					o.OrderID, rec.RequestHash, rec.ID, rec.Claim.MessageID, hash)}, true
		default:
			res := idempotent.Result{Outcome: idempotent.Duplicate, Key: o.OrderID,
				Description: fmt.Sprintf("order accepted earlier (its payment record %s is %s)", rec.ID, rec.State)}
			if rec.State != PaymentCompleted {
				p.learn(o.OrderID, hash, false)
				r, took := p.continuePayment(ctx, m, rec, etag, p.now().UTC())
				if r != nil {
					r.Resumed = took
					return *r, true
				}
				res.Description = fmt.Sprintf("order accepted earlier; its payment record %s is completed now", rec.ID)
				res.Resumed = took
			}
			p.learn(o.OrderID, hash, true)
			return res, true
		}
	}
	stored, err := ReadOrder(ctx, p.store, o.OrderID)
	switch {
	case errors.Is(err, idempotent.ErrNotFound):
		if !conflicted {
			return idempotent.Result{}, false
		}
		return p.orderDocumentMissing(ctx, o.OrderID, err), true
	case err != nil:
		return storeFailure(o.OrderID, op, err), true
	}
	p.learn(o.OrderID, stored.RequestHash, false)
	res := compareStored(stored, hash)
	if res.Outcome != idempotent.Duplicate || p.payments == nil {
		return res, true
	}
	// An earlier delivery may have stopped between the order and its
	// payment: the payment step runs for duplicates too.
	r, took := p.capturePayment(ctx, m, stored)
	if r != nil {
		r.Resumed = took
		return *r, true
	}
	p.learn(o.OrderID, hash, true)
	res.Resumed = took
	return res, true
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

// compareStored decides between Duplicate and Mismatch from the stored
// order document.
func compareStored(stored OrderDocument, hash string) idempotent.Result {
	orderID := stored.OrderID
	if stored.RequestHash == hash {
		return idempotent.Result{Outcome: idempotent.Duplicate, Key: orderID,
			Description: fmt.Sprintf("order created by message %s at %s", stored.MessageID, stored.ProcessedAt.Format(time.RFC3339))}
	}
	return idempotent.Result{Outcome: idempotent.Mismatch, Key: orderID, Reason: ReasonOrderIDReused,
		Description: fmt.Sprintf("order %s exists with request hash %s (created by message %s at %s); this message has request hash %s",
			orderID, stored.RequestHash, stored.MessageID, stored.ProcessedAt.Format(time.RFC3339), hash)}
}

// orderDocumentMissing decides a create that conflicted although the order
// document is not there (notFound is the read's error). The batch conflicts
// on any of its documents, so either the order document was deleted between
// the create and the read, or a companion document, the OrderAccepted event,
// exists without it: someone deleted the order document after the batch
// wrote both (the event carries no ttl and is written only with its order).
//
// The two are told apart by reading the event, and a read that lagged (a
// replica behind the create, under Session consistency) from a deleted
// document by reading the order once more after the event: no single read
// dead-letters anything. If the event exists and the second read confirms
// the order document missing, the state is permanent: every redelivery
// would conflict on the event and read no order again, until
// MaxDeliveryCount dead-letters the message without a reason; nor may the
// worker recreate the order by itself, since downstream readers already
// consumed the event. So the message is dead-lettered at once with
// ReasonOrderDocumentMissing, telling an operator what exists and what to
// do. If the event is gone too, both were deleted in between: a retry
// decides anew (and creates the order). Without a store that can read the
// event the two cannot be told apart, and a retry is the safe side.
func (p *Processor) orderDocumentMissing(ctx context.Context, orderID string, notFound error) idempotent.Result {
	docs := p.docs
	if docs == nil {
		docs, _ = p.store.(idempotent.DocumentStore)
	}
	if docs == nil {
		return idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: idempotent.ReasonStoreError,
			Description: "read after conflict: the order document is not found and this store cannot read its OrderAccepted event: " + notFound.Error(), Err: notFound}
	}
	eventID := EventID(orderID)
	_, _, err := docs.ReadDocument(ctx, orderID, eventID)
	switch {
	case errors.Is(err, idempotent.ErrNotFound):
		return idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: idempotent.ReasonConcurrentUpdate,
			Description: "read after conflict: neither the order document nor its OrderAccepted event exists any more (deleted since the create); retrying", Err: notFound}
	case err != nil:
		return storeFailure(orderID, "read OrderAccepted event after conflict", err)
	}
	// Confirm before acting: under Session consistency the first read may
	// have landed on a replica that lagged behind the create that
	// conflicted (another process's write, whose session token this one
	// did not have). The event read saw the batch, and a session-aware
	// store (cosmosstore, memstore's Session) carries the token of that
	// read into this one, which therefore sees the order document unless
	// it is really gone.
	if _, err := ReadOrder(ctx, p.store, orderID); err == nil {
		return idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: idempotent.ReasonConcurrentUpdate,
			Description: "read after conflict: a first read found no order document, a read after its OrderAccepted event found it (a read that lagged behind the create); retrying", Err: notFound}
	} else if !errors.Is(err, idempotent.ErrNotFound) {
		return storeFailure(orderID, "read the order again after conflict", err)
	}
	err = fmt.Errorf("order document %s is missing but its event %s exists in partition %s: %w", orderID, eventID, orderID, notFound)
	return idempotent.Result{Outcome: idempotent.Invalid, Key: orderID, Reason: ReasonOrderDocumentMissing,
		Description: fmt.Sprintf("the create conflicted, the order document %q does not exist, but its OrderAccepted event %q does (partition %q): "+
			"the order document was deleted after the order was accepted, and no redelivery can change that. "+
			"Restore the order document from the event (or delete the event if the order must be processed anew), then resubmit this message",
			orderID, eventID, orderID), Err: err}
}

// storeFailure turns a store error into a result: see
// idempotent.StoreFailure; a stored document that cannot be decoded is
// Invalid (see unreadable).
func storeFailure(orderID, op string, err error) idempotent.Result {
	if r, ok := unreadable(orderID, op, err); ok {
		return r
	}
	return idempotent.StoreFailure(orderID, op, err)
}
