// Package memstore is an in-memory document store for tests of code built on
// package idempotent. Build one for the container it stands for, by its
// partition key path, and use it as the idempotent.Store:
//
//	store := memstore.New("/tenantId")
//	consumer := idempotent.NewConsumer(TenantKind{}, store)
//
// It has the Cosmos DB semantics the idempotent consumer relies on: documents addressed by partition key and
// id, an atomic create that fails with a conflict when the id exists, and a
// transactional batch that applies all of its operations or none and reports
// the operation that caused a failure (409, 400, 413) and 424 on the others.
//
// It implements idempotent.Store and idempotent.DocumentStore for tests and for the
// project's embedded default, which runs the whole pipeline with no Azure and
// no Docker. Like Cosmos DB, it gives every write a new ETag, honours
// If-Match conditions on replace (412 when the ETag moved), and expires a
// document whose JSON has a "ttl" field (seconds) that long after its last
// write. A Store is safe for concurrent use; every operation is atomic with
// respect to every other.
//
// # What it rejects
//
// It refuses what Cosmos DB for NoSQL refuses, with the status code Cosmos
// DB answers, in a *StatusError that matches idempotent.ErrRejected (400, 413),
// idempotent.ErrAlreadyExists (409), idempotent.ErrNotFound (404) or
// idempotent.ErrPreconditionFailed (412):
//
//   - an id that is empty, contains /, \, ? or #, or is longer than
//     MaxIDLength characters: 400, on every call that names it;
//   - a document that is not a JSON object, whose partition key field
//     (the field the partition key path given to New names) is not the
//     request's partition key value (400, sub-status 1001), or whose
//     "ttl" is not -1 or a whole number of seconds from 1 to MaxTTL (400;
//     0, null, fractions and strings included);
//   - a document over MaxDocumentBytes with the system properties Cosmos DB
//     adds: 413;
//   - a transactional batch with more than MaxBatchOperations operations
//     (400) or a payload over MaxRequestBytes (413), both reported for the
//     batch as a whole (Index -1), or with two operations on one id (400 on
//     the second).
//
// A batch with a body that is not JSON at all is a plain error, not a
// status: azcosmos marshals a batch itself and fails before it sends it (a
// replace's body is sent as it is, and answered 400). A document ID that
// differs from the "id" in its body is a plain error too: Cosmos DB would
// store the document under the body's id, which is a caller's bug.
//
// A failed batch writes nothing. The checks run in the order listed for a
// batch: its size first, then each operation in turn, then the conflicts
// (409) against what is stored; the first failure is reported. Cosmos DB
// reports one failure too, but does not document which one it picks when a
// batch has several: a caller that depends on which is wrong either way.
//
// # Outages
//
// SetOutage makes the store fail some of its calls until the outage ends:
// the writes only, one operation, or the partition key values of one
// physical partition (HashRange), with Cosmos DB's status for the failure
// it stands for: WriteRegionOutage, ReadOnlyRole, StorageQuota and
// HotPartition. Ping is a point read, as cosmosstore's: it fails only when
// reads of its partition do, so these outages are the ones such a probe
// cannot see. Probe, the circuit breaker's probe of a worker that writes,
// adds a delete of a missing document, as cosmosstore's: it fails under an
// outage of deletes (every outage of OpWrites) of its partition key value,
// so it sees WriteRegionOutage and ReadOnlyRole, but not StorageQuota nor
// an outage of a key range that spares its value.
//
// # Simplifications
//
// The store stands for one container partitioned on one top-level field
// (the path given to New) with a default TTL
// of -1, as cosmosstore.CreateDatabaseAndContainer and the Bicep template
// create it (SetDefaultTTL models another default, which Check refuses);
// other containers are out of scope. Its own
// reads are strongly consistent: they see every write that returned. The
// replica-lag mode (SetReplicaLag, with Sessions from NewSession) models
// Cosmos DB's Session consistency instead, under which a read without the
// session token of the partition's latest write may see an older state. Expiry is exact (Cosmos DB deletes expired documents in the
// background but never returns them after their TTL, which is what callers
// see here too). A point read or replace of an illegal id answers 400, where
// Cosmos DB's answer depends on how the escaped id reaches the gateway (400,
// or a 401 or 404): no such document can exist in either, and callers must
// validate ids before any store call rather than rely on the difference.
// The id limit is stricter than or equal to the service's (see MaxIDLength),
// so no id this store accepts is refused by Cosmos DB. The change feed
// (see ChangeFeed) is read from a write log that keeps only each live
// document's latest write, which is all its latest version mode returns,
// and a partition whose documents have all expired or been deleted leaves
// nothing behind (in the replica-lag mode, once its ReplicaLag.Window has
// passed), so the store's memory is bounded by its live documents, and
// those written within the lag's window, however long it runs.
package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Store is an in-memory document container. The zero value is not usable;
// call New.
type Store struct {
	mu    sync.Mutex
	parts map[string]map[string]*Item // partition key -> id -> item
	etag  uint64
	// writes is the change feed's write log (changefeed.go): every live
	// document once, in the order of its latest write (lsn), so that a read
	// after a continuation starts at the first write past it instead of
	// scanning every document. A document leaves it when it is written
	// again (and goes back at the end), deleted or expired.
	writes []*Item
	// sinceSweep counts the writes since expired documents were last swept
	// out of the store, and swept is the log's length after that sweep
	// (see sweepExpired).
	sinceSweep, swept int
	now               func() time.Time
	// pkField is the top-level field that carries a document's partition
	// key value: the container's partition key path without its slash.
	pkField string
	// defaultTTL is the container's default time to live, set by
	// SetDefaultTTL (ttl.go); without defaultTTLSet it is -1.
	defaultTTL    int32
	defaultTTLSet bool
	// lag is the replica-lag mode's state (lag.go); nil when it is off.
	lag *lagState
	// outage is the outage in progress (outage.go), or nil.
	outage atomic.Pointer[Outage]
}

