package idempotent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Effect-once: a side effect that cannot join the store's transaction (a
// payment, an e-mail, any call to another service) made once per entity
// and step, through a two-phase record in the entity's partition and a
// key, stable per entity and step, that the downstream deduplicates on.
//
// Use it through a Consumer (see EffectKind and WithEffect), or alone:
//
//	e := idempotent.NewEffect(store, idempotent.EffectOptions{
//		Name: "Receipt", PartitionKeyField: "invoiceId",
//		Downstream: mailer, Lease: lockDuration, Owner: hostname})
//	res, done := e.Run(ctx, m, invoiceID, requestHash, request)
//
// The record moves: absent → in progress (claimed) → completed. A delivery
// claims it (in progress, with its identity, a new epoch and the time)
// before it calls the downstream, and completes it afterwards. Every write
// after the first is conditioned on the ETag the writer read or wrote last,
// so a claim that was taken over is fenced: its holder's later writes fail
// with ErrPreconditionFailed and change nothing.

// Downstream makes a side effect through a service that deduplicates on
// the idempotency key: a repeated key returns the original result and does
// nothing again, for as long as the service remembers the key. entity is
// the entity id (the reference a Finder finds the effect under) and
// request the effect's request, a JSON object (see EffectRecord.Request). Errors
// matching ErrTransient (or a passed deadline) are retried; errors matching
// ErrEffectRejected never succeed. Implementations must be safe for
// concurrent use.
type Downstream interface {
	Do(ctx context.Context, key, entity string, request []byte) (ref string, err error)
}

// Finder is implemented by a Downstream whose service can list the effects
// it recorded for an entity from a ledger which, unlike its idempotency
// keys, it never forgets. Without it, a claim older than the key retention
// cannot be resolved and is dead-lettered with
// ReasonEffectNeedsReconciliation. Errors as Downstream's.
type Finder interface {
	Find(ctx context.Context, entity string, request []byte) ([]Found, error)
}

// Found is one effect a Finder's ledger holds for an entity.
type Found struct {
	Ref string // the downstream's reference, as Do returns it
	// Matches reports that the effect is the one the request asks for
	// (the same amount, the same recipient): only then may it complete
	// the record.
	Matches bool
	Detail  string // what it is, for an operator ("12.50 EUR")
}

// ErrEffectRejected means the downstream refused the effect for good, for
// example because its key was used before for another request.
var ErrEffectRejected = errors.New("effect rejected")

// The effect's reasons, unless EffectOptions.Reasons names them for a
// domain.
const (
	// ReasonEffectInProgress: another delivery holds the claim; retried.
	ReasonEffectInProgress = "EffectInProgress"
	// ReasonEffectUnavailable: the downstream failed; a dependency
	// failure (Result.Dependency).
	ReasonEffectUnavailable = "EffectUnavailable"
	// ReasonEffectRejected: the downstream refused the effect for good.
	ReasonEffectRejected = "EffectRejected"
	// ReasonEffectNeedsReconciliation: the outcome of an earlier call
	// cannot be established safely (the downstream may have forgotten its
	// key); the description carries the key for an operator.
	ReasonEffectNeedsReconciliation = "EffectNeedsReconciliation"
)

// Effect record states.
const (
	EffectInProgress = "in-progress"
	EffectCompleted  = "completed"
)

// Defaults of EffectOptions.
const (
	// DefaultKeyRetention is the key retention an Effect assumes unless
	// told otherwise: 24 hours, the shortest that payment providers
	// commonly keep keys. Assuming less than the service keeps costs
	// lookups; assuming more would be a repeated effect.
	DefaultKeyRetention = 24 * time.Hour
	// DefaultEffectWriteTimeout bounds a record write made with a context
	// of its own (see EffectOptions.WriteTimeout).
	DefaultEffectWriteTimeout = 5 * time.Second
	// ClockSkew is the largest difference between two workers' clocks an
	// Effect allows for: a claim's times are stamped by one worker and
	// compared by another.
	ClockSkew = 5 * time.Minute
)

