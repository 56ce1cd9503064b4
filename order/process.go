package order

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is one delivery of an order message, reduced to what the decision
// needs. ID is the producer's MessageId, the deduplication key; never the lock
// token, sequence number or delivery count, which change between deliveries.
type Message struct {
	ID            string
	Body          []byte
	DeliveryCount uint32 // 1 on the first delivery
}

// Outcome is what processing one delivery decided. Each outcome has exactly
// one settlement.
type Outcome int

// The outcomes of processing a delivery.
const (
	// Created: this delivery wrote the order. Complete the message.
	Created Outcome = iota + 1
	// Duplicate: the order exists with the same request hash. Complete the
	// message; nothing was written.
	Duplicate
	// Mismatch: the order exists with a different request hash; the id was
	// reused for other content. Dead-letter the message and alert.
	Mismatch
	// Invalid: the message can never succeed. Dead-letter it at once.
	Invalid
	// Transient: the store failed in a way that may pass. Abandon the
	// message so the broker redelivers it.
	Transient
)

var outcomeNames = [...]string{Created: "created", Duplicate: "duplicate", Mismatch: "mismatch", Invalid: "invalid", Transient: "transient"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Dead-letter and retry reasons, short and stable so that operators can group
// dead-lettered messages by them.
const (
	ReasonInvalidMessage    = "InvalidMessage"
	ReasonMessageIDMismatch = "MessageIdMismatch"
	ReasonOrderIDReused     = "OrderIdReused"
	ReasonStoreUnavailable  = "StoreUnavailable"
	ReasonStoreError        = "StoreError"
)

// Result is the decision for one delivery.
type Result struct {
	Outcome     Outcome
	OrderID     string // empty when the body could not be decoded
	Reason      string // a Reason constant; empty for Created and Duplicate
	Description string // human-readable detail for logs and the dead-letter queue
	Err         error  // the underlying error of Invalid and Transient outcomes
}

// Processor makes the processing decision. It is safe for concurrent use: all
// coordination between concurrent deliveries of one message happens in the
// store's atomic create.
type Processor struct {
	store Store
	now   func() time.Time
}

// NewProcessor returns a Processor that writes to s. now stamps processedAt;
// nil means time.Now.
func NewProcessor(s Store, now func() time.Time) *Processor {
	if now == nil {
		now = time.Now
	}
	return &Processor{store: s, now: now}
}

// Process decides what to do with one delivery of m. It reads top to bottom:
// decode and validate, check the dedup key, then let the store's atomic create
// be both the duplicate check and the write.
func (p *Processor) Process(ctx context.Context, m Message) Result {
	// 1. Decode and validate. A message that fails here can never succeed.
	o, err := Decode(m.Body)
	if err != nil {
		return Result{Outcome: Invalid, Reason: ReasonInvalidMessage, Description: err.Error(), Err: err}
	}
	// 2. The dedup key is the MessageId, which the producer sets to the order id.
	if m.ID != o.OrderID {
		err := &FieldError{Field: "orderId", Problem: fmt.Sprintf("%q does not equal the MessageId %q", o.OrderID, m.ID)}
		return Result{Outcome: Invalid, OrderID: o.OrderID, Reason: ReasonMessageIDMismatch, Description: err.Error(), Err: err}
	}
	// 3. Create the order and its outbox event atomically. The create is the
	// dedup check and the write in one step.
	hash := o.RequestHash()
	err = p.store.CreateOrder(ctx, NewWrite(o, m.ID, hash, p.now()))
	switch {
	case err == nil:
		return Result{Outcome: Created, OrderID: o.OrderID}
	case errors.Is(err, ErrAlreadyExists):
		return p.compare(ctx, o.OrderID, hash)
	default:
		return storeFailure(o.OrderID, "create", err)
	}
}

// compare decides between Duplicate and Mismatch after a create conflicted.
func (p *Processor) compare(ctx context.Context, orderID, hash string) Result {
	stored, err := p.store.ReadOrder(ctx, orderID)
	if err != nil {
		// Not found right after a conflict means the document was deleted in
		// between (or only a companion document exists): retry decides anew.
		return storeFailure(orderID, "read after conflict", err)
	}
	if stored.RequestHash == hash {
		return Result{Outcome: Duplicate, OrderID: orderID,
			Description: fmt.Sprintf("order created by message %s at %s", stored.MessageID, stored.ProcessedAt.Format(time.RFC3339))}
	}
	return Result{Outcome: Mismatch, OrderID: orderID, Reason: ReasonOrderIDReused,
		Description: fmt.Sprintf("order %s exists with request hash %s (created by message %s at %s); this message has request hash %s",
			orderID, stored.RequestHash, stored.MessageID, stored.ProcessedAt.Format(time.RFC3339), hash)}
}

// storeFailure turns a store error into a retry. A permanent store error (a
// bad request, a forbidden call) is not the message's fault, so it is retried
// too: the broker's MaxDeliveryCount bounds the retries and dead-letters the
// message if the failure never passes, and nothing is lost.
func storeFailure(orderID, op string, err error) Result {
	reason := ReasonStoreError
	if IsTransient(err) || errors.Is(err, context.Canceled) {
		reason = ReasonStoreUnavailable
	}
	return Result{Outcome: Transient, OrderID: orderID, Reason: reason, Description: op + ": " + err.Error(), Err: err}
}
