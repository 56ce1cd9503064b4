package idempotent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Kind is what a message type tells the pattern. Implementations must be
// safe for concurrent use; the project's are stateless.
type Kind[T any] interface {
	// Decode decodes and validates a message body. An error makes the
	// message Invalid: it is dead-lettered at once, never retried.
	Decode(body []byte) (T, error)
	// ID returns the entity id of v: the id of its marker document and
	// the partition key value of everything it writes. The message's
	// MessageId must equal it.
	ID(v T) string
	// RequestHash returns a hash of v's immutable business fields in a
	// canonical encoding: field order, white space and metadata such as a
	// send time must not change it.
	RequestHash(v T) string
	// Documents returns the documents an accepted v writes, in one
	// transactional batch under partition ID(v). The first is the marker:
	// its id is ID(v) and its JSON carries hash in a "requestHash" field
	// (see MarkerHash). The others (an outbox event, lines) share its fate.
	Documents(m Message, v T, hash string) ([]Document, error)
}

// ReasonNamer is implemented by a Kind that names the dead-letter reason of
// an id reused for other content for its domain ("InvoiceIdReused"); other
// Kinds get ReasonIDReused.
type ReasonNamer interface{ ReusedReason() string }

// MissingNamer is implemented by a Kind that names the dead-letter reason
// of a marker missing while a companion of its batch exists for its domain
// ("InvoiceDocumentMissing"); other Kinds get ReasonMarkerMissing.
type MissingNamer interface{ MissingReason() string }

// EffectKind is implemented by a Kind whose accepted messages have a side
// effect (see Effect and WithEffect): EffectRequest returns the effect's
// request for v, a JSON object, or false when v has none (an invoice with
// nothing to pay). A Kind that does not implement it, given an Effect, has
// the effect for every message, with the request {}.
type EffectKind[T any] interface {
	EffectRequest(v T) (request []byte, ok bool)
}

// EntityError is a decode error that names the entity its message is
// about (its id parsed, other content did not), so that the Invalid result
// names it too. Its text is Err's.
type EntityError struct {
	Entity string
	Err    error
}

func (e *EntityError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *EntityError) Unwrap() error { return e.Err }

// ReasonMarkerMissing: an entity's create conflicted on a companion of its
// batch, but the marker document is gone: it was deleted after the entity
// was accepted. The Consumer decides it on a redelivery only (a first
// delivery is retried), since reads from a replica behind the create can
// show the same: a store without session tokens (see Store). An operator must restore it (or delete the companion)
// before the message is resubmitted. A Kind may name it for its domain
// (see MissingNamer).
const ReasonMarkerMissing = "MarkerMissing"

// Consumer is the idempotent consumer of one message type: it turns one
// delivery into exactly one Result. It is safe for concurrent use: all
// coordination between concurrent deliveries of one message happens in the
// store's atomic create and, for an effect, its record's conditional
// writes; the fact cache holds only what the store confirmed.
type Consumer[T any] struct {
	kind    Kind[T]
	store   Store
	lookup  Lookup
	policy  ReadFirstPolicy
	facts   *FactCache
	effect  *Effect
	request func(T) ([]byte, bool)
	reused  string
	missing string
}

// Option configures a Consumer.
type Option func(*options)

type options struct {
	lookup func(Lookup) Lookup
	policy ReadFirstPolicy
	facts  *FactCache
	effect *Effect
}

// WithLookup wraps the Consumer's lookup of stored hashes, for example in a
// FactCache: wrap receives the lookup that reads the store (MarkerLookup).
// A Kind whose marker needs more than its "requestHash" field read (a
// type check) returns a Lookup of its own.
func WithLookup(wrap func(Lookup) Lookup) Option { return func(o *options) { o.lookup = wrap } }

// WithReadFirst sets the policy that decides whether a delivery reads
// before it creates (see ReadFirstPolicy); the default reads first on
// redeliveries only.
func WithReadFirst(p ReadFirstPolicy) Option { return func(o *options) { o.policy = p } }

// WithFactCache makes the Consumer answer from c before anything else,
// whatever the read-first policy says: an entity whose hash c knows is a
// Duplicate or a Mismatch without a round trip, once its effect (if any)
// is known done. c learns every hash the store confirms and every effect
// completed. Nil: no cache.
func WithFactCache(c *FactCache) Option { return func(o *options) { o.facts = c } }

