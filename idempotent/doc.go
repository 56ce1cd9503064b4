// Package idempotent is the Idempotent Consumer pattern on a document store,
// for any message type: the part of this project to copy.
//
// A message is processed at least once; its effect must happen exactly once.
// The store is the single arbiter: the first delivery of a message creates
// a marker document whose id is the message's entity id and which records
// the request hash (a SHA-256 of the message's immutable business fields).
// The create is the duplicate check and the write in one atomic step:
//
//	decode ──invalid──────────────────────────────► Invalid    (dead-letter now)
//	   │
//	look up (on a redelivery: read first) ──found──► compare
//	   │ not found
//	create marker + companions in one batch
//	   ├─ created ────────────────────────────────► Created    (complete)
//	   ├─ conflict ─► read the marker ─► compare
//	   │                same hash ────────────────► Duplicate  (complete)
//	   │                other hash ───────────────► Mismatch   (dead-letter, alert)
//	   └─ store failed ───────────────────────────► Transient  (abandon, redelivered)
//
// Every Outcome has exactly one settlement (see package worker, which runs
// the Service Bus PeekLock loop and settles by one switch over outcomes).
//
// # The seam
//
// A message type plugs in through [Kind], four methods: decode and validate
// a body, name the entity id, hash the immutable fields, and list the
// documents an accepted message writes. [Consumer] is generic over the
// decoded type, so a Kind works with its own struct and never with maps or
// reflection; the decision itself, [Consumer.Process], is one function that
// reads top to bottom. An interface rather than a callback struct, so that
// the compiler checks a Kind is complete; generics rather than any, so that
// nothing is type-asserted at run time.
//
// Storage plugs in through [Store], two methods: create documents in one
// transactional batch (all or none, failing with [ErrAlreadyExists] if one
// exists) and read one. Package cosmosstore implements it on Azure Cosmos
// DB; package test/memstore on an in-memory model of Cosmos DB. Adapters
// translate their status codes into the sentinel errors ([ErrAlreadyExists],
// [ErrNotFound], [ErrTransient], [ErrPreconditionFailed], [ErrRejected]) so
// that the decision uses errors.Is and never reads a status code.
//
// Optimizations are decorators of the [Lookup] seam, in files of their own
// ([FactCache], [CopyShare]): none changes an outcome, only the round trips.
//
// A domain with more to do than the create (package order: status changes,
// a payment captured once through in-progress/completed records, inbox
// consumers) builds its decision from the same parts: [Message], [Result],
// [Compare], [StoreFailure] and the sentinel errors.
//
// # Idempotency contract
//
// [Consumer.Process] may be called any number of times, concurrently, for
// deliveries of the same message: exactly one call returns [Created] and
// every other call with the same content returns [Duplicate]. A duplicate
// never changes a stored document.
package idempotent
