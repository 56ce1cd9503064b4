package idempotent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Versioned is the versioned-state technique: it applies a change of
// absolute state to a document under a version guard. Build one per
// document type with NewVersioned, and call Apply from the handler, after
// decoding and validating the change:
//
//	v := idempotent.NewVersioned[*account](store, idempotent.VersionedConfig{
//		MissingReason: "AccountNotYetOpened", MissingRetryAfter: 5 * time.Second,
//	})
//	r := v.Apply(ctx, m, idempotent.VersionedChange[*account]{
//		PartitionKey: c.AccountID, ID: c.AccountID, Version: c.Version, Hash: c.Hash(),
//		What:   "limit " + strconv.Itoa(c.Limit),
//		Patch:  idempotent.Patch{Ops: []idempotent.PatchOp{{Op: idempotent.PatchSet, Path: "/limit", Value: c.Limit}}},
//		Decode: decodeAccount,
//		Apply:  func(a *account) ([]byte, error) { a.Limit, a.Version = c.Limit, c.Version; return json.Marshal(a) },
//	})
//
// It serves messages that carry absolute state (event-carried state
// transfer: "the status is now shipped, version 7") rather than a command.
// Applying absolute state twice leaves the same state, so the only danger
// is an older change overwriting a newer one: each change carries a version
// that grows with every change of the entity, and the stored document is
// written only if its version is below the change's. A newer change is
// Applied, an older or equal one is Stale (nothing written), and an equal
// version whose content differs from what was applied under it is
// Mismatch: the version was reused for other content. A change whose
// document does not exist yet is Transient with RetryAfter.
//
// # The seam
//
// The caller keeps its schema: its document type implements
// VersionedDocument (the stored version, and the content hash applied under
// a version, if it records one), and each change says how to decode the
// stored body, how to apply itself to it, and, for stores that patch, the
// same mutation as patch operations. The piece owns the store calls and the
// decision: the guard, the retries, and Applied, Stale, Mismatch or
// Transient. Versioned is generic over the caller's document type so that
// Apply receives what Decode returned without a type assertion.
//
// # Round trips
//
// A first delivery with a Patcher store costs one: a patch conditioned on
// the stored version being below the change's (plus the change's own
// conditions). A patch that fails its condition carries no document, so the
// piece then reads, decides and, when the change is newer after all (the
// change's own condition failed), replaces. A redelivery, most likely
// applied already, reads first: one round trip when it is Stale, two
// (read, ETag-conditioned replace) when it applies.
//
// # Concurrency and idempotency
//
// A Versioned is safe for concurrent use: it holds only its configuration,
// and concurrent changes of one document meet in the store's conditional
// writes (the patch's condition, the replace's ETag). A replace that finds
// the document changed since its read reads and decides again, at most
// VersionedConfig.Attempts times, then returns Transient with
// ReasonConcurrentUpdate. Each version is applied at most once, and the
// stored version never decreases; applying a change again returns Stale
// and writes nothing, so any number of deliveries, in any order, leave the
// state of the highest version applied.
type Versioned[D VersionedDocument] struct {
	store DocumentStore
	cfg   VersionedConfig
}

// VersionedDocument is the caller's decoded document, as the versioned
// decision needs it.
type VersionedDocument interface {
	// StateVersion returns the version of the state the document holds.
	StateVersion() int64
	// AppliedHash returns the content hash of the change applied as
	// version v, and false if the document does not record it (a version
	// skipped because a newer one came first, or one applied too long ago
	// to be still recorded): such a change is Stale, since nothing can be
	// compared.
	AppliedHash(v int64) (hash string, ok bool)
}

