package idempotent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is one delivery of a message, reduced to what the decision
// needs. ID is the producer's MessageId, the deduplication key; never the
// lock token, sequence number or delivery count, which change between
// deliveries.
type Message struct {
	ID            string
	Subject       string // the message's kind, for consumers of more than one
	Body          []byte
	DeliveryCount uint32 // 1 on the first delivery
	// SequenceNumber is the broker's number of this copy of the message:
	// every delivery of one enqueued copy has the same number, and a copy
	// sent again (a producer retry after the duplicate-detection window, a
	// dead-letter resubmission) gets a new one. With DeliveryCount it names
	// the delivery: Service Bus hands a copy to a new receiver only after
	// the previous delivery's lock ended, so a higher DeliveryCount of the
	// same SequenceNumber proves the earlier delivery can no longer settle.
	SequenceNumber int64
}

// Outcome is what processing one delivery decided. Each outcome has exactly
// one settlement.
type Outcome int

// The outcomes of processing a delivery.
const (
	// Created: this delivery wrote the entity. Complete the message.
	Created Outcome = iota + 1
	// Duplicate: the entity exists with the same request hash. Complete the
	// message; nothing was written.
	Duplicate
	// Mismatch: the entity exists with a different request hash; the id was
	// reused for other content. Dead-letter the message and alert.
	Mismatch
	// Invalid: the message can never succeed. Dead-letter it at once.
	Invalid
	// Transient: a dependency failed in a way that may pass, or the
	// message must wait. Abandon it so the broker redelivers it, or, with
	// Result.RetryAfter set, retry it later by a scheduled copy.
	Transient
	// Applied: an update was newer than the stored version and was
	// applied. Complete the message.
	Applied
	// Stale: an update was not newer than the stored version; nothing was
	// written. Complete the message.
	Stale
	// Ignored: the message is of a kind this consumer has no use for;
	// nothing was written. Complete the message.
	Ignored
)

var outcomeNames = [...]string{Created: "created", Duplicate: "duplicate", Mismatch: "mismatch", Invalid: "invalid",
	Transient: "transient", Applied: "applied", Stale: "stale", Ignored: "ignored"}

func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Settlement is what a worker does with a delivery once it is decided: the
// meaning of an Outcome for the broker.
type Settlement int

// The settlements of a delivery.
const (
	// Abandon gives the message back for redelivery (a worker that can
	// schedule messages may instead retry it by a scheduled copy when the
	// result has RetryAfter set). The zero value: an outcome nobody knows
	// is retried, never lost.
	Abandon Settlement = iota
	// Complete removes the message: it is done, whether or not this
	// delivery wrote anything.
	Complete
	// DeadLetter moves the message to the dead-letter queue: no
	// redelivery can make it succeed.
	DeadLetter
)

var settlementNames = [...]string{Abandon: "abandon", Complete: "complete", DeadLetter: "dead_letter"}

func (s Settlement) String() string {
	if s >= 0 && int(s) < len(settlementNames) {
		return settlementNames[s]
	}
	return fmt.Sprintf("Settlement(%d)", int(s))
}

// Settlement returns how a delivery with outcome o is settled: Created,
// Duplicate, Applied, Stale and Ignored complete it, Mismatch and Invalid
// dead-letter it, and Transient, like any outcome not listed, abandons it.
func (o Outcome) Settlement() Settlement {
	switch o {
	case Created, Duplicate, Applied, Stale, Ignored:
		return Complete
	case Mismatch, Invalid:
		return DeadLetter
	default:
		return Abandon
	}
}

// Dead-letter and retry reasons of the pattern itself, short and stable so
// that operators can group dead-lettered messages by them. A domain adds
// its own.
const (
	ReasonInvalidMessage     = "InvalidMessage"
	ReasonMessageIDMismatch  = "MessageIdMismatch"
	ReasonUnsupportedMessage = "UnsupportedMessage"
	// ReasonIDReused: the entity exists with another request hash. A Kind
	// may name it for its domain (see ReasonNamer).
	ReasonIDReused = "IdReused"
	// ReasonStoreUnavailable: the store failed in a way that may pass.
	ReasonStoreUnavailable = "StoreUnavailable"
	// ReasonStoreError: the store failed for good, but not for the
	// message's sake (a missing container, 401, 403): retried, for the
	// operator to fix.
	ReasonStoreError = "StoreError"
	// ReasonStoreRejected: the store refused the write for the message's
	// content (see ErrRejected); the description carries the status.
	ReasonStoreRejected = "StoreRejected"
	// ReasonConcurrentUpdate: the stored state changed under the decision
	// (a conflicting create whose document is gone by the read); retried.
	ReasonConcurrentUpdate = "ConcurrentUpdate"
)