// WithEffect makes the Consumer run e for every accepted message (see
// EffectKind): its first claim joins the create's batch, and a duplicate
// whose effect is not known done resumes it, so that the effect happens
// once even when every delivery returns Duplicate (a create that committed
// but reported a failure). e must write to the Consumer's store.
func WithEffect(e *Effect) Option { return func(o *options) { o.effect = e } }

// NewConsumer returns the Consumer of kind's messages over store.
func NewConsumer[T any](kind Kind[T], store Store, opts ...Option) *Consumer[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c := &Consumer[T]{kind: kind, store: store, lookup: MarkerLookup(store), policy: o.policy, facts: o.facts,
		effect: o.effect, reused: ReasonIDReused, missing: ReasonMarkerMissing}
	if o.lookup != nil {
		c.lookup = o.lookup(c.lookup)
	}
	if c.policy == nil {
		c.policy = RedeliveriesFirst{}
	}
	if n, ok := kind.(ReasonNamer); ok {
		c.reused = n.ReusedReason()
	}
	if n, ok := kind.(MissingNamer); ok {
		c.missing = n.MissingReason()
	}
	c.request = func(T) ([]byte, bool) { return []byte("{}"), true }
	if k, ok := kind.(EffectKind[T]); ok {
		c.request = k.EffectRequest
	}
	return c
}

// delivery is what Process knows of the delivery it decides.
type delivery struct {
	m         Message
	id, hash  string
	request   []byte // the effect's request; nil: no effect
	batched   bool   // the effect's claim joins the create's batch
	companion string // the id of a companion of the marker in the create's batch, once built
}

