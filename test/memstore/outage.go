package memstore

import (
	"context"
	"net/http"
)

// Op is a set of the store's operations, which an Outage fails.
type Op uint8

// The operations an Outage can fail. A Session's calls are the Store's.
const (
	OpCreate  Op = 1 << iota // CreateBatch: the atomic create of a batch
	OpReplace                // ReplaceDocument
	OpPatch                  // PatchDocument
	OpRead                   // ReadDocument, ReadPartition and Ping: the point reads and partition queries
	OpDelete                 // Probe's delete of its missing document (Store.Delete, the test's own hand, never fails)

	// OpWrites is every write: what a store that answers reads but
	// refuses writes fails.
	OpWrites = OpCreate | OpReplace | OpPatch | OpDelete
	// OpAll is every operation an Outage can fail.
	OpAll = OpWrites | OpRead
)

// Sub-status codes Cosmos DB sends with the statuses of the outages below.
const (
	// SubStatusPartitionKeyQuotaExceeded comes with a 403 when a write
	// would take a logical partition past its storage limit (20 GB).
	SubStatusPartitionKeyQuotaExceeded = 1014
	// SubStatusRBACBlocked comes with a 403 when the identity's data-plane
	// role does not grant the operation (a role cut to Data Reader).
	SubStatusRBACBlocked = 5301
	// SubStatusRUBudgetExceeded comes with a 429 when a partition has used
	// its request units for the second.
	SubStatusRUBudgetExceeded = 3200
)

// Outage is a failure of the store that lasts until it is ended: every
// call of Ops on a partition that PartitionKeys selects fails with
// StatusCode and SubStatus, before it reads or writes anything, as a
// *StatusError. It stands for a failure of Cosmos DB that a circuit
// breaker's cheap probe (a point read, Ping) need not see: the
// constructors below name the real ones. Probe, a point read and a delete,
// sees those that fail deletes (OpDelete, in OpWrites) of its partition
// key value. Set it with Store.SetOutage.
//
// A 429 or 503 matches idempotent.ErrTransient (Cosmos DB's retryable
// statuses, as cosmosstore classifies them); a 403 matches no sentinel of
// package idempotent: it is the operator's to fix, and package idempotent
// retries it as a dependency failure (idempotent.StoreFailure).
type Outage struct {
	// Ops are the operations that fail; zero means OpWrites.
	Ops Op
	// PartitionKeys, if set, selects the partition key values whose calls
	// fail; nil selects every value. A physical partition holds a range
	// of the hash space (see HashRange); a hot logical partition is one
	// value.
	PartitionKeys func(pk string) bool
	// StatusCode is the HTTP status of the failed calls; zero means 503
	// Service Unavailable.
	StatusCode int
	// SubStatus is the Cosmos DB sub-status sent with it, or 0.
	SubStatus int
	// Reason says what failed, for people.
	Reason string
}

// WriteRegionOutage stands for the loss of the write region of an account
// with one write region and read regions elsewhere: the SDK serves reads
// from a read region, and every write answers 503 Service Unavailable
// until the service fails the account over (service-managed failover, if
// enabled, takes minutes to an hour). A breaker that probes with a read
// sees nothing.
func WriteRegionOutage() Outage {
	return Outage{Ops: OpWrites, StatusCode: http.StatusServiceUnavailable,
		Reason: "the account's write region is unavailable; reads are served by a read region"}
}

// ReadOnlyRole stands for the worker's identity whose data-plane role was
// cut to Cosmos DB Built-in Data Reader (a role assignment changed or
// removed by a deployment): reads succeed, every write answers 403
// Forbidden with sub-status 5301.
func ReadOnlyRole() Outage {
	return Outage{Ops: OpWrites, StatusCode: http.StatusForbidden, SubStatus: SubStatusRBACBlocked,
		Reason: "Request blocked by Auth: the principal's role grants reads only (Cosmos DB Built-in Data Reader)"}
}

// StorageQuota stands for a container that reached its storage quota:
// reads, replaces and patches that do not grow it succeed, and every create
// answers 403 Forbidden, as Cosmos DB answers a POST when a resource quota
// is reached. With partitionKeys set it is one logical partition at its
// 20 GB limit (sub-status 1014) instead.
func StorageQuota(partitionKeys func(pk string) bool) Outage {
	o := Outage{Ops: OpCreate, PartitionKeys: partitionKeys, StatusCode: http.StatusForbidden,
		Reason: "the container reached its storage quota"}
	if partitionKeys != nil {
		o.SubStatus = SubStatusPartitionKeyQuotaExceeded
		o.Reason = "Partition key reached maximum size of 20 GB"
	}
	return o
}

