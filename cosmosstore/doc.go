// Package cosmosstore implements idempotent.Store and idempotent.DocumentStore on Azure
// Cosmos DB for NoSQL with the azcosmos SDK.
//
// # Document layout
//
// Every document of an order lives in one logical partition: the container's
// partition key path is /orderId ([PartitionKeyPath]), and the order document's
// id is the order id, so id = orderId = partition key value. The OrderAccepted
// outbox event (id "OrderAccepted:" + orderId) shares the partition, so
// [Store.WriteOrder] writes both (and, with a payment step, the payment
// claim) in one transactional batch: all or none, and returns the ETags the
// batch response reports for them.
// The order document is the idempotency marker; because its id is the order
// id, a second create of the same order conflicts.
//
// The other documents of an order (payment records, inbox markers and the
// consumers' business writes) share its partition too, and go through the
// document-level methods: [Store.CreateDocuments] creates any set of them in
// one transactional batch, [Store.ReadDocument] returns a document with its
// ETag, and [Store.ReplaceDocument] replaces one on the condition that its
// ETag has not moved (an If-Match header), which makes concurrent
// read-modify-write cycles safe: one wins, the others get
// idempotent.ErrPreconditionFailed, read again and decide again.
// [Store.PatchDocument] patches one on the server under a filter predicate
// ("FROM c WHERE c.version < 5"), in one round trip; a predicate that does
// not match is a 412 as well. Cosmium ignores the predicate (see
// [WithoutPatch]).
//
// # Time to live
//
// A document with a "ttl" field (seconds), such as an inbox marker, is
// deleted by Cosmos DB that long after its last write. The store does nothing
// for it: Cosmos DB honours per-item TTL because the container's default TTL
// is -1 (on, with no default expiry), as [CreateDatabaseAndContainer] and the
// Bicep template create it. A container without a default TTL (TTL off)
// keeps such documents forever; one with a positive default deletes every
// other document too (orders, events, payment records, leases), so that a
// late copy of a message would create its order again. [Store.Check]
// refuses both, naming the fix.
//
// # Status codes
//
// The store turns Cosmos DB status codes into the sentinel errors of package
// order, by status code and never by the text of a message:
//
//	201 (every batch operation), 200     nil
//	409 Conflict                         idempotent.ErrAlreadyExists
//	404 Not Found, on a read or replace  idempotent.ErrNotFound
//	412 Precondition Failed              idempotent.ErrPreconditionFailed
//	400 Bad Request, 413 Too Large       idempotent.ErrRejected
//	429, 503, 408, 449                   idempotent.ErrTransient
//	lost or refused connection, timeout  idempotent.ErrTransient
//	401, 403, anything else              a permanent error
//
// A 404 whose sub-status says the database or container is missing (1003)
// is permanent, not idempotent.ErrNotFound: it is a configuration error, which
// [Store.Check] reports at start with the setting to fix. A 404 with
// sub-status 1002 (the replica has not caught up with the session token the
// read sent) is transient: the document may exist. A 400 or a 413 is
// caused by what the request carried, which comes from the message: an id
// Cosmos DB does not accept, two operations on one id in a batch, a document
// whose orderId is not the batch's partition key value, a "ttl" that is not
// -1 or a positive integer, more than 100 operations, a document or a batch
// over 2 MB. No redelivery can change that, so idempotent.ErrRejected tells the
// caller to dead-letter the message at once; the error names the status, the
// sub-status and the activity id. 401 and 403 are permanent and not the
// message's fault: a wrong key, or an identity without the data-plane role.

// A failed transactional batch reports the operation that caused the failure
// with its own status code (and sub-status, which the store reads from the
// response body since azcosmos does not) and every other operation with 424
// (Failed Dependency); the store reports the first operation whose status is
// neither 2xx nor 424. Every error the store returns is an [*Error], which names the
// call, the order, the batch operation, the status code and the activity id
// that Azure support asks for (and, for a single-document call, the
// document id).
//
// # Request charge
//
// The store adds up the request units (RU) that Cosmos DB charges for every
// call, including failed ones; [Store.RequestCharge] returns the running
// total.
//
// # Connecting
//
// In Azure the worker authenticates with Microsoft Entra ID ([NewClient] with
// an azidentity credential) and holds only the data-plane role Cosmos DB Built-in
// Data Contributor, which cannot create databases or containers: Bicep creates
// them. [NewClientWithKey] and [NewClientFromConnectionString] are for the
// emulators, and [CreateDatabaseAndContainer] creates the database and
// container there.
//
// # Session consistency
//
// The Bicep template's account uses Session consistency, under which a read
// sees a write only if it carries the write's session token; without one it
// may be served by a replica that lags. azcosmos v1.5.0 keeps no session:
// it sends x-ms-session-token only when ItemOptions.SessionToken or
// TransactionalBatchOptions.SessionToken is set. A [Store] is therefore a
// session of its own: it keeps the latest session token of every response
// (writes, reads, and refusals such as a batch's 409) for the
// [SessionTokenPartitions] partition keys used most recently, and sends it
// on the reads and batches of that partition. A partition whose entry was
// evicted, and every read of another process, is served at the account's
// consistency alone and may lag; callers must not act destructively on one
// such read (the order example confirms a missing order document before it
// dead-letters anything).
//
// # Start-up check and probe
//
// [Store.Check] verifies before the first message that the database and the
// container exist, that the container is partitioned on /orderId with the
// default TTL -1, that the identity may read and write items, and whether the server honours If-Match
// (CheckResult.ETagsHonoured); each failure names the setting to fix
// (COSMOS_ENDPOINT, COSMOS_KEY, COSMOS_DATABASE, COSMOS_CONTAINER,
// AZURE_CLIENT_ID and the role). [Store.Ping], one point read of a missing
// item, is the probe of a circuit breaker.
//
// Every call returns when its context ends, even while azcosmos v1.5.0
// fetches the account's properties under a context of its own, bounded only
// by its own 60-second timeout: the store stops waiting for such a call at
// the caller's deadline and leaves it to finish in the background.
//
// # Concurrency and idempotency
//
// A [Store] is safe for concurrent use. WriteOrder, CreateOrder and CreateDocuments are
// safe to call any number of times, concurrently, for the same documents:
// Cosmos DB's atomic batch lets exactly one call write them, and every other
// call writes nothing and returns an error matching idempotent.ErrAlreadyExists.
// Of concurrent ReplaceDocument calls that pass the same ETag, exactly one
// succeeds. ReadDocument and ReadOrder have no side effects.
//
// # Emulators
//
// The tests run against cosmium, which reproduces creates, conflicts, reads
// and replaces but sends no ETag header, ignores If-Match (never 412),
// ignores TTL and does not make batches atomic; the store is tested for those
// against a fake gateway through the real SDK. Against cosmium ReadDocument
// returns an empty ETag, and ReplaceDocument with an empty ifMatch is
// unconditional, so the order package's status changes and payment records
// work there without their ETag guard; [Store.Check] reports it with
// ETagsHonoured false. Cosmium also checks none of the content rules
// that Cosmos DB answers with 400 or 413 (ids, partition key values, ttl,
// sizes, batch limits): those are tested on the fake gateway and in
// package memstore.
package cosmosstore