// VersionedConfig configures a Versioned. The zero value works.
type VersionedConfig struct {
	// VersionPath is the JSON pointer of the stored version, a top-level
	// number; empty means "/version". The patch is conditioned on it being
	// below the change's version, and sets it.
	VersionPath string
	// ReusedReason is the reason of a Mismatch; empty means
	// ReasonIDReused.
	ReusedReason string
	// MissingReason and MissingRetryAfter make the result of a change whose
	// document does not exist yet (it arrived before the message that
	// creates it): Transient, retried after at least MissingRetryAfter.
	// Empty and zero mean ReasonNotYetCreated and DefaultMissingRetryAfter.
	MissingReason     string
	MissingRetryAfter time.Duration
	// Attempts bounds the read-and-replace rounds of one delivery when
	// concurrent changes keep moving the ETag; zero means 3.
	Attempts int
	// Failure turns a store error of operation op (or a Decode or Apply
	// error) into a result; nil means StoreFailure.
	Failure func(key, op string, err error) Result
}

// ReasonNotYetCreated is the default reason of a change whose document does
// not exist yet.
const ReasonNotYetCreated = "NotYetCreated"

// DefaultMissingRetryAfter is how long a change whose document does not
// exist yet waits at least by default: the message that creates it is
// usually a few deliveries behind.
const DefaultMissingRetryAfter = 5 * time.Second

// VersionedChange is one change of absolute state to one document.
type VersionedChange[D VersionedDocument] struct {
	// PartitionKey and ID name the document that holds the state.
	PartitionKey, ID string
	// Version is the change's version: it must grow by at least one with
	// every change of the entity, and an equal version must carry equal
	// content.
	Version int64
	// Hash is the content hash of the change, compared with the one
	// applied under an equal version.
	Hash string
	// What names the change in descriptions ("status shipped").
	What string
	// Patch is the change as patch operations, for a store that is a
	// Patcher, without the version: the piece prepends the condition
	// Below{VersionPath, Version} and appends the set of the version, so
	// it holds at most MaxPatchOps-1 operations. Its own conditions name
	// documents the patch cannot keep correct; one that fails them is read
	// and replaced instead. No Ops, or too many: no patch, every delivery
	// reads and replaces.
	Patch Patch
	// Decode decodes a stored body. An error is a Failure.
	Decode func(body []byte) (D, error)
	// Apply returns the body of d with the change applied: its state, the
	// version set to Version and, if the document records hashes, Hash
	// recorded under it. d is what Decode returned.
	Apply func(d D) ([]byte, error)
}

