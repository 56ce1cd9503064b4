package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
)

// Document types of the relay's documents.
const (
	TypeLease    = "lease"
	TypeManifest = "lease-manifest"
)

// LeaseID returns the id of the lease document of a relay's feed range; it
// is also the document's partition key value. It contains ':', so a
// container shared with documents whose partition key values refuse ':'
// never holds a lease in one of their partitions.
func LeaseID(name, feedRange string) string { return "lease:" + name + ":" + feedRange }

// ManifestID returns the id (and partition key value) of the document that
// fixes a relay's feed ranges.
func ManifestID(name string) string { return "lease:" + name }

// Lease is the stored form of a feed range's lease. The stored document
// also holds its id under the field of Options.LeasePartitionKeyPath, unless
// that is /id: its partition key value is its id.
type Lease struct {
	ID           string    `json:"id"`   // LeaseID(Relay, FeedRange)
	Type         string    `json:"type"` // TypeLease
	Relay        string    `json:"relay"`
	FeedRange    string    `json:"feedRange"`
	Owner        string    `json:"owner,omitempty"` // empty: free
	ExpiresAt    time.Time `json:"expiresAt"`       // the owner's claim ends then unless renewed
	Continuation string    `json:"continuation,omitempty"`
	// CheckpointedAt is when Continuation was last written.
	CheckpointedAt time.Time `json:"checkpointedAt"`
}

// Manifest fixes the feed ranges a relay leases, the first time it runs.
// Its stored document holds its id as a Lease's does.
type Manifest struct {
	ID         string    `json:"id"`   // ManifestID(Relay)
	Type       string    `json:"type"` // TypeManifest
	Relay      string    `json:"relay"`
	FeedRanges []string  `json:"feedRanges"`
	CreatedAt  time.Time `json:"createdAt"`
}

// leaseFields are the fields of the lease and manifest documents, which
// the partition key field must not be.
var leaseFields = []string{"type", "relay", "feedRange", "owner", "expiresAt", "continuation", "checkpointedAt", "feedRanges", "createdAt"}

// leaseKeyField returns the top-level field of a leases container's
// partition key path, or an error naming what is wrong with path.
func leaseKeyField(path string) (string, error) {
	field, ok := strings.CutPrefix(path, "/")
	switch {
	case !ok || field == "" || strings.ContainsAny(field, "/[]\"") || field[0] == '_':
		return "", fmt.Errorf("relay: lease partition key path %q: want a top-level field such as %q", path, DefaultLeasePartitionKeyPath)
	case slices.Contains(leaseFields, field):
		return "", fmt.Errorf("relay: lease partition key path %q is a field of the lease documents themselves", path)
	}
	return field, nil
}

