package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// capturePayment makes sure the order's payment is captured exactly once.
// It returns nil when the capture is completed (now or before) or when there
// is nothing to capture, else the Result to settle with, and whether this
// delivery took over a claim another delivery held (Result.Resumed).
//
// An order whose total is zero has nothing to capture: no record, no call.
//
// The record moves: absent → in progress (claimed) → completed. On a
// redelivery: completed → nothing to do. In progress → the claim is taken
// over (a new epoch, ETag-conditioned) if it was released, if it is held by
// an earlier delivery of this very copy of the message (whose lock has
// ended, since Service Bus redelivers a copy only then), or if it is held by
// another copy and its lease (the lock duration) has run out; otherwise
// another delivery may be capturing, and this one retries later.
//
// After a takeover the key is sent again only while the payments service
// certainly still remembers it (PaymentOptions.BlindRetryAge after its first
// send); it then answers with the original result if an earlier call did
// charge. An older claim's outcome is unknown: the payment is looked up in
// the service's ledger (PaymentLookup) and the record completed with what
// it finds; what cannot be resolved is dead-lettered with
// ReasonPaymentNeedsReconciliation and the key, never captured blindly.
//
// Writes that must happen after the handler's context may have ended (the
// completed mark, the release of a claim) run under a context of their own,
// bounded by PaymentOptions.WriteTimeout.
func (p *Processor) capturePayment(ctx context.Context, m idempotent.Message, doc OrderDocument) (r *idempotent.Result, tookOver bool) {
	orderID := doc.OrderID
	switch {
	case p.payments.err != nil:
		return &idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: ReasonPaymentUnavailable, Description: "payment step misconfigured: " + p.payments.err.Error(), Err: p.payments.err}, false
	case p.docs == nil:
		err := errors.New("payments configured without a document store")
		return &idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: idempotent.ReasonStoreError, Description: err.Error(), Err: err}, false
	case doc.TotalMinor == 0:
		return nil, false // nothing to capture; the payments API rejects a zero amount
	}
	now := p.now().UTC()
	me := p.claimOf(m)

	// 1. Claim the record: create it, or take its claim over.
	var rec PaymentRecord
	etag, err := readJSON(ctx, p.docs, orderID, PaymentRecordID(orderID), &rec)
	switch {
	case errors.Is(err, idempotent.ErrNotFound):
		// The order was accepted without its claim (by a worker that did
		// not batch it, or without a payment step): create it on its own.
		rec = PaymentRecord{ID: PaymentRecordID(orderID), OrderID: orderID, Type: TypePayment, State: PaymentInProgress,
			IdempotencyKey: PaymentKey(orderID), AmountMinor: doc.TotalMinor, Currency: doc.Currency, RequestHash: doc.RequestHash,
			Owner: me.String(), Claim: me, Epoch: 1, ClaimedAt: now, FirstAttemptAt: &now, Attempts: 1}
		body, err := json.Marshal(rec)
		if err != nil {
			return ptr(storeFailure(orderID, "encode payment record", err)), false
		}
		_, err = p.docs.CreateBatch(ctx, orderID, []idempotent.Document{{ID: rec.ID, Body: body}})
		if errors.Is(err, idempotent.ErrAlreadyExists) {
			return paymentBusy(orderID, "claimed by another delivery just now"), false
		}
		if err != nil {
			return ptr(storeFailure(orderID, "create payment record", err)), false
		}
		// The create answers no ETag: read it, and check that the record
		// read is still the one created, since the claim may have been
		// taken over in between (by this copy's next delivery, if this
		// one's lock lapsed).
		var got PaymentRecord
		if etag, err = readJSON(ctx, p.docs, orderID, rec.ID, &got); err != nil {
			// The claim is ours but its ETag unknown: it is taken over at
			// once by this copy's next delivery, or after the lease.
			return ptr(storeFailure(orderID, "read payment record", err)), false
		}
		switch {
		case got.State == PaymentCompleted:
			return nil, false
		case got.Epoch != rec.Epoch || got.Claim != me:
			return paymentBusy(orderID, fmt.Sprintf("claim taken over by %s right after its creation", got.Owner)), false
		}
		return p.captureClaimed(ctx, rec, etag), false
	case err != nil:
		return ptr(storeFailure(orderID, "read payment record", err)), false
	}
	return p.continuePayment(ctx, m, rec, etag, now)
}

// claimOf returns the claim of delivery m.
func (p *Processor) claimOf(m idempotent.Message) PaymentClaim {
	return PaymentClaim{Worker: p.payments.Owner, MessageID: m.ID, SequenceNumber: claimSequence(m.SequenceNumber), DeliveryCount: m.DeliveryCount}
}