// Result is the decision for one delivery.
type Result struct {
	Outcome Outcome
	// Key is the entity the message is about (its marker document's id);
	// empty when the body could not be decoded.
	Key         string
	Reason      string // a Reason constant; empty for Created and Duplicate
	Description string // human-readable detail for logs and the dead-letter queue
	Err         error  // the underlying error of Invalid and Transient outcomes
	// Dependency reports that a Transient outcome was caused by a
	// dependency (the store, a downstream API) failing, not by the
	// message: what a circuit breaker counts. See DependencyFailed.
	Dependency bool
	// RetryAfter, on a Transient outcome, says that the message can only
	// succeed later, when time has passed rather than when a dependency
	// recovers (it arrived before the message it depends on), and how long
	// to wait at least. A worker that can schedule messages retries it by a
	// scheduled copy, which uses none of the message's deliveries (see
	// package worker); zero, or a worker that cannot, abandons it.
	RetryAfter time.Duration
	// Resumed reports that this delivery resumed a side effect whose
	// in-progress record another delivery held (its lock or lease had
	// ended), with the same idempotency key.
	Resumed bool
}

// DependencyFailed reports whether r is a retry caused by a dependency
// rather than by the message: Dependency is set, or the reason is one of
// the store's (ReasonStoreUnavailable, ReasonStoreError). A retry for the
// message's own sake (it must wait for another message, or for another
// delivery's claim) is not one.
func (r Result) DependencyFailed() bool {
	return r.Outcome == Transient && (r.Dependency || r.Reason == ReasonStoreUnavailable || r.Reason == ReasonStoreError)
}

// Compare decides between Duplicate and Mismatch for entity key from the
// request hash stored with it; reused is the reason of a Mismatch (see
// ReasonIDReused) and detail, if not empty, says where the stored hash was
// found, for the description.
func Compare(key, stored, hash, reused, detail string) Result {
	if stored == hash {
		return Result{Outcome: Duplicate, Key: key, Description: nonEmpty(detail, "processed earlier with the same request hash")}
	}
	if detail != "" {
		detail = " (" + detail + ")"
	}
	return Result{Outcome: Mismatch, Key: key, Reason: nonEmpty(reused, ReasonIDReused),
		Description: fmt.Sprintf("%s exists with request hash %s%s; this message has request hash %s", key, stored, detail, hash)}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// StoreFailure turns a store error of operation op on entity key into a
// result.
//
// An error matching ErrRejected is the message's fault: the store refused
// what the message made the write contain (an illegal id, a document or
// batch over the size limit). No redelivery can change the content, so it
// is Invalid at once, with the error in the description; retrying would
// only spend MaxDeliveryCount deliveries before the broker dead-letters it
// anyway, without the reason.
//
// Every other error is retried, as a dependency failure. A transient one
// (throttling, a timeout, a lost connection) may pass by itself; a
// permanent one that is not the message's fault (a missing container, 401,
// 403) is the operator's to fix, and dead-lettering the message would
// punish it for the configuration: the worker's circuit breaker stops
// receiving until the store answers again, and the broker's
// MaxDeliveryCount bounds what the in-flight deliveries cost.
func StoreFailure(key, op string, err error) Result {
	if errors.Is(err, ErrRejected) {
		return Result{Outcome: Invalid, Key: key, Reason: ReasonStoreRejected,
			Description: op + ": the store rejected the write for the message's content: " + err.Error(), Err: err}
	}
	reason := ReasonStoreError
	if IsTransient(err) || errors.Is(err, context.Canceled) {
		reason = ReasonStoreUnavailable
	}
	return Result{Outcome: Transient, Key: key, Reason: reason, Description: op + ": " + err.Error(), Err: err, Dependency: true}
}