var (
	_ idempotent.Store         = (*Store)(nil)
	_ idempotent.DocumentStore = (*Store)(nil)
	_ idempotent.Patcher       = (*Store)(nil)
)

// New returns an empty Store on the real clock for a container whose
// partition key path is partitionKeyPath ("/tenantId"): every document must
// carry its partition key value in that top-level field, as Cosmos DB
// requires. It panics if the path is not a slash and a top-level field
// name, a mistake of the test that builds it.
func New(partitionKeyPath string) *Store { return NewWithClock(partitionKeyPath, time.Now) }

// NewWithClock is New with a clock: the store's time-to-live expiry follows
// now.
func NewWithClock(partitionKeyPath string, now func() time.Time) *Store {
	field, ok := strings.CutPrefix(partitionKeyPath, "/")
	if !ok || field == "" || strings.ContainsAny(field, "/\"\\") {
		panic(fmt.Sprintf("memstore: partition key path %q is not a slash and a top-level field name, such as /tenantId", partitionKeyPath))
	}
	return &Store{parts: make(map[string]map[string]*Item), now: now, pkField: field}
}

// Item is a stored document.
type Item struct {
	PartitionKey string
	ID           string
	Body         []byte    // the JSON document as written
	ETag         string    // changes on every write
	Writes       int       // how many writes this document has seen; 1 for a document never changed
	ExpiresAt    time.Time // zero: never; set from the document's "ttl" field

	lsn    uint64 // the store's write sequence number of the last write: the change feed's order
	pkHash uint64 // hashKey(PartitionKey), set at the first write: the change feed's range
}

// CreateBatch implements idempotent.Store: it creates every document in
// partition pk, atomically, and returns the ETags of the documents it
// created, in the order of docs, as Cosmos DB's batch response reports
// them. It writes all of them, or none and returns a *StatusError for the
// operation (or the batch) that Cosmos DB would refuse (see the package
// documentation), or for the first operation whose id exists (409).
func (s *Store) CreateBatch(ctx context.Context, pk string, docs []idempotent.Document) ([]string, error) {
	return s.createBatch(ctx, opCreateDocuments, pk, docs)
}