// newPaymentRecord returns the first claim of o's payment record (request
// hash hash) by the delivery me at now: epoch 1, first sent now.
func newPaymentRecord(o *Order, hash string, me PaymentClaim, now time.Time) PaymentRecord {
	return PaymentRecord{ID: PaymentRecordID(o.OrderID), OrderID: o.OrderID, Type: TypePayment, State: PaymentInProgress,
		IdempotencyKey: PaymentKey(o.OrderID), AmountMinor: o.TotalMinor, Currency: o.Currency, RequestHash: hash,
		Owner: me.String(), Claim: me, Epoch: 1, ClaimedAt: now, FirstAttemptAt: &now, Attempts: 1}
}

// continuePayment goes on from rec, the payment record read at etag: done if
// it is completed, else its claim is taken over if it may be, and the
// payment captured. tookOver reports that the claim was held by another
// delivery (not released) and this one's takeover was written.
func (p *Processor) continuePayment(ctx context.Context, m idempotent.Message, rec PaymentRecord, etag string, now time.Time) (r *idempotent.Result, tookOver bool) {
	orderID := rec.OrderID
	if rec.State == PaymentCompleted {
		return nil, false
	}
	me := p.claimOf(m)
	ok, why := mayTakeOver(rec, me, now, p.payments.Lease)
	if !ok {
		return paymentBusy(orderID, why), false
	}
	held := !rec.ClaimedAt.IsZero() // else released by its holder: claimed anew
	rec.Owner, rec.Claim, rec.Epoch, rec.ClaimedAt, rec.Attempts = me.String(), me, rec.Epoch+1, now, rec.Attempts+1
	etag, err := p.replaceJSON(ctx, orderID, rec.ID, rec, etag)
	if err != nil {
		if errors.Is(err, idempotent.ErrPreconditionFailed) {
			return paymentBusy(orderID, "claimed by another delivery just now"), false
		}
		return ptr(storeFailure(orderID, "take over payment record", err)), false
	}
	return p.captureClaimed(ctx, rec, etag), held
}

// captureClaimed captures the payment of rec, whose claim this delivery
// holds at etag, and marks the record completed. A store that reports no
// ETags (cosmium) leaves etag empty: the replaces are then unconditional,
// and no claim is fenced.
//
// The key's age is measured here, after the store calls that claimed the
// record (they may take as long as the handler's context allows), and every
// request of the capture call is sent before a deadline that keeps the key
// remembered: see captureDeadline. The claim's time is not used for it.
func (p *Processor) captureClaimed(ctx context.Context, rec PaymentRecord, etag string) *idempotent.Result {
	orderID := rec.OrderID
	// From here on the claim is this delivery's, as long as its ETag is.

	// 2. A claim whose key the service may have forgotten is resolved by a
	// lookup, never by a blind capture.
	checked := p.now().UTC()
	looked := p.keyMayBeForgotten(rec, checked)
	if looked {
		if r, done := p.resolveOldClaim(ctx, rec, etag); done {
			return r
		}
	}

	// 3. Call the payments service with the order's key, before the
	// deadline that keeps the key remembered.
	paymentID, err := p.sendCapture(ctx, rec, p.captureDeadline(rec, checked, looked))
	if err != nil {
		// Release the claim so that any redelivery retries at once; if the
		// release fails, this copy's next delivery takes it over at once
		// and another copy after the lease.
		p.release(ctx, rec, etag)
		if errors.Is(err, ErrPaymentRejected) {
			return &idempotent.Result{Outcome: idempotent.Invalid, Key: orderID, Reason: ReasonPaymentRejected, Description: err.Error(), Err: err}
		}
		return &idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: ReasonPaymentUnavailable, Description: "capture: " + err.Error(), Err: err}
	}

	// 4. Mark it completed.
	return p.complete(ctx, rec, etag, paymentID)
}

// captureDeadline returns the time (on the Processor's clock) by which every
// request of rec's capture must be sent, so that it reaches the payments
// service while the service still remembers the key of any earlier charge.
//
// The argument: a second charge needs a request with the key to reach the
// service more than KeyRetention after a charge with it. Every request is
// sent after a point J at which no charge with the key existed yet, and
// before J + KeyRetention - Lease, minus PaymentClockSkew when J was stamped
// by another worker's clock; any charge came after J, so the request reaches
// the service less than KeyRetention after it as long as the request
// arrives within a lease of being sent. J is:
//
//   - without a lookup, the key's first send (rec.FirstAttemptAt, stamped by
//     the worker that first claimed the record): the deadline is
//     FirstAttemptAt + BlindRetryAge, which the age check made at checked
//     has shown to lie ahead;
//   - after a lookup that found no charge, checked, taken before the lookup
//     started on this worker's clock: the deadline is
//     checked + KeyRetention - Lease.
//
// Before this deadline existed, the age was checked when the handler read
// the record and the capture was sent whenever the store calls, the lookup
// and the client's own retries let it: up to the whole handler's deadline
// later, and without bound for a context with none. Bounded by the
// deadline, the margin left (a lease, 30 s to 5 min as the queue's lock
// duration) covers only the delay between a request's last deadline check in
// the client and its arrival: a process stalled for longer than a lease
// exactly there is the one case no margin of the payment step covers.
func (p *Processor) captureDeadline(rec PaymentRecord, checked time.Time, looked bool) time.Time {
	if looked {
		return checked.Add(p.payments.KeyRetention - p.payments.Lease)
	}
	return rec.FirstAttemptAt.Add(p.payments.BlindRetryAge())
}

