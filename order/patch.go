package order

import (
	"strconv"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// statusPatch is the patch that applies change c (content hash) to its
// order in one round trip, as the versioned-state piece takes it (which
// adds the condition that the stored version is below c's and the set of
// the version): if the document records fewer than MaxStatusHashes status
// hashes, set the status and change time, record the hash under the
// version and count it. A document the patch cannot keep correct (one that
// records MaxStatusHashes hashes already, whose lowest must be forgotten,
// or one written before the count existed) fails the condition like a
// stale change, and is read and replaced instead.
func statusPatch(c *StatusChange, hash string) idempotent.Patch {
	return idempotent.Patch{
		If: []idempotent.Below{{Path: "/statusHashCount", Value: MaxStatusHashes}},
		Ops: []idempotent.PatchOp{
			{Op: idempotent.PatchSet, Path: "/status", Value: c.Status},
			{Op: idempotent.PatchSet, Path: "/statusChangedAt", Value: c.ChangedAt.UTC().Format(time.RFC3339Nano)},
			{Op: idempotent.PatchSet, Path: "/statusHashes/" + strconv.FormatInt(c.Version, 10), Value: hash},
			{Op: idempotent.PatchIncrement, Path: "/statusHashCount", Value: int64(1)},
		},
	}
}