// createBatch is CreateBatch; op names the caller in errors.
func (s *Store) createBatch(ctx context.Context, op, pk string, docs []idempotent.Document) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("memstore: %s %q: no documents to create", op, pk)
	}
	if err := s.failure(OpCreate, op, pk, ""); err != nil {
		return nil, err
	}
	fail := func(i int, p *problem) error {
		e := &StatusError{Op: op, PartitionKey: pk, Index: i, StatusCode: p.status, SubStatus: p.subStatus, Reason: p.reason}
		if i >= 0 {
			e.ID = docs[i].ID
		}
		return e
	}
	if len(docs) > MaxBatchOperations {
		return nil, fail(-1, badRequest("the batch has %d operations; the limit is %d", len(docs), MaxBatchOperations))
	}
	parsedDocs := make([]parsed, len(docs))
	for i, d := range docs {
		if !json.Valid(d.Body) {
			// azcosmos marshals the batch itself and fails before it
			// sends anything.
			return nil, fmt.Errorf("memstore: %s %q: document %d (id %q) is not valid JSON, so the SDK would send no batch", op, pk, i, d.ID)
		}
		p, err := parseDocument(s.pkField, pk, d)
		if err != nil {
			return nil, err
		}
		parsedDocs[i] = p
	}
	size := batchPayloadSize(docs)
	if size > MaxRequestBytes {
		return nil, fail(-1, &problem{status: http.StatusRequestEntityTooLarge,
			reason: fmt.Sprintf("the batch request is %d bytes; the limit is %d", size, MaxRequestBytes)})
	}
	seen := make(map[string]bool, len(docs))
	for i, p := range parsedDocs {
		if p.problem != nil {
			return nil, fail(i, p.problem)
		}
		if seen[docs[i].ID] {
			return nil, fail(i, badRequest("the batch has more than one operation on this id"))
		}
		seen[docs[i].ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range docs {
		if _, ok := s.live(pk, d.ID); ok {
			return nil, fail(i, &problem{status: http.StatusConflict, reason: "a document with this id exists in the partition"})
		}
	}
	part := s.parts[pk]
	if part == nil {
		part = make(map[string]*Item)
		s.parts[pk] = part
	}
	etags := make([]string, len(docs))
	for i, d := range docs {
		it := &Item{PartitionKey: pk, ID: d.ID}
		part[d.ID] = it // before the write, whose sweep drops empty partitions
		s.write(it, d.Body, parsedDocs[i].ttl)
		etags[i] = it.ETag
	}
	s.commitLag(pk)
	return etags, nil
}

// ReadDocument implements idempotent.DocumentStore. An id Cosmos DB does not
// accept gives a 400 *StatusError; a missing document a 404.
func (s *Store) ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error) {
	it, err := s.read(ctx, opReadDocument, pk, id)
	if err != nil {
		return nil, "", err
	}
	return it.Body, it.ETag, nil
}

// read returns a copy of the live document pk/id, or a *StatusError.
func (s *Store) read(ctx context.Context, op, pk, id string) (Item, error) {
	if err := ctx.Err(); err != nil {
		return Item{}, err
	}
	if p := checkID(id); p != nil {
		return Item{}, &StatusError{Op: op, PartitionKey: pk, ID: id, Index: -1, StatusCode: p.status, Reason: p.reason}
	}
	if err := s.failure(OpRead, op, pk, id); err != nil {
		return Item{}, err
	}
	it, ok := s.Get(pk, id)
	if !ok {
		return Item{}, &StatusError{Op: op, PartitionKey: pk, ID: id, Index: -1, StatusCode: http.StatusNotFound, Reason: "no such document"}
	}
	return it, nil
}

