// Package cosmosstore is the Azure Cosmos DB for NoSQL store of the
// idempotent consumer, on the azcosmos SDK: a [Store] is an
// [idempotent.Store], an [idempotent.DocumentStore] and an
// [idempotent.Patcher] on one container.
//
// # Use
//
// Connect, build a Store on the container with the container's partition
// key path, check it once before the first message, and hand it to the
// pieces of package idempotent wherever they take a Store or a
// DocumentStore:
//
//	cred, err := azidentity.NewDefaultAzureCredential(nil)
//	…
//	client, err := cosmosstore.NewClient("https://ACCOUNT.documents.azure.com:443/", cred, nil)
//	…
//	store, err := cosmosstore.New(client, "billing", "invoices", "/invoiceId")
//	…
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
//	res, err := store.Check(ctx) // names the setting to fix
//	cancel()
//	…
//	if !res.ETagsHonoured {
//		// an emulator that ignores If-Match: refuse to start, or warn
//	}
//
// [New] makes no request; [Store.Check] verifies that the container exists,
// is partitioned on the path New was given and has the time to live the
// store needs, and that the identity may read and write. On an emulator,
// connect with [NewClientWithKey] or [NewClientFromConnectionString] and
// create the database and container first with [CreateDatabaseAndContainer],
// which takes the same path.
//
// # Partition key path
//
// A Store serves one container, partitioned on one top-level field: the
// path given to [New] ("/invoiceId", "/tenantId"), which
// [Store.PartitionKeyPath] returns. Every document written through the
// Store carries its partition key value in that field, and every call names
// that value (the pk argument): the documents of one entity (its
// idempotency marker, its outbox event, the records of its side effects,
// the inbox markers of its consumers) share one logical partition, so that
// [Store.CreateBatch] writes any set of them in one transactional batch, all
// or none. [Store.ReadPartition] queries that field; [Store.Check] refuses a
// container partitioned on another path, naming both.
//
// # Documents
//
// [Store.CreateBatch] is the duplicate check: it creates documents that
// must not exist and returns the ETags the batch response reports for
// them, so that no read is needed before a conditional replace.
// [Store.ReadDocument] returns a document with its ETag, and
// [Store.ReplaceDocument] replaces one on the condition that its ETag has
// not moved (an If-Match header), which makes concurrent read-modify-write
// cycles safe: one wins, the others get idempotent.ErrPreconditionFailed,
// read again and decide again. [Store.PatchDocument] patches one on the
// server under a filter predicate ("FROM c WHERE c.version < 5"), in one
// round trip; a predicate that does not match is a 412 as well. Cosmium
// ignores the predicate: [WithoutPatch] hides PatchDocument there.
// [Store.ChangeFeed] reads the container's change feed, for an outbox
// publisher ([ChangeFeed]).
//
// # Concurrency and idempotency
//
// A [Store] is safe for concurrent use by any number of goroutines, and so
// is a [ChangeFeed]. Every call takes a context and returns when it ends
// (see Deadlines below); the store keeps no context.
//
//   - [Store.CreateBatch] for the same ids may be called any number of
//     times, concurrently: Cosmos DB's atomic batch writes them at most once,
//     so at most one call returns nil, and every other call writes nothing
//     and returns an error: idempotent.ErrAlreadyExists once the documents
//     exist, or a transient one. A call whose batch committed may itself
//     return a transient error (a timeout after the write): its retry then
//     finds its own documents and returns idempotent.ErrAlreadyExists, and
//     no call returns nil. Callers decide by reading what is stored, never
//     by which call returned nil.
//   - Of concurrent [Store.ReplaceDocument] calls that pass the same ETag, at
//     most one succeeds; the others return idempotent.ErrPreconditionFailed.
//     An empty ETag replaces unconditionally: the last write wins.
//   - [Store.PatchDocument] checks its conditions and applies its operations
//     atomically. An increment applied twice counts twice: retry a patch
//     only under a condition its first application makes false, such as a
//     version guard.
//   - [Store.ReadDocument], [Store.ReadPartition], [Store.Ping] and the change
//     feed's reads have no side effects. [Store.Probe] deletes an item that
//     does not exist: it changes nothing and adds nothing to the change
//     feed. [Store.Check] writes and deletes a probe document in a partition
//     of its own.
//
// # Time to live
//
// A document with a "ttl" field (seconds), such as an inbox marker, is
// deleted by Cosmos DB that long after its last write. The store does
// nothing for it: Cosmos DB honours per-item TTL because the container's
// default TTL is -1 (on, with no default expiry, [RequiredDefaultTTL]), as
// [CreateDatabaseAndContainer] and the project's Bicep template create it.
// A container without a default TTL (TTL off) keeps such documents forever;
// one with a positive default deletes every other document too (markers,
// events, effect records, leases), so that a late copy of a message would
// be processed again. [Store.Check] refuses both, naming the fix.
//
// # Status codes
//
// The store turns Cosmos DB status codes into the sentinel errors of package
// idempotent, by status code and never by the text of a message:
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
// whose partition key field does not hold the batch's partition key value, a
// "ttl" that is not -1 or a positive integer, more than 100 operations, a
// document or a batch over 2 MB. No redelivery can change that, so
// idempotent.ErrRejected tells the caller to dead-letter the message at once;
// the error names the status, the sub-status and the activity id. 401 and
// 403 are permanent and not the message's fault: a wrong key, or an identity
// without the data-plane role ([DataContributorRole]).
//
// A failed transactional batch reports the operation that caused the failure
// with its own status code (and sub-status, which the store reads from the
// response body since azcosmos does not) and every other operation with 424
// (Failed Dependency); the store reports the first operation whose status is
// neither 2xx nor 424. Every error the store returns is an [*Error], which
// names the call, the partition key value, the batch operation, the status
// code and the activity id that Azure support asks for (and, for a
// single-document call, the document id).
//
// # Request charge
//
// The store adds up the request units (RU) that Cosmos DB charges for every
// call, including failed ones; [Store.RequestCharge] returns the running
// total.
//
// # Connecting
//
// In Azure a consumer authenticates with Microsoft Entra ID ([NewClient]
// with an azidentity credential) and holds only the data-plane role
// [DataContributorRole], which cannot create databases or containers: the
// deployment creates them. [NewClientWithKey] and
// [NewClientFromConnectionString] are for the emulators ([ClientOptions]
// has InsecureSkipVerify for their self-signed certificates), and
// [CreateDatabaseAndContainer] creates the database and container there.
//
// # Session consistency
//
// Under the Session consistency of a default account, a read sees a write
// only if it carries the write's session token; without one it may be
// served by a replica that lags. azcosmos v1.5.0 keeps no session: it sends
// x-ms-session-token only when ItemOptions.SessionToken or
// TransactionalBatchOptions.SessionToken is set. A [Store] is therefore a
// session of its own: it keeps the latest session token of every response
// (writes, reads, and refusals such as a batch's 409) for the
// [SessionTokenPartitions] partition keys used most recently, and sends it
// on the reads and batches of that partition. A partition whose entry was
// evicted, and every read of another process, is served at the account's
// consistency alone and may lag; callers must not act destructively on one
// such read that finds nothing (confirm before dead-lettering).
//
// # Start-up check and probe
//
// [Store.Check] verifies before the first message that the database and the
// container exist, that the container is partitioned on the Store's path
// with the default TTL -1, that the identity may read and write items, and
// whether the server honours If-Match and patch conditions
// ([CheckResult]); each failure names the setting to fix ([SettingEndpoint],
// [SettingKey], [SettingDatabase], [SettingContainer], [SettingClientID]
// and the role). [Store.Probe], a point read and a delete of a missing
// item (about two request units, not measured), is the probe of a circuit
// breaker in front of a worker that writes: a container that answers reads
// and refuses writes (a write-region outage, a role cut to Data Reader)
// fails it. It addresses one partition key value, so it cannot see an
// outage or throttling of other key ranges, nor a storage quota on a
// logical partition (deletes are allowed there). [Store.Ping], the point
// read alone, is the probe of a reader, such as a relay whose role may
// only read the container: it writes nothing and needs no write
// permission, and a container that refuses writes passes it.
//
// # Deadlines
//
// Every call returns when its context ends, even while azcosmos v1.5.0
// fetches the account's properties under a context of its own, bounded only
// by its own 60-second timeout: the store stops waiting for such a call at
// the caller's deadline and leaves it to finish in the background.
//
// # Emulators
//
// The tests run against cosmium, which reproduces creates, conflicts, reads,
// replaces and partition queries but sends no ETag header, ignores If-Match
// (never 412) and patch conditions, ignores TTL and does not make batches
// atomic; the store is tested for those against a fake gateway through the
// real SDK. Against cosmium ReadDocument returns an empty ETag, and
// ReplaceDocument with an empty ETag is unconditional, so ETag-guarded
// writes work there without their guard; [Store.Check] reports it with
// CheckResult.ETagsHonoured false. Cosmium also checks none of the content
// rules that Cosmos DB answers with 400 or 413 (ids, partition key values,
// ttl, sizes, batch limits): those are tested on the fake gateway and in the
// test kit's in-memory store (test/memstore).
package cosmosstore
