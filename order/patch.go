package order

import (
	"context"
	"strconv"
	"time"
)

// Patch is a conditional partial update of one document, as Cosmos DB's
// patch with a filter predicate makes it: the conditions are checked and the
// operations applied atomically, on the server, in one round trip.
type Patch struct {
	// If lists the conditions the stored document must meet, all of them.
	// If one is not met the patch writes nothing and fails with an error
	// matching ErrPreconditionFailed. A condition on a field the document
	// lacks is not met (in Cosmos DB SQL a comparison with an undefined
	// value is undefined, which a filter does not pass).
	If []Below
	// Ops are applied in order; at most MaxPatchOps.
	Ops []PatchOp
}

// Below is a patch condition: the number at Path (a top-level field, such
// as "/version") is below Value.
type Below struct {
	Path  string
	Value int64
}

// PatchOp is one operation of a Patch. Path is a JSON pointer ("/status",
// "/statusHashes/7") whose parent must exist as an object.
type PatchOp struct {
	Op    string // PatchSet or PatchIncrement
	Path  string
	Value any // PatchSet: the value, JSON-encoded as encoding/json does; PatchIncrement: an int64
}

// Patch operation kinds, named as Cosmos DB names them.
const (
	// PatchSet sets the value at the path, adding the field if it is not
	// there.
	PatchSet = "set"
	// PatchIncrement adds the int64 value to the number at the path, or
	// sets it if the field is not there.
	PatchIncrement = "incr"
)

// MaxPatchOps is the most operations Cosmos DB accepts in one patch.
const MaxPatchOps = 10

// Patcher is implemented by a DocumentStore that patches documents
// conditionally in one round trip. The Processor applies a status change
// with it (see WithDocuments); without it, a status change reads the order
// and replaces it.
type Patcher interface {
	// PatchDocument applies p to document id in partition pk if it meets
	// p.If and returns its new ETag. Otherwise it writes nothing and
	// returns an error matching ErrPreconditionFailed, or ErrNotFound if
	// the document is not there.
	PatchDocument(ctx context.Context, pk, id string, p Patch) (etag string, err error)
}

// statusPatch is the patch that applies change c (content hash) to its
// order in one round trip: if the stored version is below c's and the
// document records fewer than MaxStatusHashes status hashes, set the
// status, version and change time, record the hash under the version and
// count it. A document the patch cannot keep correct (one that records
// MaxStatusHashes hashes already, whose lowest must be forgotten, or one
// written before the count existed) fails the condition like a stale
// change, and is read and replaced instead.
func statusPatch(c *StatusChange, hash string) Patch {
	return Patch{
		If: []Below{{Path: "/version", Value: c.Version}, {Path: "/statusHashCount", Value: MaxStatusHashes}},
		Ops: []PatchOp{
			{Op: PatchSet, Path: "/status", Value: c.Status},
			{Op: PatchSet, Path: "/version", Value: c.Version},
			{Op: PatchSet, Path: "/statusChangedAt", Value: c.ChangedAt.UTC().Format(time.RFC3339Nano)},
			{Op: PatchSet, Path: "/statusHashes/" + strconv.FormatInt(c.Version, 10), Value: hash},
			{Op: PatchIncrement, Path: "/statusHashCount", Value: int64(1)},
		},
	}
}