// ReplaceDocument implements idempotent.DocumentStore: it replaces d if its ETag
// is still ifMatch (an empty ifMatch replaces unconditionally). The new
// body is checked as a created document is (see the package documentation):
// a refused body gives a 400 or 413 *StatusError, a missing document a 404,
// a moved ETag a 412.
func (s *Store) ReplaceDocument(ctx context.Context, pk string, d idempotent.Document, ifMatch string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	fail := func(status int, reason string) error {
		return &StatusError{Op: opReplaceDocument, PartitionKey: pk, ID: d.ID, Index: -1, StatusCode: status, Reason: reason}
	}
	if p := checkID(d.ID); p != nil {
		return "", fail(p.status, p.reason)
	}
	if err := s.failure(OpReplace, opReplaceDocument, pk, d.ID); err != nil {
		return "", err
	}
	p, err := parseDocument(s.pkField, pk, d)
	if err != nil {
		return "", err
	}
	if p.problem != nil {
		e := fail(p.problem.status, p.problem.reason).(*StatusError)
		e.SubStatus = p.problem.subStatus
		return "", e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, d.ID)
	if !ok {
		return "", fail(http.StatusNotFound, "no such document")
	}
	if ifMatch != "" && it.ETag != ifMatch {
		return "", fail(http.StatusPreconditionFailed, fmt.Sprintf("ETag %s is not %s", it.ETag, ifMatch))
	}
	s.write(it, d.Body, p.ttl)
	s.commitLag(pk)
	return it.ETag, nil
}

// live returns the document pk/id unless it is absent or expired; expired
// documents are removed. s.mu must be held.
func (s *Store) live(pk, id string) (*Item, bool) {
	it, ok := s.parts[pk][id]
	if ok && !it.ExpiresAt.IsZero() && !s.now().Before(it.ExpiresAt) {
		s.remove(pk, id)
		s.unlog(it)
		return nil, false
	}
	return it, ok
}

// write stores body in it with a new ETag and its time to live: ttl, the
// document's "ttl" (nil: none), under the container's default (see
// SetDefaultTTL). s.mu must be held.
func (s *Store) write(it *Item, body []byte, ttl *int64) {
	s.etag++
	if it.lsn == 0 {
		it.pkHash = hashKey(it.PartitionKey)
	} else {
		s.unlog(it) // its earlier write is superseded
	}
	it.lsn = s.etag // the change feed (changefeed.go) orders by it
	s.writes = append(s.writes, it)
	it.Body = append([]byte(nil), body...)
	it.ETag = strconv.FormatUint(s.etag, 16)
	it.Writes++
	it.ExpiresAt = time.Time{}
	if secs := s.expiry(ttl); secs > 0 {
		it.ExpiresAt = s.now().Add(time.Duration(secs) * time.Second)
	}
	s.recordVersion(it)
	if s.sinceSweep++; s.sinceSweep > s.swept {
		s.sweepExpired()
	}
}

// Get returns a copy of the document pk/id.
func (s *Store) Get(pk, id string) (Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, id)
	if !ok {
		return Item{}, false
	}
	c := *it
	c.Body = append([]byte(nil), it.Body...)
	return c, true
}

// Delete removes the document pk/id, as a delete in Cosmos DB does (by an
// operator: no component of the project deletes documents), and reports
// whether it was there.
func (s *Store) Delete(pk, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.live(pk, id)
	if !ok {
		return false
	}
	s.remove(pk, id)
	s.unlog(it)
	s.forgetVersions(pk, id)
	return true
}

// remove drops the document pk/id from the store, and the partition with
// its last document, so that the store holds nothing for a partition whose
// documents have all expired or been deleted. s.mu must be held.
func (s *Store) remove(pk, id string) {
	part := s.parts[pk]
	delete(part, id)
	if len(part) == 0 {
		delete(s.parts, pk)
	}
}

// Items returns a copy of every live document, ordered by partition key and
// id.
func (s *Store) Items() []Item {
	s.mu.Lock()
	var out []Item
	for pk, part := range s.parts {
		for id := range part {
			it, ok := s.live(pk, id)
			if !ok {
				continue
			}
			c := *it
			c.Body = append([]byte(nil), it.Body...)
			out = append(out, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].PartitionKey != out[j].PartitionKey {
			return out[i].PartitionKey < out[j].PartitionKey
		}
		return out[i].ID < out[j].ID
	})
	return out
}