// EffectReasons names the results of an Effect for a domain
// ("ReceiptInProgress"); an empty field keeps the core's reason.
type EffectReasons struct {
	InProgress, Unavailable, Rejected, NeedsReconciliation string
}

// EffectOptions configures an Effect.
type EffectOptions struct {
	// Name names the step ("Receipt"): the record's id is Name + ":" +
	// the entity id, and the descriptions say it. Required.
	Name string
	// PartitionKeyField is the record's JSON field that holds the
	// partition key value (the entity id), as the container's partition
	// key path names it ("invoiceId" or "/invoiceId", as for the inbox's
	// InboxConfig.PartitionKeyField). Required.
	PartitionKeyField string
	// Type is the record's "type" field; empty means "effect".
	Type string
	// RefField is the record's JSON field that holds the downstream's
	// reference once completed; empty means "ref".
	RefField string
	// Key returns the idempotency key passed downstream for an entity. It
	// must depend on the entity id alone, so that every delivery and every
	// worker passes the same key. Nil means Name + ":" + entity.
	Key func(entity string) string
	// Downstream makes the effect. If it also implements Finder, claims
	// older than the key retention are resolved by a lookup. Required.
	Downstream Downstream
	// Lease is how long a claim held by another copy of the message (a
	// different SequenceNumber: a producer retry, a resubmission) protects
	// a call in progress: the queue's lock duration, since a handler never
	// runs longer than its message timeout, which is below it. A claim of
	// an earlier delivery of the same copy needs no lease: its lock has
	// ended, and it is taken over at once. Required.
	Lease time.Duration
	// Owner names this worker in the claims.
	Owner string
	// KeyRetention is how long the downstream remembers an idempotency key
	// after its effect: at most the service's real retention, never more.
	// A claim whose key was first sent longer ago than KeyRetention minus
	// (Lease + ClockSkew) is never called blindly: the effect is looked up
	// instead. Zero means DefaultKeyRetention. Check it at start against
	// the redelivery horizon (RedeliveryHorizon.CheckRetentionOf): below
	// it, late redeliveries need a lookup, and a downstream without one
	// dead-letters them for reconciliation.
	KeyRetention time.Duration
	// WriteTimeout bounds every record write made with a context of its
	// own, after the handler's context may have ended: the completed mark
	// after a call (with its re-read after a 412) and the release of a
	// claim. A run may return up to two WriteTimeouts after the handler's
	// deadline, so keep it well below the lock duration. Zero means
	// DefaultEffectWriteTimeout, at most a tenth of Lease.
	WriteTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Reasons names the results' reasons for a domain.
	Reasons EffectReasons
}

// withDefaults returns o with its zero fields defaulted.
func (o EffectOptions) withDefaults() EffectOptions {
	o.PartitionKeyField = strings.TrimPrefix(o.PartitionKeyField, "/")
	if o.KeyRetention == 0 {
		o.KeyRetention = DefaultKeyRetention
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultEffectWriteTimeout
		if o.Lease > 0 {
			o.WriteTimeout = min(o.WriteTimeout, o.Lease/10)
		}
	}
	o.Type = nonEmpty(o.Type, "effect")
	o.RefField = nonEmpty(o.RefField, "ref")
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Key == nil {
		name := o.Name
		o.Key = func(entity string) string { return name + ":" + entity }
	}
	o.Reasons.InProgress = nonEmpty(o.Reasons.InProgress, ReasonEffectInProgress)
	o.Reasons.Unavailable = nonEmpty(o.Reasons.Unavailable, ReasonEffectUnavailable)
	o.Reasons.Rejected = nonEmpty(o.Reasons.Rejected, ReasonEffectRejected)
	o.Reasons.NeedsReconciliation = nonEmpty(o.Reasons.NeedsReconciliation, ReasonEffectNeedsReconciliation)
	return o
}