// errCaptureTooLate is the capture step's failure when its deadline (see
// captureDeadline) passed before the request could be sent: the next
// delivery looks the payment up, or captures afresh.
var errCaptureTooLate = fmt.Errorf("not sent: the key's safe age passed before the capture call (%w)", idempotent.ErrTransient)

// sendCapture calls the gateway for rec under a context that ends at
// deadline (on the Processor's clock), after checking the age once more
// right before the call: the gateway sends no request after the deadline.
func (p *Processor) sendCapture(ctx context.Context, rec PaymentRecord, deadline time.Time) (string, error) {
	left := deadline.Sub(p.now())
	if left <= 0 {
		return "", errCaptureTooLate
	}
	// The deadline is a duration from now, so that it follows the
	// Processor's clock even when that is not time.Now.
	cctx, cancel := context.WithTimeoutCause(ctx, left, errCaptureTooLate)
	defer cancel()
	id, err := p.payments.Gateway.Capture(cctx, rec.IdempotencyKey, Capture{OrderID: rec.OrderID, AmountMinor: rec.AmountMinor, Currency: rec.Currency})
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errCaptureTooLate) {
		err = fmt.Errorf("%w: %w", errCaptureTooLate, err)
	}
	return id, err
}

// keyMayBeForgotten reports whether the payments service may have forgotten
// rec's key by now: its first send is older than the blind-retry age, or
// unknown.
func (p *Processor) keyMayBeForgotten(rec PaymentRecord, now time.Time) bool {
	return rec.FirstAttemptAt == nil || now.Sub(*rec.FirstAttemptAt) >= p.payments.BlindRetryAge()
}

// mayTakeOver reports whether the delivery me may take over rec's claim at
// now, and if not, why.
func mayTakeOver(rec PaymentRecord, me PaymentClaim, now time.Time, lease time.Duration) (bool, string) {
	held := rec.Claim
	switch {
	case rec.ClaimedAt.IsZero():
		return true, "released"
	case held.SequenceNumber != 0 && held.SequenceNumber == me.SequenceNumber && held.MessageID == me.MessageID &&
		held.DeliveryCount < me.DeliveryCount:
		// An earlier delivery of this very copy: Service Bus delivered the
		// copy again only after the holder's lock ended, so the holder
		// cannot settle any more, and the new ETag fences its writes.
		return true, "held by an earlier delivery of this copy"
	case now.Sub(rec.ClaimedAt) >= lease:
		// Another copy, or a later delivery of this one (then this
		// delivery's own lock has ended): the holder's handler may run
		// until its deadline, which is below the lease.
		return true, "lease ended"
	}
	return false, fmt.Sprintf("in progress by %s since %s (a lease of %v)", rec.Owner, rec.ClaimedAt.Format(time.RFC3339Nano), lease)
}

// resolveOldClaim settles a claim (held by this delivery, at etag) whose
// key the payments service may have forgotten, by looking the payment up in
// its ledger. It reports done with the result to return (nil: completed),
// or not done when no charge exists and the capture may go ahead.
func (p *Processor) resolveOldClaim(ctx context.Context, rec PaymentRecord, etag string) (r *idempotent.Result, done bool) {
	orderID := rec.OrderID
	lookup, ok := p.payments.Gateway.(PaymentLookup)
	if !ok {
		p.release(ctx, rec, etag)
		return reconcile(rec, p.payments.KeyRetention, "the gateway cannot look payments up"), true
	}
	found, err := lookup.LookupPayments(ctx, orderID)
	if err != nil {
		p.release(ctx, rec, etag)
		if errors.Is(err, ErrPaymentRejected) {
			return reconcile(rec, p.payments.KeyRetention, "the lookup was rejected: "+err.Error()), true
		}
		return &idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: ReasonPaymentUnavailable, Description: "look the payment up: " + err.Error(), Err: err}, true
	}
	switch {
	case len(found) == 0:
		// The ledger has no charge for the order, so capturing cannot
		// charge twice. A capture an earlier delivery may still have in
		// flight (a delivery whose lock lapsed runs until its own deadline)
		// carries the same key: whichever request reaches the service
		// first makes it remember the key again, and the other is answered
		// from it. Any capture older than that ended with its delivery's
		// handler, long before this claim became old.
		return nil, false
	case len(found) == 1 && found[0].AmountMinor == rec.AmountMinor && found[0].Currency == rec.Currency:
		return p.complete(ctx, rec, etag, found[0].PaymentID), true
	}
	p.release(ctx, rec, etag)
	list := make([]string, len(found))
	for i, f := range found {
		list[i] = fmt.Sprintf("%s (%d %s)", f.PaymentID, f.AmountMinor, f.Currency)
	}
	return reconcile(rec, p.payments.KeyRetention, fmt.Sprintf("the payments service holds %d payments for the order: %s", len(found), strings.Join(list, ", "))), true
}

