// Package idempotent is the Idempotent Consumer pattern on a document store,
// for any message type: the part of this project to import or copy.
//
// Use it by giving your message type a [Kind] and a [Store], then handing
// each delivery to [Consumer.Process] and settling by the [Result]:
//
//	store, _ := cosmosstore.New(client, "db", "invoices", "/invoiceId")
//	consumer := idempotent.NewConsumer(InvoiceKind{}, store)
//	res := consumer.Process(ctx, idempotent.Message{ID: msg.MessageID, Body: msg.Body, DeliveryCount: msg.DeliveryCount})
//	switch res.Outcome.Settlement() { /* complete, dead-letter, abandon */ }
//
// (package worker runs that loop on a Service Bus queue). The pattern has
// four techniques, each a piece of its own that works alone:
//
//   - create-once, [Consumer]: the atomic create of a marker is the
//     duplicate check and the write;
//   - effect-once, [Effect] (with [WithEffect]): a side effect outside the
//     store's transaction, an API call, an e-mail, a payment, behind an
//     in-progress/completed record and an idempotency key passed downstream;
//   - the inbox, [Inbox]: a consumer-scoped marker written in one batch with
//     the consumer's business write, so that each event takes effect once
//     per consumer;
//   - versioned state, [Versioned]: absolute state applied under a version
//     guard, newer [Applied], older [Stale], the same version with other
//     content a [Mismatch].
//
// Package relay, the outbox publisher, carries the events these pieces
// write from the change feed to a topic.
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
//	create marker + companions (+ the effect's claim) in one batch
//	   ├─ created ─► (effect: call, mark completed) ─► Created    (complete)
//	   ├─ conflict ─► read the marker (or the effect record) ─► compare
//	   │                same hash ─► (effect not done: resume it) ─► Duplicate  (complete)
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
// that the decision uses errors.Is and never reads a status code. A
// store's reads must see its own writes and what its refused writes saw
// (read your writes: Cosmos DB's Session consistency with the session
// tokens carried, as cosmosstore does; see [Store]): after a 409 the reads
// decide, and a read from a replica behind the create can miss a document
// that exists. The Consumer dead-letters a missing marker on a redelivery
// only, so a store that breaks the rule costs a retry, not a message.
//
// Optimizations are decorators of the [Lookup] seam and options, in files
// of their own ([FactCache] through [WithFactCache], [CopyShare] through
// [WithReadFirst]): none changes an outcome, only the round trips.
//
// Why a Kind beside the message type, not methods on it: the message type
// is often not the user's to extend (generated from a schema, or owned by
// another package), one struct may be consumed by two Kinds (a consumer
// and an HTTP handler that read it differently), and a Kind can carry what
// its Documents need (a clock, a configuration) without putting it into
// every message. [Consumer] is generic over the decoded type, so nothing
// is type-asserted per message. Optional behaviour is an optional second
// interface on the Kind, found once by NewConsumer: [ReasonNamer] and
// [MissingNamer] name reasons for a domain, [EffectKind] gives a message's
// side-effect request.
//
// # Effect-once
//
// A side effect that cannot join the store's transaction (a payment, an
// e-mail, a webhook) is an [Effect]: an in-progress record in the entity's
// partition, claimed before the call and completed after it, ETag-fenced,
// with an idempotency key stable per entity and step passed to the
// [Downstream]. Given to a Consumer ([WithEffect]) its first claim joins the
// create's batch, so a new entity costs the batch, the call and the
// completed mark: two round trips and one call. A duplicate whose effect is
// not known done (the [FactCache] remembers completions) resumes it: takes
// over a claim of an earlier delivery of the same copy at once, of another
// copy after the lease, and a claim whose key the downstream may have
// forgotten is resolved through its ledger ([Finder]) or dead-lettered for
// reconciliation, never called blindly. The seam is the downstream's call
// with a key ([Downstream], one method; [Finder] optional) and the effect's
// request as a JSON object: the record stores it beside its own fields, so
// that what was asked for is readable in the store, and any domain's
// request fits without a type parameter on the Consumer.
//
// # Inbox and versioned state
//
// A consumer of events (one copy per subscription) needs no marker of its
// own entity: [Inbox.Process] writes the marker inbox:<consumer>:<MessageId>
// first in one batch with the documents the caller's function returns, so
// the event's effect and its marker exist together or not at all; a
// redelivery reads the marker (one round trip) and compares request hashes.
// The marker's time to live is bounded below by the [RedeliveryHorizon]
// (InboxConfig.Horizon): a marker that expired while a copy can still
// arrive would let the event take effect twice. [Versioned.Apply] applies
// absolute state (a status, a quantity) under a version guard: one
// conditional patch through a [Patcher] on a first delivery, else a read
// and an ETag-conditioned replace, retried a bounded number of times. Both
// make every store call and conflict decision themselves; a domain gives
// them its documents, hashes and mutation.
//
// A domain with more to do than these builds its decision from the same
// parts: [Message], [Result], [Compare], [StoreFailure] and the sentinel
// errors.
//
// # Idempotency contract
//
// [Consumer.Process] may be called any number of times, concurrently, for
// deliveries of the same message. At most one call returns [Created]; every
// other call with the same content returns [Duplicate] or [Transient]. After
// an ambiguous write (a create that commits but reports a failure, so that
// no delivery returns Created) every delivery returns Duplicate or
// Transient, and the effect, if any, still happens once: a Duplicate whose
// effect is not known done makes it. A duplicate never changes a stored
// marker or companion; it may only claim, take over or complete the
// effect's record.
package idempotent