// NewVersioned returns the Versioned that applies changes to documents of
// type D in store.
func NewVersioned[D VersionedDocument](store DocumentStore, cfg VersionedConfig) *Versioned[D] {
	cfg.VersionPath = nonEmpty(cfg.VersionPath, "/version")
	cfg.ReusedReason = nonEmpty(cfg.ReusedReason, ReasonIDReused)
	cfg.MissingReason = nonEmpty(cfg.MissingReason, ReasonNotYetCreated)
	if cfg.MissingRetryAfter <= 0 {
		cfg.MissingRetryAfter = DefaultMissingRetryAfter
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Failure == nil {
		cfg.Failure = StoreFailure
	}
	return &Versioned[D]{store: store, cfg: cfg}
}

// Apply applies change c, delivered as m, if it is newer than the stored
// version. The result's Key is c.ID.
func (v *Versioned[D]) Apply(ctx context.Context, m Message, c VersionedChange[D]) Result {
	// A first delivery is most likely new: apply it in one conditional
	// patch. A redelivery is most likely applied already: it reads first.
	if pt, ok := v.store.(Patcher); ok && len(c.Patch.Ops) > 0 && len(c.Patch.Ops) < MaxPatchOps && !(RedeliveriesFirst{}).ReadFirst(m) {
		_, err := pt.PatchDocument(ctx, c.PartitionKey, c.ID, v.guarded(c))
		switch {
		case err == nil:
			return v.applied(c)
		case errors.Is(err, ErrNotFound):
			return v.missing(c, err)
		case !errors.Is(err, ErrPreconditionFailed):
			return v.cfg.Failure(c.ID, "patch", err)
		}
		// The condition failed: stale, reused, or a document the patch
		// cannot keep. The read below tells them apart.
	}
	for range v.cfg.Attempts {
		body, etag, err := v.store.ReadDocument(ctx, c.PartitionKey, c.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			return v.missing(c, err)
		case err != nil:
			return v.cfg.Failure(c.ID, "read", err)
		}
		d, err := c.Decode(body)
		if err != nil {
			return v.cfg.Failure(c.ID, "read", err)
		}
		if stored := d.StateVersion(); stored >= c.Version {
			return v.staleOrReused(c, stored, d)
		}
		next, err := c.Apply(d)
		if err != nil {
			return v.cfg.Failure(c.ID, "encode", err)
		}
		_, err = v.store.ReplaceDocument(ctx, c.PartitionKey, Document{ID: c.ID, Body: next}, etag)
		switch {
		case err == nil:
			return v.applied(c)
		case errors.Is(err, ErrPreconditionFailed):
			continue // changed since the read: read again and decide again
		case errors.Is(err, ErrNotFound):
			return v.missing(c, err)
		default:
			return v.cfg.Failure(c.ID, "replace", err)
		}
	}
	return Result{Outcome: Transient, Key: c.ID, Reason: ReasonConcurrentUpdate,
		Description: fmt.Sprintf("%s changed during %d attempts to apply version %d (%s)", c.ID, v.cfg.Attempts, c.Version, c.What)}
}

// guarded returns c's patch with the version's condition and set.
func (v *Versioned[D]) guarded(c VersionedChange[D]) Patch {
	p := Patch{
		If:  make([]Below, 0, 1+len(c.Patch.If)),
		Ops: make([]PatchOp, 0, len(c.Patch.Ops)+1),
	}
	p.If = append(append(p.If, Below{Path: v.cfg.VersionPath, Value: c.Version}), c.Patch.If...)
	p.Ops = append(append(p.Ops, c.Patch.Ops...), PatchOp{Op: PatchSet, Path: v.cfg.VersionPath, Value: c.Version})
	return p
}

func (v *Versioned[D]) applied(c VersionedChange[D]) Result {
	return Result{Outcome: Applied, Key: c.ID, Description: fmt.Sprintf("version %d applied: %s", c.Version, c.What)}
}

// missing is the result of a change whose document does not exist yet:
// time, not a dependency, resolves it.
func (v *Versioned[D]) missing(c VersionedChange[D], err error) Result {
	return Result{Outcome: Transient, Key: c.ID, Reason: v.cfg.MissingReason,
		Description: fmt.Sprintf("version %d (%s) arrived before %s exists; retrying", c.Version, c.What, c.ID), Err: err,
		RetryAfter: v.cfg.MissingRetryAfter}
}

// staleOrReused decides a change that is not newer than the stored
// version: Stale when the content applied under its version is the same or
// is not recorded, Mismatch when it differs.
func (v *Versioned[D]) staleOrReused(c VersionedChange[D], stored int64, d D) Result {
	applied, ok := d.AppliedHash(c.Version)
	switch {
	case !ok:
		return Result{Outcome: Stale, Key: c.ID,
			Description: fmt.Sprintf("stored version %d is newer than version %d (%s), whose content was never applied or is no longer recorded: nothing to do",
				stored, c.Version, c.What)}
	case applied == c.Hash:
		return Result{Outcome: Stale, Key: c.ID,
			Description: fmt.Sprintf("version %d (%s) was applied already with the same content (stored version %d): nothing to do", c.Version, c.What, stored)}
	}
	return Result{Outcome: Mismatch, Key: c.ID, Reason: v.cfg.ReusedReason,
		Description: fmt.Sprintf("version %d of %s was applied with content hash %s; this change (%s) has content hash %s",
			c.Version, c.ID, applied, c.What, c.Hash)}
}