// complete marks rec (held by this delivery, at etag) completed with
// paymentID, under a context of its own: the charge is done, and recording
// it must not depend on how much of the handler's deadline is left.
func (p *Processor) complete(ctx context.Context, rec PaymentRecord, etag, paymentID string) *idempotent.Result {
	orderID := rec.OrderID
	wctx, cancel := p.ownContext(ctx)
	defer cancel()
	done := p.now().UTC()
	completed := rec
	completed.State, completed.PaymentID, completed.CompletedAt = PaymentCompleted, paymentID, &done
	_, err := p.replaceJSON(wctx, orderID, rec.ID, completed, etag)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, idempotent.ErrPreconditionFailed):
		// Release the claim so that the next delivery of any copy takes it
		// over at once and completes it with the same key; if the release
		// fails too, this copy's next delivery still may.
		p.release(ctx, rec, etag)
		return ptr(storeFailure(orderID, "complete payment record", err))
	}
	// Fenced: another delivery took the claim over. This delivery reports
	// success only if the record is completed, with this payment.
	var now PaymentRecord
	if _, err := readJSON(wctx, p.docs, orderID, rec.ID, &now); err != nil {
		return ptr(storeFailure(orderID, "read payment record after a takeover", err))
	}
	switch {
	case now.State != PaymentCompleted:
		return paymentBusy(orderID, fmt.Sprintf("claim taken over by %s while capturing; it completes the capture with the same key", now.Owner))
	case now.PaymentID != paymentID:
		return reconcile(now, p.payments.KeyRetention, fmt.Sprintf("completed with payment %s, but this delivery captured payment %s", now.PaymentID, paymentID))
	}
	return nil
}

// release gives up this delivery's claim (at etag) so that the next
// delivery of any copy may take it over at once. It is best effort under a
// context of its own: if it fails, this copy's next delivery takes the claim
// over at once anyway, and another copy after the lease. A release after a
// takeover fails with 412 and changes nothing.
func (p *Processor) release(ctx context.Context, rec PaymentRecord, etag string) {
	wctx, cancel := p.ownContext(ctx)
	defer cancel()
	rec.ClaimedAt = time.Time{}
	_, _ = p.replaceJSON(wctx, rec.OrderID, rec.ID, rec, etag)
}

// ownContext returns a context for a write that must happen even if ctx has
// ended, bounded by the write timeout.
func (p *Processor) ownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), p.payments.WriteTimeout)
}

func (p *Processor) replaceJSON(ctx context.Context, pk, id string, v any, etag string) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return p.docs.ReplaceDocument(ctx, pk, idempotent.Document{ID: id, Body: body}, etag)
}

// reconcile is the dead-letter result for a payment whose outcome cannot be
// established safely; it carries the key and the record's state.
func reconcile(rec PaymentRecord, retention time.Duration, why string) *idempotent.Result {
	first := "unknown"
	if rec.FirstAttemptAt != nil {
		first = rec.FirstAttemptAt.Format(time.RFC3339)
	}
	desc := fmt.Sprintf("payment of order %s (%d %s) needs reconciliation: %s; Idempotency-Key %q, record %s %s, first sent %s (the service may have forgotten the key after %v), %d capture calls, epoch %d, last held by %s",
		rec.OrderID, rec.AmountMinor, rec.Currency, why, rec.IdempotencyKey, rec.ID, rec.State, first, retention, rec.Attempts, rec.Epoch, rec.Owner)
	return &idempotent.Result{Outcome: idempotent.Invalid, Key: rec.OrderID, Reason: ReasonPaymentNeedsReconciliation, Description: desc,
		Err: errors.New("payment needs reconciliation: " + why)}
}

func paymentBusy(orderID, why string) *idempotent.Result {
	return &idempotent.Result{Outcome: idempotent.Transient, Key: orderID, Reason: ReasonPaymentInProgress, Description: "payment capture " + why}
}

func ptr(r idempotent.Result) *idempotent.Result { return &r }