// HotPartition stands for a physical partition throttled for longer than
// the SDK's retries last (a hot partition key range whose writes use up its
// share of the provisioned throughput): every write to the partition key
// values partitionKeys selects answers 429 Too Many Requests with
// sub-status 3200, while reads and every other partition are served.
func HotPartition(partitionKeys func(pk string) bool) Outage {
	return Outage{Ops: OpWrites, PartitionKeys: partitionKeys, StatusCode: http.StatusTooManyRequests, SubStatus: SubStatusRUBudgetExceeded,
		Reason: "Request rate is large: the partition's request units are used up"}
}

// HashRange returns a selector of the partition key values that physical
// partition i of n holds: the i-th of n equal ranges of a hash space, as
// Cosmos DB gives each physical partition a range of the hash of the
// partition key value, so that about one value in n falls in each, however
// alike the values are. One partition of four down is HashRange(0, 4) in an
// Outage's PartitionKeys. It panics unless 0 <= i < n, a mistake of the
// test.
func HashRange(i, n int) func(pk string) bool {
	if n < 1 || i < 0 || i >= n {
		panic("memstore: HashRange wants 0 <= i < n")
	}
	const space = uint64(1) << 32
	lo, hi := space*uint64(i)/uint64(n), space*uint64(i+1)/uint64(n)
	return func(pk string) bool {
		h := mix32(uint32(hashKey(pk)))
		return uint64(h) >= lo && uint64(h) < hi
	}
}

// mix32 is MurmurHash3's finalizer: it spreads hashKey's FNV-1a value,
// whose high bits barely change between keys that differ in their last
// characters (ord-001, ord-002), over the whole space.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// SetOutage starts o, replacing the outage in progress if there is one,
// and returns the function that ends it. Calls already past their check
// are not affected. It is safe for concurrent use.
func (s *Store) SetOutage(o Outage) (end func()) {
	if o.Ops == 0 {
		o.Ops = OpWrites
	}
	if o.StatusCode == 0 {
		o.StatusCode = http.StatusServiceUnavailable
	}
	p := &o
	s.outage.Store(p)
	return func() { s.outage.CompareAndSwap(p, nil) }
}

// EndOutage ends the outage in progress, if there is one. It is safe for
// concurrent use.
func (s *Store) EndOutage() { s.outage.Store(nil) }

// failure returns the outage's error for a call of op (opName, as
// StatusError.Op names it) on pk/id, or nil.
func (s *Store) failure(op Op, opName, pk, id string) error {
	o := s.outage.Load()
	if o == nil || o.Ops&op == 0 || o.PartitionKeys != nil && !o.PartitionKeys(pk) {
		return nil
	}
	return &StatusError{Op: opName, PartitionKey: pk, ID: id, Index: -1, StatusCode: o.StatusCode, SubStatus: o.SubStatus, Reason: o.Reason}
}

// pingKey is the partition key value and id of the document Ping reads, as
// cosmosstore's Ping reads one that does not exist.
const pingKey = "memstore-ping"

// Ping is the cheap probe of a reader, as cosmosstore's: a point read of a
// document that does not exist. It fails when ctx has ended, or when an
// outage fails reads of its partition; otherwise it succeeds, as an
// in-memory store is always there. A circuit breaker in front of a worker
// that writes probes with Probe. It is safe for concurrent use.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.failure(OpRead, opReadDocument, pingKey, pingKey)
}

// Probe is the circuit breaker's probe of a worker that writes, as
// cosmosstore's: Ping's point read, then a delete of the same document that
// does not exist, which writes nothing and adds nothing to the change
// feed. It fails as Ping does when ctx has ended or an outage fails reads
// of its partition, and otherwise when an outage fails deletes of its
// partition: WriteRegionOutage and ReadOnlyRole fail it (Ping passes
// them), as does HotPartition or any outage of OpWrites whose
// PartitionKeys select its partition key value. StorageQuota does not (a
// delete is allowed at a quota), nor does an outage of a key range that
// spares its value: Probe addresses one partition key value, as
// cosmosstore's does. If a test created the document, Probe deletes it and
// succeeds. It is safe for concurrent use.
func (s *Store) Probe(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.failure(OpDelete, opProbeDelete, pingKey, pingKey); err != nil {
		return err
	}
	s.Delete(pingKey, pingKey)
	return nil
}
