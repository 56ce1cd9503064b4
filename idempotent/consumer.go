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
// an id reused for other content for its domain ("OrderIdReused"); other
// Kinds get ReasonIDReused.
type ReasonNamer interface{ ReusedReason() string }

// Consumer is the idempotent consumer of one message type: it turns one
// delivery into exactly one Result. It is safe for concurrent use: all
// coordination between concurrent deliveries of one message happens in the
// store's atomic create.
type Consumer[T any] struct {
	kind   Kind[T]
	store  Store
	lookup Lookup
	policy ReadFirstPolicy
	reused string
}

// Option configures a Consumer.
type Option func(*options)

type options struct {
	lookup func(Lookup) Lookup
	policy ReadFirstPolicy
}

// WithLookup wraps the Consumer's lookup of stored hashes, for example in a
// FactCache: wrap receives the lookup that reads the store.
func WithLookup(wrap func(Lookup) Lookup) Option { return func(o *options) { o.lookup = wrap } }

// WithReadFirst sets the policy that decides whether a delivery reads
// before it creates (see ReadFirstPolicy); the default reads first on
// redeliveries only.
func WithReadFirst(p ReadFirstPolicy) Option { return func(o *options) { o.policy = p } }

// NewConsumer returns the Consumer of kind's messages over store.
func NewConsumer[T any](kind Kind[T], store Store, opts ...Option) *Consumer[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c := &Consumer[T]{kind: kind, store: store, lookup: MarkerLookup(store), policy: o.policy, reused: ReasonIDReused}
	if o.lookup != nil {
		c.lookup = o.lookup(c.lookup)
	}
	if c.policy == nil {
		c.policy = RedeliveriesFirst{}
	}
	if n, ok := kind.(ReasonNamer); ok {
		c.reused = n.ReusedReason()
	}
	return c
}

// Process decides what to do with one delivery of m: decode, look up,
// create, compare. The create is the arbiter of every race: a lookup that
// finds nothing leads to the create, and a create that conflicts is decided
// by a lookup, so the read-first policy changes what a delivery costs,
// never what it decides.
func (c *Consumer[T]) Process(ctx context.Context, m Message) Result {
	// 1. Decode and validate. A message that fails here can never succeed.
	v, err := c.kind.Decode(m.Body)
	if err != nil {
		return Result{Outcome: Invalid, Reason: ReasonInvalidMessage, Description: err.Error(), Err: err}
	}
	id, hash := c.kind.ID(v), c.kind.RequestHash(v)
	if id != m.ID {
		err := fmt.Errorf("the entity id %q does not equal the MessageId %q", id, m.ID)
		return Result{Outcome: Invalid, Key: id, Reason: ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	// 2. Look up first when a duplicate is likely (a redelivery).
	readFirst := c.policy.ReadFirst(m)
	if readFirst {
		stored, found, err := c.lookup.Lookup(ctx, id)
		if err != nil {
			return StoreFailure(id, "read", err)
		}
		if found {
			c.policy.Observe(m, true)
			return Compare(id, stored, hash, c.reused, "")
		}
	}
	// 3. Create the marker and its companions atomically: the duplicate
	// check and the write in one step.
	docs, err := c.kind.Documents(m, v, hash)
	if err != nil {
		return Result{Outcome: Invalid, Key: id, Reason: ReasonInvalidMessage, Description: "build the documents: " + err.Error(), Err: err}
	}
	_, err = c.store.CreateBatch(ctx, id, docs)
	switch {
	case err == nil:
		c.policy.Observe(m, false)
		c.lookup.Learn(id, hash)
		return Result{Outcome: Created, Key: id}
	case !errors.Is(err, ErrAlreadyExists):
		return StoreFailure(id, "create", err)
	}
	c.policy.Observe(m, true)
	// 4. Compare: the same content is a duplicate, other content an id
	// reused.
	stored, found, err := c.lookup.Lookup(ctx, id)
	switch {
	case err != nil:
		return StoreFailure(id, "read after conflict", err)
	case !found: // deleted between the create and the read: decide anew
		return Result{Outcome: Transient, Key: id, Reason: ReasonConcurrentUpdate,
			Description: "read after conflict: the marker document is gone; retrying"}
	}
	return Compare(id, stored, hash, c.reused, "")
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
// partition key = entity id) from s and takes its "requestHash" field.
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
	return hash, err == nil, err
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