// Process decides what to do with one delivery of m: decode, look up,
// create, compare, and with an effect (WithEffect) make it once. The
// create is the arbiter of every race: a lookup that finds nothing leads
// to the create, and a create that conflicts is decided by a lookup, so
// the fact cache and the read-first policy change what a delivery costs,
// never what it decides.
//
// The round trips to the store: a new entity costs one (the batch), with
// an effect two (the batch with the claim, the completed mark) and the
// downstream call. A duplicate costs one read (with an effect, of the
// effect record, which tells both the request hash and whether the effect
// is done), or none when the fact cache knows it.
func (c *Consumer[T]) Process(ctx context.Context, m Message) Result {
	// 1. Decode and validate. A message that fails here can never succeed.
	v, err := c.kind.Decode(m.Body)
	if err != nil {
		var ee *EntityError
		errors.As(err, &ee)
		key := ""
		if ee != nil {
			key = ee.Entity
		}
		return Result{Outcome: Invalid, Key: key, Reason: ReasonInvalidMessage, Description: err.Error(), Err: err}
	}
	d := delivery{m: m, id: c.kind.ID(v), hash: c.kind.RequestHash(v)}
	if d.id != m.ID {
		err := fmt.Errorf("the entity id %q does not equal the MessageId %q", d.id, m.ID)
		return Result{Outcome: Invalid, Key: d.id, Reason: ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	if c.effect != nil {
		if req, ok := c.request(v); ok {
			d.request, d.batched = req, c.effect.Err() == nil
		}
	}
	// 2. Look up: the facts the store confirmed earlier, then, when a
	// duplicate is likely (a redelivery), what the store holds.
	if c.facts != nil {
		if f, ok := c.facts.Get(d.id); ok {
			return c.fromFact(ctx, d, f)
		}
	}
	if c.policy.ReadFirst(m) {
		res, found := c.fromStore(ctx, d, false)
		if found {
			if foundStored(res) {
				c.policy.Observe(m, true)
			}
			return res
		}
	}
	// 3. Create the marker, its companions and the effect's first claim
	// atomically: the duplicate check and the write in one step.
	docs, err := c.kind.Documents(m, v, d.hash)
	if err != nil {
		return Result{Outcome: Invalid, Key: d.id, Reason: ReasonInvalidMessage, Description: "build the documents: " + err.Error(), Err: err}
	}
	if len(docs) > 1 {
		d.companion = docs[1].ID
	}
	var claim EffectRecord
	if d.batched {
		var doc Document
		if claim, doc, err = c.effect.Claim(m, d.id, d.hash, d.request); err != nil {
			return Result{Outcome: Invalid, Key: d.id, Reason: ReasonInvalidMessage, Description: "build the effect's claim: " + err.Error(), Err: err}
		}
		docs = append(docs, doc)
	}
	etags, err := c.store.CreateBatch(ctx, d.id, docs)
	switch {
	case err == nil:
	case errors.Is(err, ErrAlreadyExists):
		c.policy.Observe(m, true)
		// 4. Compare: the same content is a duplicate (whose effect is
		// made if it is not done), other content an id reused.
		res, _ := c.fromStore(ctx, d, true)
		return res
	default:
		return storeFailure(d.id, "create", err)
	}
	c.policy.Observe(m, false)
	c.learn(d.id, d.hash, false)
	// 5. The side effect outside the transaction, on the claim the batch
	// wrote, at the ETag the batch reported.
	switch {
	case d.batched:
		etag := ""
		if len(etags) == len(docs) {
			etag = etags[len(docs)-1]
		}
		if r, done := c.effect.Claimed(ctx, claim, etag); !done {
			return r
		}
		c.learnDone(d.id, d.hash)
	case d.request != nil: // the effect cannot run: say why
		if r, done := c.effect.Run(ctx, m, d.id, d.hash, d.request); !done {
			return r
		}
	}
	return Result{Outcome: Created, Key: d.id}
}

// fromFact decides delivery d from f, what the fact cache knows of its
// entity: a Mismatch or a Duplicate without a round trip, or, when the
// effect is not known done, the effect without the marker read.
func (c *Consumer[T]) fromFact(ctx context.Context, d delivery, f Fact) Result {
	if !f.Matches(d.hash) {
		return Result{Outcome: Mismatch, Key: d.id, Reason: c.reused,
			Description: fmt.Sprintf("%s exists with request hash %s (confirmed by the store earlier and remembered by this worker; the store was not read again); this message has request hash %s",
				d.id, f.Hash(), d.hash)}
	}
	res := Result{Outcome: Duplicate, Key: d.id, Description: "accepted earlier (confirmed by the store and remembered by this worker; the store was not read again)"}
	if f.Done || d.request == nil {
		return res
	}
	// The hash is equal, so the request is the stored entity's.
	return c.resume(ctx, d, res)
}

// resume makes the effect of d's entity, stored with d's hash, once, and
// returns res (a Duplicate) when it is done.
func (c *Consumer[T]) resume(ctx context.Context, d delivery, res Result) Result {
	r, done := c.effect.Run(ctx, d.m, d.id, d.hash, d.request)
	if !done {
		return r
	}
	c.learnDone(d.id, d.hash)
	res.Resumed = r.Resumed
	return res
}

// fromStore decides delivery d from what the store holds, when it holds
// the entity: Duplicate (after the effect, if any) or Mismatch. With the
// effect's claim batched it reads the effect record first, written in the
// entity's batch with the entity's request hash: one read then tells a
// duplicate from a reused id and whether the effect is done. Without one,
// or for a record that holds no request hash, it reads the marker.
//
// If the store holds no marker, fromStore reports false, unless conflicted
// (the create just conflicted): then the marker is missing although a
// document of its batch exists (see markerMissing).
//
// An effect record with a request hash is written only in its entity's
// batch (or after the marker was read), so finding one proves the entity
// was accepted with that hash. Like the fact cache, this path does not
// notice a marker deleted since, which is out of contract.
func (c *Consumer[T]) fromStore(ctx context.Context, d delivery, conflicted bool) (Result, bool) {
	op := "read"
	if conflicted {
		op = "read after conflict"
	}
	if d.batched {
		rec, etag, err := c.effect.Read(ctx, d.id)
		switch {
		case errors.Is(err, ErrNotFound):
			if !conflicted {
				return Result{}, false // a new entity, most likely: create it
			}
			// The entity was accepted without a claim (by a consumer
			// without the effect): read the marker.
		case err != nil:
			return storeFailure(d.id, op+" effect record", err), true
		case rec.RequestHash == "":
			// A record that holds no request hash: read the marker.
		case rec.RequestHash != d.hash:
			c.learn(d.id, rec.RequestHash, false)
			return Result{Outcome: Mismatch, Key: d.id, Reason: c.reused,
				Description: fmt.Sprintf("%s exists with request hash %s (recorded on its record %s, claimed first by message %s); this message has request hash %s",
					d.id, rec.RequestHash, rec.ID, rec.Claim.MessageID, d.hash)}, true
		default:
			res := Result{Outcome: Duplicate, Key: d.id,
				Description: fmt.Sprintf("accepted earlier (its record %s is %s)", rec.ID, rec.State)}
			if rec.State != EffectCompleted {
				c.learn(d.id, d.hash, false)
				r, done := c.effect.Resume(ctx, d.m, rec, etag)
				if !done {
					return r, true
				}
				res.Description = fmt.Sprintf("accepted earlier; its record %s is completed now", rec.ID)
				res.Resumed = r.Resumed
			}
			c.learnDone(d.id, d.hash)
			return res, true
		}
	}
	stored, found, err := c.lookup.Lookup(ctx, d.id)
	switch {
	case err != nil:
		return storeFailure(d.id, op, err), true
	case !found && !conflicted:
		return Result{}, false
	case !found:
		return c.markerMissing(ctx, d), true
	}
	c.learn(d.id, stored, false)
	res := Compare(d.id, stored, d.hash, c.reused, "")
	if res.Outcome != Duplicate || d.request == nil {
		return res, true
	}
	// An earlier delivery may have stopped between the create and the
	// effect: the effect runs for duplicates too.
	return c.resume(ctx, d, res), true
}

// markerMissing decides a create that conflicted although the marker is
// not there. The batch conflicts on any of its documents, so either the
// marker was deleted between the create and the read, or a companion
// document (an outbox event) exists without it: someone deleted the
// marker after the batch wrote both.
//
// The two are told apart by reading the companion, and a read that lagged
// (a replica behind the create, under Session consistency) from a deleted
// document by reading the marker once more after the companion: no single
// read dead-letters anything. If the companion exists and the second read
// confirms the marker missing, the state is permanent: every redelivery
// would conflict on the companion and read no marker again, until
// MaxDeliveryCount dead-letters the message without a reason; nor may the
// consumer recreate the entity by itself, since downstream readers may
// have consumed the companion. So the message is dead-lettered at once
// with ReasonMarkerMissing (or the Kind's name for it, see MissingNamer),
// telling an operator what exists and what to do, but only on a
// redelivery (DeliveryCount above 1): on a first delivery every read that
// missed the marker may have lagged (a store without session tokens), so
// the message is retried and a later delivery, reading again, decides. If
// the companion is gone too, both were deleted in between: a retry decides
// anew. A batch of the
// marker alone has no companion to read, and a retry is the safe side.
func (c *Consumer[T]) markerMissing(ctx context.Context, d delivery) Result {
	if d.companion == "" {
		return Result{Outcome: Transient, Key: d.id, Reason: ReasonConcurrentUpdate,
			Description: "read after conflict: the marker document is gone; retrying"}
	}
	_, _, err := c.store.ReadDocument(ctx, d.id, d.companion)
	switch {
	case errors.Is(err, ErrNotFound):
		return Result{Outcome: Transient, Key: d.id, Reason: ReasonConcurrentUpdate,
			Description: fmt.Sprintf("read after conflict: neither the marker document nor its companion %q exists any more (deleted since the create); retrying", d.companion)}
	case err != nil:
		return storeFailure(d.id, fmt.Sprintf("read the companion %q after conflict", d.companion), err)
	}
	// Confirm before acting: under Session consistency the first read may
	// have landed on a replica that lagged behind the create that
	// conflicted (another process's write, whose session token this one
	// did not have). The companion's read saw the batch, and a
	// session-aware store carries the token of that read into this one,
	// which therefore sees the marker unless it is really gone.
	switch _, found, err := c.lookup.Lookup(ctx, d.id); {
	case err != nil:
		return storeFailure(d.id, "read the marker again after conflict", err)
	case found:
		return Result{Outcome: Transient, Key: d.id, Reason: ReasonConcurrentUpdate,
			Description: fmt.Sprintf("read after conflict: a first read found no marker document, a read after its companion %q found it (a read that lagged behind the create); retrying", d.companion)}
	}
	// A store that carries no session token (or one the read did not get)
	// may serve both marker reads from a replica behind the create while
	// the companion's read reached a current one: the same evidence as a
	// deleted marker. Decide on a later delivery: its reads come after the
	// replicas caught up (Cosmos DB's within a region: milliseconds). An
	// abandon, not a delayed retry: a scheduled copy's delivery count
	// starts at 1 again and would put the decision off for every copy.
	if d.m.DeliveryCount <= 1 {
		return Result{Outcome: Transient, Key: d.id, Reason: ReasonConcurrentUpdate,
			Description: fmt.Sprintf("read after conflict: two reads found no marker document although its companion %q exists; on a first delivery that may be a replica behind the create, so a redelivery decides", d.companion)}
	}
	err = fmt.Errorf("marker document %s is missing but its companion %s exists in partition %s", d.id, d.companion, d.id)
	return Result{Outcome: Invalid, Key: d.id, Reason: c.missing,
		Description: fmt.Sprintf("the create conflicted, the marker document %q does not exist, but its companion %q does (partition %q): "+
			"the marker was deleted after the message was accepted, and no redelivery can change that. "+
			"Restore the marker from its companion (or delete the companion if the message must be processed anew), then resubmit this message",
			d.id, d.companion, d.id), Err: err}
}

// foundStored reports whether res, decided by fromStore without a create,
// comes from finding the entity stored, rather than from a failed read. A
// failure of the effect after the read found the entity counts as not
// found too: the finding is then merely not recorded, which costs the
// read-first estimate one observation and cannot change an outcome.
func foundStored(res Result) bool {
	return !res.DependencyFailed() && res.Reason != ReasonStoreRejected
}

// learn records a hash the store confirmed, in the fact cache and the
// lookup.
func (c *Consumer[T]) learn(id, hash string, done bool) {
	if c.facts != nil {
		c.facts.Learn(id, hash, done)
	}
	c.lookup.Learn(id, hash)
}

// learnDone records that id's effect completed.
func (c *Consumer[T]) learnDone(id, hash string) {
	if c.facts != nil {
		c.facts.Learn(id, hash, true)
	}
}

// Lookup finds the request hash stored for an entity. Implementations must
// be safe for concurrent use.
type Lookup interface {
	// Lookup returns the request hash recorded for entity id, and false
	// if the store holds no marker for it.
	Lookup(ctx context.Context, id string) (hash string, found bool, err error)
	// Learn records that the store confirmed hash for id (a create that
	// succeeded). A lookup that remembers nothing ignores it.
	Learn(id, hash string)
}

// MarkerLookup returns the Lookup that reads the marker document (id =
// partition key = entity id) from s and takes its "requestHash" field. A
// stored document without one is an *UnreadableError (it matches
// ErrUnreadable): the Consumer dead-letters the message at once with
// ReasonStoredDocumentUnreadable, since every redelivery would read it
// again.
func MarkerLookup(s Store) Lookup { return markerLookup{s} }

type markerLookup struct{ s Store }

func (l markerLookup) Lookup(ctx context.Context, id string) (string, bool, error) {
	body, _, err := l.s.ReadDocument(ctx, id, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	hash, err := MarkerHash(body)
	if err != nil {
		// Every delivery would read the same bytes: Invalid at once.
		return "", false, unreadableError(id, id, err)
	}
	return hash, true, nil
}

func (markerLookup) Learn(string, string) {}

// MarkerHash returns the "requestHash" field of a marker document's JSON.
// A document without one is an error: it is not a marker, and comparing
// against it would call every message a mismatch.
func MarkerHash(body []byte) (string, error) {
	var m struct {
		RequestHash string `json:"requestHash"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("decode the stored marker: %w", err)
	}
	if m.RequestHash == "" {
		return "", errors.New("the stored document has no requestHash: it is not a marker")
	}
	return m.RequestHash, nil
}

// ReadFirstPolicy decides whether a delivery reads the store before it
// creates. Reading first costs a new entity two round trips and a copy one;
// creating first costs a new entity one and a copy two. Implementations
// must be safe for concurrent use.
type ReadFirstPolicy interface {
	// ReadFirst reports whether delivery m should look up before it
	// creates.
	ReadFirst(m Message) bool
	// Observe records what delivery m found: copy reports that the entity
	// was stored already (a lookup that found it, or a create that
	// conflicted), !copy that this delivery created it.
	Observe(m Message, copy bool)
}

// RedeliveriesFirst is the default ReadFirstPolicy: a redelivery
// (DeliveryCount above 1) is most likely a duplicate, so it reads first; a
// first delivery creates first.
type RedeliveriesFirst struct{}

// ReadFirst reports whether m is a redelivery.
func (RedeliveriesFirst) ReadFirst(m Message) bool { return m.DeliveryCount > 1 }

// Observe does nothing: the policy learns nothing.
func (RedeliveriesFirst) Observe(Message, bool) {}