// Validate reports every setting of o that an Effect cannot work with,
// after defaults.
func (o EffectOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Name == "" {
		errs = append(errs, errors.New("effect: no name"))
	}
	if o.PartitionKeyField == "" || strings.ContainsAny(o.PartitionKeyField, `/"\`) {
		errs = append(errs, fmt.Errorf("effect %s: partition key field %q must be a top-level field name (a partition key path such as /invoiceId)", o.Name, o.PartitionKeyField))
	} else if recordFields[o.PartitionKeyField] || o.PartitionKeyField == o.RefField {
		errs = append(errs, fmt.Errorf("effect %s: partition key field %q is a field of the record itself", o.Name, o.PartitionKeyField))
	}
	if recordFields[o.RefField] {
		errs = append(errs, fmt.Errorf("effect %s: reference field %q is a field of the record itself", o.Name, o.RefField))
	}
	if o.Downstream == nil {
		errs = append(errs, fmt.Errorf("effect %s: no downstream", o.Name))
	}
	if o.Lease <= 0 {
		errs = append(errs, fmt.Errorf("effect %s: lease %v must be positive (the queue's lock duration)", o.Name, o.Lease))
	}
	if o.KeyRetention < 0 {
		errs = append(errs, fmt.Errorf("effect %s: key retention %v must not be negative", o.Name, o.KeyRetention))
	}
	if o.WriteTimeout <= 0 || o.Lease > 0 && o.WriteTimeout >= o.Lease {
		errs = append(errs, fmt.Errorf("effect %s: write timeout %v must be positive and below the lease %v", o.Name, o.WriteTimeout, o.Lease))
	}
	return errors.Join(errs...)
}

// BlindRetryAge returns how long after a key was first sent a call may
// still be repeated with it without a lookup: KeyRetention minus the lease
// (the longest a call of a delivery can still reach the service after the
// delivery decided to make it) and minus ClockSkew (the first send and the
// retry are stamped by different workers). The service's retention counts
// from the effect, which came after the first send, so a retry younger than
// this finds the key remembered. Zero or less: every retry of a claim is
// looked up.
func (o EffectOptions) BlindRetryAge() time.Duration {
	o = o.withDefaults()
	return o.KeyRetention - o.Lease - ClockSkew
}

// EffectClaim names the delivery that holds a claim. Service Bus hands a
// copy of a message (one SequenceNumber) to a new receiver only after the
// previous delivery's lock ended, with a higher DeliveryCount, so a claim
// held by an earlier delivery of the same copy belongs to a delivery that
// can no longer settle: it may be taken over at once.
type EffectClaim struct {
	Worker         string `json:"worker"`         // EffectOptions.Owner of the claiming worker
	MessageID      string `json:"messageId"`      // the message's MessageId
	SequenceNumber int64  `json:"sequenceNumber"` // the copy's broker sequence number; 0: unknown (or above 2^53-1, see claimSequence)
	DeliveryCount  uint32 `json:"deliveryCount"`  // the delivery of that copy
}

// String names the claim in logs and in EffectRecord.Owner.
func (c EffectClaim) String() string {
	return fmt.Sprintf("%s/%s/seq %d/delivery %d", c.Worker, c.MessageID, c.SequenceNumber, c.DeliveryCount)
}

// maxSafeInteger is the largest integer a float64 holds exactly: 2^53-1.
const maxSafeInteger = 1<<53 - 1

// claimSequence returns the sequence number a claim records for a copy
// with broker sequence number seq: seq itself, or 0 ("unknown") above
// 2^53-1. Service Bus puts a partition's id in the top 16 bits of a
// partitioned entity's sequence numbers, so they may exceed 2^53-1, and a
// store that keeps numbers as float64 would round two copies' numbers to
// one, taking a claim of another copy for one of this copy's earlier
// deliveries. An unknown sequence number is never this copy's: its claim
// is taken over only after the lease.
func claimSequence(seq int64) int64 {
	if seq > maxSafeInteger {
		return 0
	}
	return seq
}

// Effect makes one side effect per entity once, for any number of
// deliveries, concurrent or not, on any number of workers. It is safe for
// concurrent use: deliveries coordinate only through the record's ETags.
type Effect struct {
	o    EffectOptions
	docs DocumentStore
	err  error // from Validate, or a missing store: every run fails with it
}

// NewEffect returns the Effect of o over store. Invalid options (see
// EffectOptions.Validate) make every run a retry that names the problem;
// validate them at start.
func NewEffect(store DocumentStore, o EffectOptions) *Effect {
	err := o.Validate()
	if store == nil {
		err = errors.Join(err, fmt.Errorf("effect %s: no document store", o.Name))
	}
	return &Effect{o: o.withDefaults(), docs: store, err: err}
}

// Err returns what makes the Effect unable to run, or nil.
func (e *Effect) Err() error { return e.err }

// Options returns the Effect's options, defaults filled in.
func (e *Effect) Options() EffectOptions { return e.o }

// RecordID returns the id of entity's record: Name + ":" + entity.
func (e *Effect) RecordID(entity string) string { return e.o.Name + ":" + entity }

// Key returns the idempotency key of entity's effect (EffectOptions.Key).
func (e *Effect) Key(entity string) string { return e.o.Key(entity) }

// claimOf returns the claim of delivery m.
func (e *Effect) claimOf(m Message) EffectClaim {
	return EffectClaim{Worker: e.o.Owner, MessageID: m.ID, SequenceNumber: claimSequence(m.SequenceNumber), DeliveryCount: m.DeliveryCount}
}

// Claim returns the first claim of entity's record by delivery m (epoch 1,
// first sent now), for the batch that creates the entity: written there,
// it costs the effect no write of its own before the call. hash is the
// entity's request hash, recorded so that a read of the record alone tells
// a duplicate from an id reused; request is the effect's request, a JSON
// object whose fields the record stores beside its own.
func (e *Effect) Claim(m Message, entity, hash string, request []byte) (EffectRecord, Document, error) {
	now := e.o.Now().UTC()
	me := e.claimOf(m)
	rec := EffectRecord{ID: e.RecordID(entity), PartitionKey: entity, Type: e.o.Type, State: EffectInProgress,
		IdempotencyKey: e.Key(entity), RequestHash: hash, Request: request,
		Owner: me.String(), Claim: me, Epoch: 1, ClaimedAt: now, FirstAttemptAt: &now, Attempts: 1}
	body, err := e.encode(rec)
	return rec, Document{ID: rec.ID, Body: body}, err
}

// Read returns entity's record and its ETag, or an error matching
// ErrNotFound; a record that cannot be decoded matches ErrUnreadable.
func (e *Effect) Read(ctx context.Context, entity string) (EffectRecord, string, error) {
	id := e.RecordID(entity)
	body, etag, err := e.docs.ReadDocument(ctx, entity, id)
	if err != nil {
		return EffectRecord{}, "", err
	}
	rec, err := e.decode(entity, id, body)
	return rec, etag, err
}

// Run makes sure entity's effect happened once: it claims the record
// (creates it, or takes its claim over), calls the downstream and marks
// the record completed. It reports done when the effect is completed (now
// or before), else the Result to settle with. res.Resumed reports that
// this delivery took over a claim another delivery held.
//
// On a redelivery: completed → nothing to do. In progress → the claim is
// taken over (a new epoch, ETag-conditioned) if it was released, if it is
// held by an earlier delivery of this very copy of the message (whose lock
// has ended, since Service Bus redelivers a copy only then), or if it is
// held by another copy and its lease (the lock duration) has run out;
// otherwise another delivery may be calling, and this one retries later.
//
// After a takeover the key is sent again only while the downstream
// certainly still remembers it (BlindRetryAge after its first send); it then
// answers with the original result if an earlier call did act. An older
// claim's outcome is unknown: the effect is looked up in the service's
// ledger (Finder) and the record completed with what it finds; what cannot
// be resolved is dead-lettered with ReasonEffectNeedsReconciliation and the
// key, never called blindly.
//
// Writes that must happen after the handler's context may have ended (the
// completed mark, the release of a claim) run under a context of their own,
// bounded by EffectOptions.WriteTimeout.
func (e *Effect) Run(ctx context.Context, m Message, entity, hash string, request []byte) (res Result, done bool) {
	r, took := e.run(ctx, m, entity, hash, request)
	return settle(entity, r, took)
}

// Resume goes on from rec, entity's record read at etag (see Read): done
// if it is completed, else its claim is taken over if it may be, and the
// effect made, as Run does.
func (e *Effect) Resume(ctx context.Context, m Message, rec EffectRecord, etag string) (res Result, done bool) {
	if e.err != nil {
		return e.misconfigured(rec.PartitionKey), false
	}
	r, took := e.resume(ctx, m, rec, etag, e.o.Now().UTC())
	return settle(rec.PartitionKey, r, took)
}

// Claimed makes the effect of rec, a claim this delivery wrote at etag (the
// ETag its batch reported for it; empty if the store reports none), and
// marks it completed, as Run does.
func (e *Effect) Claimed(ctx context.Context, rec EffectRecord, etag string) (res Result, done bool) {
	if e.err != nil {
		return e.misconfigured(rec.PartitionKey), false
	}
	return settle(rec.PartitionKey, e.claimed(ctx, rec, etag), false)
}

func settle(entity string, r *Result, took bool) (Result, bool) {
	if r != nil {
		r.Resumed = took
		return *r, false
	}
	return Result{Key: entity, Resumed: took}, true
}

func (e *Effect) misconfigured(entity string) Result {
	return Result{Outcome: Transient, Key: entity, Reason: e.o.Reasons.Unavailable, Dependency: true,
		Description: e.o.Name + " step misconfigured: " + e.err.Error(), Err: e.err}
}

func (e *Effect) run(ctx context.Context, m Message, entity, hash string, request []byte) (r *Result, tookOver bool) {
	if e.err != nil {
		return ptr(e.misconfigured(entity)), false
	}
	now := e.o.Now().UTC()
	me := e.claimOf(m)

	// 1. Claim the record: create it, or take its claim over.
	rec, etag, err := e.Read(ctx, entity)
	switch {
	case errors.Is(err, ErrNotFound):
		// The entity was accepted without its claim (by a worker that did
		// not batch it, or without the effect step): create it on its own.
		rec, doc, err := e.Claim(m, entity, hash, request)
		if err != nil {
			return ptr(storeFailure(entity, "encode "+e.o.Name+" record", err)), false
		}
		_, err = e.docs.CreateBatch(ctx, entity, []Document{doc})
		if errors.Is(err, ErrAlreadyExists) {
			return e.busy(entity, "claimed by another delivery just now"), false
		}
		if err != nil {
			return ptr(storeFailure(entity, "create "+e.o.Name+" record", err)), false
		}
		// The create answers no ETag: read it, and check that the record
		// read is still the one created, since the claim may have been
		// taken over in between (by this copy's next delivery, if this
		// one's lock lapsed).
		got, etag, err := e.Read(ctx, entity)
		if err != nil {
			// The claim is ours but its ETag unknown: it is taken over at
			// once by this copy's next delivery, or after the lease.
			return ptr(storeFailure(entity, "read "+e.o.Name+" record", err)), false
		}
		switch {
		case got.State == EffectCompleted:
			return nil, false
		case got.Epoch != rec.Epoch || got.Claim != me:
			return e.busy(entity, fmt.Sprintf("claim taken over by %s right after its creation", got.Owner)), false
		}
		return e.claimed(ctx, rec, etag), false
	case err != nil:
		return ptr(storeFailure(entity, "read "+e.o.Name+" record", err)), false
	}
	return e.resume(ctx, m, rec, etag, now)
}

// resume goes on from rec, the record read at etag: done if it is
// completed, else its claim is taken over if it may be, and the effect
// made. tookOver reports that the claim was held by another delivery (not
// released) and this one's takeover was written.
func (e *Effect) resume(ctx context.Context, m Message, rec EffectRecord, etag string, now time.Time) (r *Result, tookOver bool) {
	entity := rec.PartitionKey
	if rec.State == EffectCompleted {
		return nil, false
	}
	me := e.claimOf(m)
	ok, why := mayTakeOver(rec, me, now, e.o.Lease)
	if !ok {
		// Another copy holds the claim until its lease ends: this one can
		// only take it over then (its holder may be stuck behind an outage
		// of the store). RetryAfter lets a worker with a Scheduler wait in
		// a scheduled copy instead of spending deliveries meanwhile.
		r := e.busy(entity, why)
		r.RetryAfter = max(rec.ClaimedAt.Add(e.o.Lease).Sub(now), time.Second)
		return r, false
	}
	held := !rec.ClaimedAt.IsZero() // else released by its holder: claimed anew
	rec.Owner, rec.Claim, rec.Epoch, rec.ClaimedAt, rec.Attempts = me.String(), me, rec.Epoch+1, now, rec.Attempts+1
	etag, err := e.replace(ctx, rec, etag)
	if err != nil {
		if errors.Is(err, ErrPreconditionFailed) {
			return e.busy(entity, "claimed by another delivery just now"), false
		}
		return ptr(storeFailure(entity, "take over "+e.o.Name+" record", err)), false
	}
	return e.claimed(ctx, rec, etag), held
}

// claimed makes the effect of rec, whose claim this delivery holds at
// etag, and marks the record completed. A store that reports no ETags
// (cosmium) leaves etag empty: the replaces are then unconditional, and no
// claim is fenced.
//
// The key's age is measured here, after the store calls that claimed the
// record (they may take as long as the handler's context allows), and every
// request of the call is sent before a deadline that keeps the key
// remembered: see callDeadline. The claim's time is not used for it.
func (e *Effect) claimed(ctx context.Context, rec EffectRecord, etag string) *Result {
	entity := rec.PartitionKey
	// From here on the claim is this delivery's, as long as its ETag is.

	// 2. A claim whose key the service may have forgotten is resolved by a
	// lookup, never by a blind call.
	checked := e.o.Now().UTC()
	looked := e.keyMayBeForgotten(rec, checked)
	if looked {
		if r, done := e.resolveOldClaim(ctx, rec, etag); done {
			return r
		}
	}

	// 3. Call the downstream with the entity's key, before the deadline
	// that keeps the key remembered.
	ref, err := e.send(ctx, rec, e.callDeadline(rec, checked, looked))
	if err != nil {
		// Release the claim so that any redelivery retries at once; if the
		// release fails, this copy's next delivery takes it over at once
		// and another copy after the lease.
		e.release(ctx, rec, etag)
		if errors.Is(err, ErrEffectRejected) {
			return &Result{Outcome: Invalid, Key: entity, Reason: e.o.Reasons.Rejected, Description: err.Error(), Err: err}
		}
		return &Result{Outcome: Transient, Key: entity, Reason: e.o.Reasons.Unavailable, Dependency: true,
			Description: e.o.Name + ": " + err.Error(), Err: err}
	}

	// 4. Mark it completed.
	return e.complete(ctx, rec, etag, ref)
}

// callDeadline returns the time (on the Effect's clock) by which every
// request of rec's call must be sent, so that it reaches the downstream
// while the service still remembers the key of any earlier effect.
//
// The argument: a second effect needs a request with the key to reach the
// service more than KeyRetention after an effect with it. Every request is
// sent after a point J at which no effect with the key existed yet, and
// before J + KeyRetention - Lease, minus ClockSkew when J was stamped by
// another worker's clock; any effect came after J, so the request reaches
// the service less than KeyRetention after it as long as the request
// arrives within a lease of being sent. J is:
//
//   - without a lookup, the key's first send (rec.FirstAttemptAt, stamped by
//     the worker that first claimed the record): the deadline is
//     FirstAttemptAt + BlindRetryAge, which the age check made at checked
//     has shown to lie ahead;
//   - after a lookup that found no effect, checked, taken before the lookup
//     started on this worker's clock: the deadline is
//     checked + KeyRetention - Lease.
//
// Without this deadline the age would be checked when the handler read the
// record and the call sent whenever the store calls, the lookup and the
// client's own retries let it: up to the whole handler's deadline later,
// and without bound for a context with none. Bounded by the deadline, the
// margin left (a lease, 30 s to 5 min as the queue's lock duration) covers
// only the delay between a request's last deadline check in the client and
// its arrival: a process stalled for longer than a lease exactly there is
// the one case no margin of the effect step covers.
func (e *Effect) callDeadline(rec EffectRecord, checked time.Time, looked bool) time.Time {
	if looked {
		return checked.Add(e.o.KeyRetention - e.o.Lease)
	}
	return rec.FirstAttemptAt.Add(e.o.BlindRetryAge())
}

// errCallTooLate is the call's failure when its deadline (see
// callDeadline) passed before the request could be sent: the next delivery
// looks the effect up, or calls afresh.
var errCallTooLate = fmt.Errorf("not sent: the key's safe age passed before the call (%w)", ErrTransient)

// send calls the downstream for rec under a context that ends at deadline
// (on the Effect's clock), after checking the age once more right before
// the call: the downstream sends no request after the deadline.
func (e *Effect) send(ctx context.Context, rec EffectRecord, deadline time.Time) (string, error) {
	left := deadline.Sub(e.o.Now())
	if left <= 0 {
		return "", errCallTooLate
	}
	// The deadline is a duration from now, so that it follows the
	// Effect's clock even when that is not time.Now.
	cctx, cancel := context.WithTimeoutCause(ctx, left, errCallTooLate)
	defer cancel()
	ref, err := e.o.Downstream.Do(cctx, rec.IdempotencyKey, rec.PartitionKey, rec.Request)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errCallTooLate) {
		err = fmt.Errorf("%w: %w", errCallTooLate, err)
	}
	return ref, err
}

// keyMayBeForgotten reports whether the downstream may have forgotten rec's
// key by now: its first send is older than the blind-retry age, or unknown.
func (e *Effect) keyMayBeForgotten(rec EffectRecord, now time.Time) bool {
	return rec.FirstAttemptAt == nil || now.Sub(*rec.FirstAttemptAt) >= e.o.BlindRetryAge()
}

// mayTakeOver reports whether the delivery me may take over rec's claim at
// now, and if not, why.
func mayTakeOver(rec EffectRecord, me EffectClaim, now time.Time, lease time.Duration) (bool, string) {
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
// key the downstream may have forgotten, by looking the effect up in its
// ledger. It reports done with the result to return (nil: completed), or
// not done when no effect exists and the call may go ahead.
func (e *Effect) resolveOldClaim(ctx context.Context, rec EffectRecord, etag string) (r *Result, done bool) {
	entity := rec.PartitionKey
	finder, ok := e.o.Downstream.(Finder)
	if !ok {
		e.release(ctx, rec, etag)
		return e.reconcile(rec, "the downstream cannot look effects up"), true
	}
	found, err := finder.Find(ctx, entity, rec.Request)
	if err != nil {
		e.release(ctx, rec, etag)
		if errors.Is(err, ErrEffectRejected) {
			return e.reconcile(rec, "the lookup was rejected: "+err.Error()), true
		}
		return &Result{Outcome: Transient, Key: entity, Reason: e.o.Reasons.Unavailable, Dependency: true,
			Description: "look the " + e.o.Name + " up: " + err.Error(), Err: err}, true
	}
	switch {
	case len(found) == 0:
		// The ledger has no effect for the entity, so calling cannot act
		// twice. A call an earlier delivery may still have in flight (a
		// delivery whose lock lapsed runs until its own deadline) carries
		// the same key: whichever request reaches the service first makes
		// it remember the key again, and the other is answered from it.
		// Any call older than that ended with its delivery's handler, long
		// before this claim became old.
		return nil, false
	case len(found) == 1 && found[0].Matches:
		return e.complete(ctx, rec, etag, found[0].Ref), true
	}
	e.release(ctx, rec, etag)
	list := make([]string, len(found))
	for i, f := range found {
		list[i] = f.Ref
		if f.Detail != "" {
			list[i] += " (" + f.Detail + ")"
		}
	}
	return e.reconcile(rec, fmt.Sprintf("the downstream holds %d effects for the entity: %s", len(found), strings.Join(list, ", "))), true
}

// complete marks rec (held by this delivery, at etag) completed with ref,
// under a context of its own: the effect is done, and recording it must not
// depend on how much of the handler's deadline is left.
func (e *Effect) complete(ctx context.Context, rec EffectRecord, etag, ref string) *Result {
	entity := rec.PartitionKey
	wctx, cancel := e.ownContext(ctx)
	defer cancel()
	done := e.o.Now().UTC()
	completed := rec
	completed.State, completed.Ref, completed.CompletedAt = EffectCompleted, ref, &done
	_, err := e.replace(wctx, completed, etag)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, ErrPreconditionFailed):
		// Release the claim so that the next delivery of any copy takes it
		// over at once and completes it with the same key; if the release
		// fails too, this copy's next delivery still may.
		e.release(ctx, rec, etag)
		return ptr(storeFailure(entity, "complete "+e.o.Name+" record", err))
	}
	// Fenced: another delivery took the claim over. This delivery reports
	// success only if the record is completed, with this effect.
	now, _, err := e.Read(wctx, entity)
	if err != nil {
		return ptr(storeFailure(entity, "read "+e.o.Name+" record after a takeover", err))
	}
	switch {
	case now.State != EffectCompleted:
		return e.busy(entity, fmt.Sprintf("claim taken over by %s while calling; it completes the call with the same key", now.Owner))
	case now.Ref != ref:
		return e.reconcile(now, fmt.Sprintf("completed with %s, but this delivery's call returned %s", now.Ref, ref))
	}
	return nil
}

// release gives up this delivery's claim (at etag) so that the next
// delivery of any copy may take it over at once. It is best effort under a
// context of its own: if it fails, this copy's next delivery takes the claim
// over at once anyway, and another copy after the lease. A release after a
// takeover fails with ErrPreconditionFailed and changes nothing.
func (e *Effect) release(ctx context.Context, rec EffectRecord, etag string) {
	wctx, cancel := e.ownContext(ctx)
	defer cancel()
	rec.ClaimedAt = time.Time{}
	_, _ = e.replace(wctx, rec, etag)
}

// ownContext returns a context for a write that must happen even if ctx has
// ended, bounded by the write timeout.
func (e *Effect) ownContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.o.WriteTimeout)
}

func (e *Effect) replace(ctx context.Context, rec EffectRecord, etag string) (string, error) {
	body, err := e.encode(rec)
	if err != nil {
		return "", err
	}
	return e.docs.ReplaceDocument(ctx, rec.PartitionKey, Document{ID: rec.ID, Body: body}, etag)
}

// reconcile is the dead-letter result for an effect whose outcome cannot be
// established safely; it carries the key and the record's state.
func (e *Effect) reconcile(rec EffectRecord, why string) *Result {
	first := "unknown"
	if rec.FirstAttemptAt != nil {
		first = rec.FirstAttemptAt.Format(time.RFC3339)
	}
	desc := fmt.Sprintf("%s of %s %s needs reconciliation: %s; Idempotency-Key %q, record %s %s, first sent %s (the downstream may have forgotten the key after %v), %d calls, epoch %d, last held by %s",
		e.o.Name, rec.PartitionKey, rec.Request, why, rec.IdempotencyKey, rec.ID, rec.State, first, e.o.KeyRetention, rec.Attempts, rec.Epoch, rec.Owner)
	return &Result{Outcome: Invalid, Key: rec.PartitionKey, Reason: e.o.Reasons.NeedsReconciliation, Description: desc,
		Err: errors.New(e.o.Name + " needs reconciliation: " + why)}
}

func (e *Effect) busy(entity, why string) *Result {
	return &Result{Outcome: Transient, Key: entity, Reason: e.o.Reasons.InProgress, Description: e.o.Name + " " + why}
}

func ptr(r Result) *Result { return &r }
