package idempotent

import "context"

// DocumentStore is the document-level storage that the patterns beyond the
// create-or-conflict path need: ETag-conditioned replaces for the
// in-progress/completed records of side effects and for updates.
// Implementations must be safe for concurrent use, and their reads must
// see their own writes, as Store's (see Store): a replace based on a read
// that lagged fails with 412 and is decided again, but a read that finds a
// record missing while it exists can take the wrong branch.
type DocumentStore interface {
	Store
	// ReplaceDocument replaces document d.ID in partition pk if its ETag
	// is still ifMatch and returns the new ETag; otherwise it returns an
	// error matching ErrPreconditionFailed (or ErrNotFound if it is gone).
	ReplaceDocument(ctx context.Context, pk string, d Document, ifMatch string) (etag string, err error)
}

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
// conditionally in one round trip.
type Patcher interface {
	// PatchDocument applies p to document id in partition pk if it meets
	// p.If and returns its new ETag. Otherwise it writes nothing and
	// returns an error matching ErrPreconditionFailed, or ErrNotFound if
	// the document is not there.
	PatchDocument(ctx context.Context, pk, id string, p Patch) (etag string, err error)
}