// document returns the stored body of the lease or manifest v, whose id is
// id: v's JSON with id also under the leases container's partition key
// field.
func (r *Relay) document(id string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil || r.leaseKey == "id" {
		return body, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	fields[r.leaseKey], err = json.Marshal(id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// lease is a lease this instance holds.
type lease struct {
	doc       Lease
	etag      string
	renewAt   time.Time // renew once the clock passes it
	published string    // the continuation up to which everything was published
	// unsaved reports events published since the lease document last
	// saved published: a checkpoint is due at savedAt+CheckpointInterval.
	unsaved bool
	savedAt time.Time // when published was last saved; zero: never by this instance
}

// errLost reports that another instance holds the lease.
var errLost = errors.New("lease taken by another relay instance")

func (r *Relay) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.o.CallTimeout)
}

// loadManifest reads the relay's manifest or, the first time, creates it
// with the feed's current ranges.
func (r *Relay) loadManifest(ctx context.Context) error {
	id := ManifestID(r.o.Name)
	var m Manifest
	for attempt := 0; attempt < 2; attempt++ {
		cctx, cancel := r.call(ctx)
		body, _, err := r.leases.ReadDocument(cctx, id, id)
		cancel()
		if err == nil {
			if err := json.Unmarshal(body, &m); err != nil || len(m.FeedRanges) == 0 {
				return fmt.Errorf("manifest %s is not a relay manifest with feed ranges (%v)", id, err)
			}
			r.ranges = m.FeedRanges
			return nil
		}
		if !errors.Is(err, idempotent.ErrNotFound) {
			return fmt.Errorf("read manifest: %w", err)
		}
		cctx, cancel = r.call(ctx)
		ranges, err := r.feed.FeedRanges(cctx)
		cancel()
		if err != nil {
			return fmt.Errorf("read the feed ranges: %w", err)
		}
		if len(ranges) == 0 {
			return errors.New("the change feed has no feed ranges")
		}
		for _, fr := range ranges {
			if err := checkRange(fr); err != nil {
				return err
			}
		}
		m = Manifest{ID: id, Type: TypeManifest, Relay: r.o.Name, FeedRanges: ranges, CreatedAt: r.o.Now().UTC()}
		body, err = r.document(id, m)
		if err != nil {
			return err
		}
		cctx, cancel = r.call(ctx)
		_, err = r.leases.CreateBatch(cctx, id, []idempotent.Document{{ID: id, Body: body}})
		cancel()
		switch {
		case err == nil:
			r.ranges = ranges
			r.log.Info("relay manifest created", "feed_ranges", len(ranges))
			return nil
		case !errors.Is(err, idempotent.ErrAlreadyExists):
			return fmt.Errorf("create manifest: %w", err)
		}
		// Another instance created it first: read theirs.
	}
	return fmt.Errorf("manifest %s neither readable nor creatable", id)
}

// checkRange refuses a feed range that would make an illegal lease id.
func checkRange(fr string) error {
	if fr == "" || len(fr) > 128 {
		return fmt.Errorf("feed range %q is not 1 to 128 characters", fr)
	}
	for i := 0; i < len(fr); i++ {
		if !idChar(fr[i]) {
			return fmt.Errorf("feed range %q: character %q is not one of A-Z a-z 0-9 . _ -", fr, fr[i])
		}
	}
	return nil
}

// readLease returns the lease document of fr and its ETag, creating it free
// when it does not exist.
func (r *Relay) readLease(ctx context.Context, fr string) (Lease, string, error) {
	id := LeaseID(r.o.Name, fr)
	for attempt := 0; attempt < 2; attempt++ {
		cctx, cancel := r.call(ctx)
		body, etag, err := r.leases.ReadDocument(cctx, id, id)
		cancel()
		if err == nil {
			var l Lease
			if err := json.Unmarshal(body, &l); err != nil || l.Type != TypeLease || l.ID != id {
				return Lease{}, "", fmt.Errorf("document %s is not a lease (%v)", id, err)
			}
			return l, etag, nil
		}
		if !errors.Is(err, idempotent.ErrNotFound) {
			return Lease{}, "", fmt.Errorf("read lease: %w", err)
		}
		free := Lease{ID: id, Type: TypeLease, Relay: r.o.Name, FeedRange: fr}
		body, err = r.document(id, free)
		if err != nil {
			return Lease{}, "", err
		}
		cctx, cancel = r.call(ctx)
		_, err = r.leases.CreateBatch(cctx, id, []idempotent.Document{{ID: id, Body: body}})
		cancel()
		if err != nil && !errors.Is(err, idempotent.ErrAlreadyExists) {
			return Lease{}, "", fmt.Errorf("create lease: %w", err)
		}
	}
	return Lease{}, "", fmt.Errorf("lease %s neither readable nor creatable", id)
}

// acquire takes the lease of fr if it is free, expired or this instance's.
// It returns nil, nil when another instance holds it.
func (r *Relay) acquire(ctx context.Context, fr string) (*lease, error) {
	doc, etag, err := r.readLease(ctx, fr)
	if err != nil {
		return nil, err
	}
	now := r.o.Now()
	if doc.Owner != "" && doc.Owner != r.o.Owner && now.Before(doc.ExpiresAt) {
		return nil, nil // held by another instance
	}
	previous := doc.Owner
	if etag == "" && !r.unfence {
		r.unfence = true
		r.log.Warn("the lease store returned no ETag (an emulator such as cosmium): leases are not fenced, so run a single relay instance; Cosmos DB and memstore fence them")
	}
	l := &lease{doc: doc, etag: etag, published: doc.Continuation}
	if err := r.write(ctx, l, func(d *Lease) {
		d.Owner = r.o.Owner
		d.ExpiresAt = now.Add(r.o.LeaseDuration).UTC()
	}); err != nil {
		if errors.Is(err, errLost) {
			return nil, nil // another instance acquired it first
		}
		return nil, err
	}
	l.renewAt = now.Add(r.o.LeaseDuration / 3)
	r.acquired.Add(1)
	reclaimed := previous != "" && previous != r.o.Owner
	if reclaimed {
		r.reclaimed.Add(1)
	}
	if r.o.Hooks.Acquired != nil {
		r.o.Hooks.Acquired(fr, previous, reclaimed)
	}
	r.log.Info("lease acquired", "feed_range", fr, "previous_owner", previous, "expired_at", doc.ExpiresAt, "continuation_set", doc.Continuation != "")
	return l, nil
}

// renew extends the lease of fr and saves its published continuation. A
// lease another instance took is dropped; one that could not be renewed
// and has expired by this instance's clock is dropped too.
func (r *Relay) renew(ctx context.Context, fr string, l *lease) error {
	now := r.o.Now()
	saves := l.doc.Continuation != l.published
	err := r.write(ctx, l, func(d *Lease) {
		d.ExpiresAt = now.Add(r.o.LeaseDuration).UTC()
		if saves {
			d.Continuation = l.published
			d.CheckpointedAt = now.UTC()
		}
	})
	switch {
	case err == nil:
		l.renewAt = now.Add(r.o.LeaseDuration / 3)
		if saves && l.unsaved {
			l.unsaved, l.savedAt = false, now // the renewal was the checkpoint
		}
		return nil
	case errors.Is(err, errLost):
		r.drop(fr, "renew")
		return err
	case !r.o.Now().Before(l.doc.ExpiresAt):
		r.drop(fr, "renewal failed until the lease expired")
	}
	return fmt.Errorf("renew lease: %w", err)
}

// checkpoint saves l's published continuation in its lease. The caller
// has published every event before it.
func (r *Relay) checkpoint(ctx context.Context, fr string, l *lease) error {
	now := r.o.Now()
	err := r.write(ctx, l, func(d *Lease) {
		d.Continuation = l.published
		d.CheckpointedAt = now.UTC()
	})
	switch {
	case err == nil:
		r.checkpoints.Add(1)
		l.unsaved, l.savedAt = false, now
		return nil
	case errors.Is(err, errLost):
		r.drop(fr, "checkpoint")
		return err
	}
	// The page stays published; its continuation is saved by the next
	// checkpoint (due at the next poll), renewal or release.
	return fmt.Errorf("checkpoint: %w", err)
}

func (r *Relay) drop(fr, during string) {
	delete(r.owned, fr)
	r.lost.Add(1)
	if r.o.Hooks.Lost != nil {
		r.o.Hooks.Lost(fr)
	}
	r.log.Warn("lease lost: another relay instance holds the feed range; what this instance published since its last checkpoint will be republished there as duplicates",
		"feed_range", fr, "during", during)
}

// write replaces l's lease document, changed by change, on the condition
// that its ETag is still l.etag; errLost when it moved.
func (r *Relay) write(ctx context.Context, l *lease, change func(*Lease)) error {
	d := l.doc
	change(&d)
	body, err := r.document(d.ID, d)
	if err != nil {
		return err
	}
	cctx, cancel := r.call(ctx)
	etag, err := r.leases.ReplaceDocument(cctx, d.ID, idempotent.Document{ID: d.ID, Body: body}, l.etag)
	cancel()
	if errors.Is(err, idempotent.ErrPreconditionFailed) || errors.Is(err, idempotent.ErrNotFound) {
		return fmt.Errorf("%w (%v)", errLost, err)
	}
	if err != nil {
		return err
	}
	l.doc, l.etag = d, etag
	return nil
}

// Release frees every lease this instance holds, saving its published
// continuation, so that another instance can take the ranges over at once.
// Each write is bounded by CallTimeout; ctx may be already canceled only if
// the caller wants nothing released. A lease another instance took over
// meanwhile (this one paused past its expiry) is not this instance's to
// release: it is dropped and counted in Stats.Lost, not an error. It
// returns the errors of the other writes.
func (r *Relay) Release(ctx context.Context) error {
	var errs []error
	for _, fr := range r.Owned() {
		l := r.owned[fr]
		now := r.o.Now()
		err := r.write(ctx, l, func(d *Lease) {
			if d.Continuation != l.published {
				d.Continuation = l.published
				d.CheckpointedAt = now.UTC()
			}
			d.Owner = ""
			d.ExpiresAt = time.Time{}
		})
		delete(r.owned, fr)
		if errors.Is(err, errLost) {
			// Taken over while this instance was paused: nothing of ours
			// to release, and the new owner goes on from its checkpoint.
			r.lost.Add(1)
			if r.o.Hooks.Lost != nil {
				r.o.Hooks.Lost(fr)
			}
			r.log.Warn("lease lost before its release: another relay instance holds the feed range", "feed_range", fr, "error", err)
			continue
		}
		if err != nil {
			r.log.Warn("lease not released; it expires by itself", "feed_range", fr, "error", err)
			errs = append(errs, fmt.Errorf("release lease of %s: %w", fr, err))
			continue
		}
		r.log.Info("lease released", "feed_range", fr)
	}
	return errors.Join(errs...)
}
